package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"spotter.dev/spotter/internal/classify"
	"spotter.dev/spotter/internal/controller/preemptible"
	"spotter.dev/spotter/internal/drain"
	"spotter.dev/spotter/internal/lab"
	"spotter.dev/spotter/internal/testenv"
	tu "spotter.dev/spotter/internal/testutil"
)

// The lab's preemptible runs: 10 minutes (the shortest maxRunTime), drained
// from 8m30s before their end, so a node is due 90 s after it registered.
const (
	labMaxRunTime  = 10 * time.Minute
	labDrainBefore = 8*time.Minute + 30*time.Second
	labDueAfter    = labMaxRunTime - labDrainBefore
)

// `spotter controller` with the preemptible controller drains the nodes of
// preemptible VMs (GKE's label) whose run ends within drainBefore, one at a
// time with the default budget of one drain, the run that ends first first,
// never before a node is due, with no more web pods unavailable than their
// PDB allows; drained nodes stay cordoned with Spotter's record and no drain
// marks; a younger preemptible node registered when the others were already
// due is left alone, and so is a spot node that is not preemptible.
func TestPreemptibleNodesDrainedBeforeTheirRunEnds(t *testing.T) {
	env := testenv.StartLab(t)
	ctx := testenv.Context(t, 8*time.Minute)
	preemptibleNode := func(name string) lab.NodeSpec {
		return lab.NodeSpec{Name: name, Class: lab.ClassSpot, CPU: "4", Labels: map[string]string{classify.GKEPreemptibleLabel: "true"}}
	}
	env.CreateNodes(preemptibleNode("pre-old-b"))
	oldB := getNodeE2E(ctx, t, env, "pre-old-b")
	// pre-old-a registers at least a second later: its run ends later.
	waitPast(oldB.CreationTimestamp, time.Second)
	env.CreateNodes(preemptibleNode("pre-old-a"), lab.NodeSpec{Name: "spot-1", Class: lab.ClassSpot, CPU: "4", Labels: map[string]string{classify.GKESpotLabel: "true"}})
	oldA := getNodeE2E(ctx, t, env, "pre-old-a")

	// One web pod on each old node (anti-affinity, spot-1 cordoned while
	// they are placed), a PDB that lets one go at a time.
	setUnschedulable(ctx, t, env, true, "spot-1")
	web := tu.Deployment("web", 2, tu.CPU("500m"), tu.GracePeriod(1), tu.AntiAffinity("web", "kubernetes.io/hostname"))
	if _, err := env.Client.AppsV1().Deployments("default").Create(ctx, web, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.PolicyV1().PodDisruptionBudgets("default").Create(ctx, tu.PDB("web", "web", tu.MaxUnavailable(1)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range env.WaitForPodsRunning("default", "app=web", 2, time.Minute) {
		if !strings.HasPrefix(p.Spec.NodeName, "pre-old-") {
			t.Fatalf("web pod %s placed on %s, want the old preemptible nodes", p.Name, p.Spec.NodeName)
		}
	}
	setUnschedulable(ctx, t, env, false, "spot-1")
	waitUntainted(t, env, "spot-1")
	waitPDBsComputed(ctx, t, env)

	// Once both old nodes are due, a young one registers and Spotter starts:
	// the young node is due labDueAfter later.
	waitPast(oldA.CreationTimestamp, labDueAfter)
	env.CreateNodes(preemptibleNode("pre-young"))
	young := getNodeE2E(ctx, t, env, "pre-young")
	youngDue := young.CreationTimestamp.Add(labDueAfter)

	stopWatch := watchUnavailable(t, env, map[string]int{"web": 2})
	defer stopWatch()
	startPreemptible(t, env)

	testenv.Eventually(t, 3*time.Minute, "both old nodes drained, cordoned, with Spotter's record", func(ctx context.Context) (bool, string, error) {
		var states []string
		done := 0
		for _, name := range []string{"pre-old-b", "pre-old-a"} {
			n, err := env.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			r, err := preemptible.RecordOf(n)
			if err != nil {
				return false, "", err
			}
			_, marked, _ := drain.MarkOf(n)
			if r != nil && n.Spec.Unschedulable && !marked {
				done++
			}
			states = append(states, fmt.Sprintf("%s: record %v, cordoned %v, marked %v", name, r != nil, n.Spec.Unschedulable, marked))
		}
		return done == 2, strings.Join(states, "; "), nil
	})
	checkedYoung := time.Now().Before(youngDue.Add(-5 * time.Second))
	youngNode := getNodeE2E(ctx, t, env, "pre-young")
	if w := stopWatch()["web"]; w > 1 {
		t.Errorf("the watch saw %d web pods unavailable at once; the PDB allows 1", w)
	}

	// No web pod is left on a drained node.
	pods, err := env.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if strings.HasPrefix(p.Spec.NodeName, "pre-old-") && p.DeletionTimestamp == nil {
			t.Errorf("web pod %s still on %s after its drain", p.Name, p.Spec.NodeName)
		}
	}

	// The drains, from their Events: pre-old-b (whose run ends first) before
	// pre-old-a, the second started after the first ended (one at a time),
	// and none before its node was due.
	due := map[string]time.Time{"pre-old-b": oldB.CreationTimestamp.Add(labDueAfter), "pre-old-a": oldA.CreationTimestamp.Add(labDueAfter), "pre-young": youngDue}
	var spans []drainSpan
	for node, at := range due {
		s, ok := drainEvents(ctx, t, env, node)
		if !ok {
			continue
		}
		if s.started.Before(at) {
			t.Errorf("%s's drain started at %s, before it was due (%s)", node, s.started.Format(time.RFC3339Nano), at.Format(time.RFC3339))
		}
		spans = append(spans, s)
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].started.Before(spans[j].started) })
	if len(spans) < 2 || spans[0].node != "pre-old-b" || spans[1].node != "pre-old-a" {
		t.Errorf("drains %v, want pre-old-b's, then pre-old-a's", spans)
	}
	for i := 1; i < len(spans); i++ {
		if spans[i].started.Before(spans[i-1].ended) {
			t.Errorf("%s's drain started at %s, before %s's ended (%s): two at once with a budget of one",
				spans[i].node, spans[i].started.Format(time.RFC3339Nano), spans[i-1].node, spans[i-1].ended.Format(time.RFC3339Nano))
		}
	}

	// The young node, read while it was not due yet, was left alone. (On a
	// machine so slow that the old drains took until it was due, its drain
	// is legitimate and only the checks above apply.)
	if checkedYoung {
		r, _ := preemptible.RecordOf(youngNode)
		_, marked, _ := drain.MarkOf(youngNode)
		if r != nil || marked || youngNode.Spec.Unschedulable {
			t.Errorf("pre-young, not due until %s, was touched: record %v, marked %v, cordoned %v", youngDue.Format(time.RFC3339), r != nil, marked, youngNode.Spec.Unschedulable)
		}
	} else {
		t.Logf("pre-young became due (%s) before the old drains were checked; not checked for being left alone", youngDue.Format(time.RFC3339))
	}
	spot := getNodeE2E(ctx, t, env, "spot-1")
	if r, _ := preemptible.RecordOf(spot); r != nil || spot.Spec.Unschedulable {
		t.Errorf("spot-1 (spot, not preemptible) was drained or cordoned")
	}
}

// drainSpan is one drain of the preemptible controller, from its Events.
type drainSpan struct {
	node           string
	started, ended time.Time
}

func (s drainSpan) String() string {
	return fmt.Sprintf("%s [%s, %s]", s.node, s.started.Format("15:04:05.000"), s.ended.Format("15:04:05.000"))
}

// drainEvents returns the preemptible controller's drain of node, from the
// drain engine's SpotterDrainStarted and SpotterDrainSucceeded Events; false
// when it started none.
func drainEvents(ctx context.Context, t *testing.T, env *testenv.Env, node string) (drainSpan, bool) {
	t.Helper()
	first := func(reason string) (time.Time, int) {
		list, err := env.Client.EventsV1().Events("default").List(ctx, metav1.ListOptions{
			FieldSelector: fields.Set{"regarding.name": node, "reason": reason}.String()})
		if err != nil {
			t.Fatal(err)
		}
		var at time.Time
		n := 0
		for _, e := range list.Items {
			if e.ReportingController != "spotter-preemptible" {
				continue
			}
			n += occurrences(e)
			if when := e.EventTime.Time; at.IsZero() || when.Before(at) {
				at = when
			}
		}
		return at, n
	}
	started, n := first(drain.ReasonDrainStarted)
	if n == 0 {
		return drainSpan{}, false
	}
	if n > 1 {
		t.Errorf("%s was drained %d times, want once", node, n)
	}
	ended, _ := first(drain.ReasonDrainSucceeded)
	if ended.IsZero() {
		t.Errorf("%s's drain started at %s and never succeeded", node, started.Format(time.RFC3339Nano))
	}
	return drainSpan{node: node, started: started, ended: ended}, true
}

// occurrences counts an Event and its repeats.
func occurrences(e eventsv1.Event) int {
	if e.Series != nil {
		return int(e.Series.Count)
	}
	return 1
}

// waitPast waits until the clock is more than d past stamp (creation
// timestamps are whole seconds).
func waitPast(stamp metav1.Time, d time.Duration) {
	time.Sleep(time.Until(stamp.Add(d + time.Second)))
}

// startPreemptible runs `spotter controller` with the preemptible controller
// on the lab's short runs, quick eviction retries and the default budget of
// one drain at a time.
func startPreemptible(t *testing.T, env *testenv.Env) {
	t.Helper()
	config := filepath.Join(t.TempDir(), "spotter.yaml")
	body := fmt.Sprintf(`apiVersion: spotter.dev/v1alpha1
kind: SpotterConfiguration
preemptible:
  enabled: true
  maxRunTime: %s
  drainBefore: %s
  replacementTimeout: 30s
drain:
  timeout: 2m
  evictionBackoff: 200ms
  maxEvictionBackoff: 1s
`, labMaxRunTime, labDrainBefore)
	if err := os.WriteFile(config, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	testenv.StartSpotter(t, "controller", "controller", "--config", config, "--kubeconfig", env.Kubeconfig,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--leader-elect=false")
}
