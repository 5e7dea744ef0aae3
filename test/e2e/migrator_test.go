package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/clock"

	"spotter.dev/spotter/internal/cloud/kwok"
	"spotter.dev/spotter/internal/controller/migrator"
	"spotter.dev/spotter/internal/drain"
	"spotter.dev/spotter/internal/testenv"
	tu "spotter.dev/spotter/internal/testutil"
)

// migratorLab is a lab whose nodes come from the kwok provider: an on-demand
// group of three 4-CPU nodes, and a spot group whose capacity the test sets.
// Two Deployments (web, under a PDB maxUnavailable 1, and api) fill the
// on-demand nodes: 3 CPU of pods on each, so each needs a spot node of its own.
type migratorLab struct {
	env     *testenv.Env
	dir     string
	metrics string
	// drainExtra adds lines to the drain section of the configuration.
	drainExtra string
	// readyTimeout is migrator.nodeReadyTimeout; empty: the default (10m).
	readyTimeout string
}

func startMigratorLab(t *testing.T, spotCapacity string, grace int64) *migratorLab {
	t.Helper()
	l := startGroupsLab(t, fmt.Sprintf(`interval: 500ms
nodeGroups:
- id: od
  maxSize: 3
  initialSize: 3
  cpu: "4"
  instanceType: m5.xlarge
  pricePerHour: 0.192
- id: spot
  spot: true
  maxSize: 6
  cpu: "4"
  instanceType: m5.xlarge
  pricePerHour: 0.07
  provisioningDelay: 2s
%s`, spotCapacity), 3)
	env := l.env
	ctx := testenv.Context(t, 5*time.Minute)
	for _, w := range []string{"web", "api"} {
		d := tu.Deployment(w, 3, tu.CPU("1500m"), tu.GracePeriod(grace), tu.AntiAffinity(w, "kubernetes.io/hostname"))
		if _, err := env.Client.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := env.Client.PolicyV1().PodDisruptionBudgets("default").Create(ctx, tu.PDB("web", "web", tu.MaxUnavailable(1)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitForPodsRunning("default", "app=web", 3, time.Minute)
	env.WaitForPodsRunning("default", "app=api", 3, time.Minute)
	waitPDBsComputed(ctx, t, env)
	return l
}

// startGroupsLab starts a lab whose nodes come from the kwok provider
// configured by groups (a kwok.Config), with the od group's odNodes nodes
// Ready: brought up through the provider itself, so that they are its
// instances, by a short-lived provider.
func startGroupsLab(t *testing.T, groups string, odNodes int) *migratorLab {
	t.Helper()
	env := testenv.StartLab(t)
	ctx := testenv.Context(t, 5*time.Minute)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "groups.yaml"), []byte(groups), 0o644); err != nil {
		t.Fatal(err)
	}
	kc, err := kwok.LoadConfig(filepath.Join(dir, "groups.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := kwok.New(env.Client, clock.RealClock{}, *kc)
	if err != nil {
		t.Fatal(err)
	}
	pctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = p.Start(pctx); close(done) }()
	testenv.Eventually(t, time.Minute, fmt.Sprintf("%d on-demand nodes Ready", odNodes), func(ctx context.Context) (bool, string, error) {
		ready, err := readyNodes(ctx, env, kwok.NodeGroupLabel+"=od")
		return ready == odNodes, fmt.Sprintf("%d ready", ready), err
	})
	stop()
	<-done
	return &migratorLab{env: env, dir: dir, readyTimeout: "20s"}
}

// start runs `spotter controller` with the migrator on the kwok provider;
// migratorExtra adds lines to the migrator section.
func (l *migratorLab) start(t *testing.T, name, migratorExtra string) *testenv.Process {
	t.Helper()
	config := filepath.Join(l.dir, "spotter.yaml")
	body := fmt.Sprintf(`apiVersion: spotter.dev/v1alpha1
kind: SpotterConfiguration
cloud:
  provider: kwok
  kwokConfigFile: %s
migrator:
  enabled: true
  schedule: "@every 5s"
%s%s
rescheduler:
  enabled: false
drain:
  evictionBackoff: 200ms
  maxEvictionBackoff: 1s
%s`, filepath.Join(l.dir, "groups.yaml"), nodeReadyTimeoutLine(l.readyTimeout), strings.TrimRight(migratorExtra, "\n"), l.drainExtra)
	if err := os.WriteFile(config, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	l.metrics = testenv.FreeAddr(t)
	return testenv.StartSpotter(t, name, "controller", "--config", config, "--kubeconfig", l.env.Kubeconfig,
		"--metrics-bind-address", l.metrics, "--health-probe-bind-address", "0", "--leader-elect=false")
}

// watch records, until stop is called, the most web pods unavailable at once
// and the longest any pod stayed Pending (see watchPods).
func (l *migratorLab) watch(t *testing.T) (stop func() (worstUnavailable int, longestPending time.Duration)) {
	stopPods := watchPods(t, l.env, map[string]int{"web": 3})
	return func() (int, time.Duration) {
		seen := stopPods()
		return seen.worstUnavailable["web"], seen.longestPending
	}
}

func (l *migratorLab) nodesOf(ctx context.Context, t *testing.T, group string) []corev1.Node {
	t.Helper()
	nodes, err := l.env.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: kwok.NodeGroupLabel + "=" + group})
	if err != nil {
		t.Fatal(err)
	}
	return nodes.Items
}

// Make-before-break with spot capacity for everything: after the runs every
// pod runs on a spot node, the on-demand nodes are gone, no pod was Pending
// longer than scheduling takes, and the PDB held all along.
func TestMigratorReplacesOnDemandBySpot(t *testing.T) {
	l := startMigratorLab(t, "", 1)
	ctx := testenv.Context(t, 5*time.Minute)
	stopWatch := l.watch(t)
	l.start(t, "controller", "")

	testenv.Eventually(t, 3*time.Minute, "every on-demand node gone and every pod Running on spot", func(ctx context.Context) (bool, string, error) {
		od := l.nodesOf(ctx, t, "od")
		pods, err := l.env.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		onSpot := 0
		var where []string
		for _, p := range pods.Items {
			where = append(where, p.Name+"@"+p.Spec.NodeName)
			if strings.HasPrefix(p.Spec.NodeName, "spot-") && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				onSpot++
			}
		}
		return len(od) == 0 && onSpot == 6 && len(pods.Items) == 6, fmt.Sprintf("%d on-demand nodes; pods %v", len(od), where), nil
	})
	worst, pending := stopWatch()
	if worst > 1 {
		t.Errorf("the watch saw %d web pods unavailable at once; the PDB allows 1", worst)
	}
	t.Logf("longest Pending: %s", pending.Round(100*time.Millisecond))
	// make-before-break: the spot nodes were Ready before any eviction, so the
	// replacements only wait for the scheduler and kwok.
	if pending > 15*time.Second {
		t.Errorf("a pod was Pending for %s: the spot capacity should have been there before the drain", pending)
	}
	if n := len(l.nodesOf(ctx, t, "spot")); n != 3 {
		t.Errorf("%d spot nodes, want 3 (one per on-demand node)", n)
	}
	waitEventReason(t, l.env, migrator.ReasonMigrated)
	// The Node goes a moment before the migrator, polling for it, counts it.
	testenv.Eventually(t, 30*time.Second, "spotter_migrator_nodes_migrated_total 3", func(context.Context) (bool, string, error) {
		v := metricValue(scrape(t, l.env, l.metrics), "spotter_migrator_nodes_migrated_total")
		return v == "3", v, nil
	})
	body := scrape(t, l.env, l.metrics)
	for name, want := range map[string]string{
		`spotter_migrator_drains_total{outcome="started"}`:   "3",
		`spotter_migrator_drains_total{outcome="succeeded"}`: "3",
		`spotter_migrator_drains_total{outcome="failed"}`:    "0",
		`spotter_migrator_pods_evicted_total`:                "6",
	} {
		if got := metricValue(body, name); got != want {
			t.Errorf("%s = %s, want %s", name, got, want)
		}
	}
}

// A drain that cannot finish in time (the pods' grace periods outlast
// drain.timeout) fails and is rolled back after evicting pods: the failure,
// the rollback and those evictions are counted (what SpotterMigrationsFailing
// alerts on), and the Warning Event names the node.
func TestMigratorFailedDrainsCounted(t *testing.T) {
	l := startMigratorLab(t, "", 30)
	l.drainExtra = "  timeout: 10s\n"
	l.start(t, "controller", "")
	waitEventReason(t, l.env, migrator.ReasonMigrationFailed)
	testenv.Eventually(t, time.Minute, "a failed, rolled-back drain and its evictions counted", func(context.Context) (bool, string, error) {
		body := scrape(t, l.env, l.metrics)
		failed := metricValue(body, `spotter_migrator_drains_total{outcome="failed"}`)
		rolledBack := metricValue(body, `spotter_migrator_drains_total{outcome="rolled_back"}`)
		evicted := metricValue(body, "spotter_migrator_pods_evicted_total")
		positive := func(v string) bool { n, err := strconv.Atoi(v); return err == nil && n > 0 }
		return positive(failed) && positive(rolledBack) && positive(evicted),
			fmt.Sprintf("failed %s, rolled back %s, evicted %s", failed, rolledBack, evicted), nil
	})
	if v := metricValue(scrape(t, l.env, l.metrics), `spotter_migrator_drains_total{outcome="succeeded"}`); v != "0" {
		t.Errorf("%s drains succeeded; none can within 10 s of 30 s grace periods", v)
	}
}

// No spot capacity: the request is cancelled, nothing is drained, the group
// backs off, and the reason is in an Event and a metric.
func TestMigratorSpotUnavailable(t *testing.T) {
	l := startMigratorLab(t, "  capacityLimit: 0\n", 1)
	ctx := testenv.Context(t, 5*time.Minute)
	before := podsByNode(ctx, t, l.env)
	l.start(t, "controller", "")

	waitEventReason(t, l.env, migrator.ReasonSpotUnavailable)
	testenv.Eventually(t, 30*time.Second, "the spot shortage counted", func(ctx context.Context) (bool, string, error) {
		body := scrape(t, l.env, l.metrics)
		return strings.Contains(body, `spotter_migrator_spot_unavailable_total{node_group="spot"} 1`), "", nil
	})
	if after := podsByNode(ctx, t, l.env); after != before {
		t.Errorf("pods moved although no spot capacity came:\nbefore %s\nafter  %s", before, after)
	}
	for _, n := range l.nodesOf(ctx, t, "od") {
		if _, marked, _ := drain.MarkOf(&n); marked || n.Labels[migrator.SelectedForDeletionLabel] != "" || n.Spec.Unschedulable {
			t.Errorf("%s was touched: labels %v annotations %v", n.Name, n.Labels, n.Annotations)
		}
	}
	if n := len(l.nodesOf(ctx, t, "spot")); n != 0 {
		t.Errorf("%d spot nodes exist with a capacity limit of 0", n)
	}
}

// Spot capacity for one node of three: exactly one on-demand node migrates.
func TestMigratorPartialCapacity(t *testing.T) {
	l := startMigratorLab(t, "  capacityLimit: 1\n", 1)
	ctx := testenv.Context(t, 5*time.Minute)
	l.start(t, "controller", "")

	testenv.Eventually(t, 2*time.Minute, "one on-demand node replaced and a spot shortage recorded", func(ctx context.Context) (bool, string, error) {
		body := scrape(t, l.env, l.metrics)
		od := l.nodesOf(ctx, t, "od")
		return len(od) == 2 && strings.Contains(body, `spotter_migrator_spot_unavailable_total{node_group="spot"}`),
			fmt.Sprintf("%d on-demand nodes", len(od)), nil
	})
	// Two more runs (the group is backed off): still exactly one.
	waitCycles(t, l.env, l.metrics, "spotter_migrator_runs_total", 3)
	if od := l.nodesOf(ctx, t, "od"); len(od) != 2 {
		t.Errorf("%d on-demand nodes left, want 2", len(od))
	}
	if spot := l.nodesOf(ctx, t, "spot"); len(spot) != 1 {
		t.Errorf("%d spot nodes, want 1", len(spot))
	}
	env := l.env
	env.WaitForPodsRunning("default", "app=web", 3, time.Minute)
	env.WaitForPodsRunning("default", "app=api", 3, time.Minute)
}

// Two spot groups, the cheaper one without capacity: the migrator asks it
// once, backs it off and, in the same run, replaces the on-demand nodes by
// the other group's nodes; it does not ask the backed-off group again for the
// run's next nodes. (The other group's instance type differs: new nodes of
// the same type and zone would end the backoff, as capacity returning.)
func TestMigratorFallsBackToTheNextSpotGroup(t *testing.T) {
	l := startMigratorLab(t, `  capacityLimit: 0
- id: spot2
  spot: true
  maxSize: 6
  cpu: "4"
  instanceType: m5a.xlarge
  pricePerHour: 0.08
  provisioningDelay: 2s
`, 1)
	l.readyTimeout = "" // the default, 10m: the stock-out is read from the group, not waited out
	proc := l.start(t, "controller", "")
	if note := firstEventNote(t, l.env, migrator.ReasonSpotUnavailable, stockOutWithin); !strings.Contains(note, "spot node group spot ") {
		t.Errorf("the first shortage %q is not the group without capacity's", note)
	}
	logRequestToShortage(t, l.env)
	testenv.Eventually(t, 3*time.Minute, "every on-demand node gone and every pod Running on spot2", func(ctx context.Context) (bool, string, error) {
		od := l.nodesOf(ctx, t, "od")
		where := podsByNode(ctx, t, l.env)
		return len(od) == 0 && strings.Count(where, "@spot2-") == 6, fmt.Sprintf("%d on-demand nodes; %s", len(od), where), nil
	})
	// The first run did it all: the shortage did not end it.
	logged, err := os.ReadFile(proc.Log)
	if err != nil {
		t.Fatal(err)
	}
	var first struct{ Migrated []string }
	for line := range strings.Lines(string(logged)) {
		if strings.Contains(line, `"msg":"Migration run done"`) {
			if err := json.Unmarshal([]byte(line), &first); err != nil {
				t.Fatalf("%v: %s", err, line)
			}
			break
		}
	}
	if len(first.Migrated) != 3 {
		t.Errorf("the first run replaced %v, want the 3 on-demand nodes", first.Migrated)
	}
	ctx := testenv.Context(t, time.Minute)
	if n := len(l.nodesOf(ctx, t, "spot")); n != 0 {
		t.Errorf("%d nodes in the group without capacity", n)
	}
	body := scrape(t, l.env, l.metrics)
	if v := metricValue(body, `spotter_migrator_spot_unavailable_total{node_group="spot"}`); v != "1" {
		t.Errorf("the group without capacity was found short %s time(s), want 1 (backed off after the first)", v)
	}
}

// kill -9 in the middle of a replacement, then a restart: the node selected
// for deletion is finished first, not forgotten.
func TestMigratorRestartFinishesSelected(t *testing.T) {
	// Long grace periods keep the drain going long enough to kill it midway.
	l := startMigratorLab(t, "", 20)
	env := l.env
	first := l.start(t, "first", "")
	var selected string
	testenv.Eventually(t, 2*time.Minute, "a node selected for deletion and draining", func(ctx context.Context) (bool, string, error) {
		for _, n := range l.nodesOf(ctx, t, "od") {
			if _, marked, _ := drain.MarkOf(&n); marked && n.Labels[migrator.SelectedForDeletionLabel] != "" {
				selected = n.Name
				return true, "", nil
			}
		}
		return false, "", nil
	})
	first.Kill()
	second := l.start(t, "second", "")
	// A kill that cuts an eviction short after the apiserver recorded it in
	// the budget's status.disruptedPods but before it deleted the pod (seen in
	// CI) leaves the budget counting that pod as disrupted until the
	// disruption controller's two-minute timeout: the second controller's
	// eviction is refused until then, and retried. Wait past it.
	testenv.Eventually(t, 4*time.Minute, selected+" finished: deleted", func(ctx context.Context) (bool, string, error) {
		_, err := env.Client.CoreV1().Nodes().Get(ctx, selected, metav1.GetOptions{})
		return nodeGone(err)
	})
	if log, _ := os.ReadFile(second.Log); !strings.Contains(string(log), "Finishing the replacement of a node selected for deletion") {
		t.Error("the second controller did not finish the selected node first")
	}
}

// podsByNode renders where each pod runs.
func podsByNode(ctx context.Context, t *testing.T, env *testenv.Env) string {
	t.Helper()
	pods, err := env.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range pods.Items {
		out = append(out, p.Name+"@"+p.Spec.NodeName)
	}
	return strings.Join(out, " ")
}

// waitEventReason waits for an Event with reason, on any object.
func waitEventReason(t *testing.T, env *testenv.Env, reason string) {
	t.Helper()
	firstEventNote(t, env, reason, 2*time.Minute)
}

// firstEventNote waits up to within for an Event of reason and returns its
// note.
func firstEventNote(t *testing.T, env *testenv.Env, reason string, within time.Duration) string {
	t.Helper()
	var note string
	testenv.Eventually(t, within, "an Event "+reason, func(ctx context.Context) (bool, string, error) {
		list, err := env.Client.EventsV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: fields.Set{"reason": reason}.String()})
		if err != nil || len(list.Items) == 0 {
			return false, "", err
		}
		note = list.Items[0].Note
		return true, "", nil
	})
	return note
}

// logRequestToShortage logs the time from the first SpotterSpotRequested
// Event to the first SpotterSpotUnavailable one, by their event times: how
// long a stock-out held the migrator (BENCHMARKS.md#migrator-stock-out).
func logRequestToShortage(t *testing.T, env *testenv.Env) {
	t.Helper()
	first := func(reason string) time.Time {
		list, err := env.Client.EventsV1().Events("").List(testenv.Context(t, 10*time.Second), metav1.ListOptions{FieldSelector: fields.Set{"reason": reason}.String()})
		if err != nil || len(list.Items) == 0 {
			t.Fatalf("no Event %s: %v", reason, err)
		}
		at := list.Items[0].EventTime.Time
		for _, e := range list.Items[1:] {
			if e.EventTime.Before(&metav1.MicroTime{Time: at}) {
				at = e.EventTime.Time
			}
		}
		return at
	}
	t.Logf("spot requested to spot unavailable: %s", first(migrator.ReasonSpotUnavailable).Sub(first(migrator.ReasonSpotRequested)).Round(10*time.Millisecond))
}

// nodeReadyTimeoutLine is the migrator's nodeReadyTimeout setting of a
// lab's configuration: none (the default) when v is empty.
func nodeReadyTimeoutLine(v string) string {
	if v == "" {
		return ""
	}
	return "  nodeReadyTimeout: " + v + "\n"
}

// stockOutWithin is how soon a stock-out the cloud reports ends the wait for
// spot capacity, with the default nodeReadyTimeout (10m): the migrator reads
// the cloud's answer at every poll.
const stockOutWithin = 90 * time.Second

// Drain-first, the older tools' order: with spot room already there, each
// on-demand node is drained and deleted, and its pods go to spot.
func TestMigratorDrainFirst(t *testing.T) {
	l := startMigratorLab(t, "  initialSize: 3\n", 1)
	l.start(t, "controller", "  mode: DrainFirst\n")
	testenv.Eventually(t, 3*time.Minute, "every on-demand node gone and every pod Running on spot", func(ctx context.Context) (bool, string, error) {
		od := l.nodesOf(ctx, t, "od")
		where := podsByNode(ctx, t, l.env)
		return len(od) == 0 && strings.Count(where, "@spot-") == 6, fmt.Sprintf("%d on-demand nodes; %s", len(od), where), nil
	})
	if n := len(l.nodesOf(testenv.Context(t, time.Minute), t, "spot")); n != 3 {
		t.Errorf("%d spot nodes, want the 3 that were there: drain-first asks for none", n)
	}
}

// Dry run, in both modes: the migrator says what it would do and changes
// nothing.
func TestMigratorDryRun(t *testing.T) {
	for _, mode := range []string{"MakeBeforeBreak", "DrainFirst"} {
		t.Run(mode, func(t *testing.T) {
			l := startMigratorLab(t, "  initialSize: 1\n", 1)
			ctx := testenv.Context(t, 5*time.Minute)
			testenv.Eventually(t, time.Minute, "the spot node", func(ctx context.Context) (bool, string, error) {
				return len(l.nodesOf(ctx, t, "spot")) == 1, "", nil
			})
			before := podsByNode(ctx, t, l.env)
			l.start(t, "controller", "  dryRun: true\n  mode: "+mode+"\n")
			waitEventReason(t, l.env, migrator.ReasonWouldMigrate)
			// Another whole run: the next one has begun.
			waitCycles(t, l.env, l.metrics, "spotter_migrator_runs_total", 2)
			if after := podsByNode(ctx, t, l.env); after != before {
				t.Errorf("a dry run moved pods:\nbefore %s\nafter  %s", before, after)
			}
			if od := l.nodesOf(ctx, t, "od"); len(od) != 3 {
				t.Errorf("a dry run deleted on-demand nodes: %d left", len(od))
			}
			if n := len(l.nodesOf(ctx, t, "spot")); n != 1 {
				t.Errorf("a dry run changed the spot group: %d nodes", n)
			}
			for _, n := range l.nodesOf(ctx, t, "od") {
				if _, marked, _ := drain.MarkOf(&n); marked || n.Labels[migrator.SelectedForDeletionLabel] != "" || n.Spec.Unschedulable {
					t.Errorf("a dry run marked %s", n.Name)
				}
			}
		})
	}
}

// readyNodes counts the Ready nodes selector selects.
func readyNodes(ctx context.Context, env *testenv.Env, selector string) (int, error) {
	nodes, err := env.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return 0, err
	}
	ready := 0
	for _, n := range nodes.Items {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				ready++
			}
		}
	}
	return ready, nil
}

// podsOnSpot counts the Running pods of the default namespace, not being
// deleted, on nodes whose name starts with prefix and whose label key is
// value (the cloud's spot label).
func podsOnSpot(ctx context.Context, env *testenv.Env, prefix, key, value string) (int, error) {
	pods, err := env.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	onSpot := 0
	for _, p := range pods.Items {
		if strings.HasPrefix(p.Spec.NodeName, prefix) && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			if n, err := env.Client.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{}); err == nil && n.Labels[key] == value {
				onSpot++
			}
		}
	}
	return onSpot, nil
}

// nodeGone is a testenv.Eventually condition made of the error of a Get of a
// Node: done when the apiserver says it is not found, and not yet for any
// other error (an expired context, a refused connection), which says nothing
// of the node.
func nodeGone(err error) (bool, string, error) {
	switch {
	case err == nil:
		return false, "the node is still there", nil
	case apierrors.IsNotFound(err):
		return true, "", nil
	}
	return false, "", err
}
