package e2e

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"spotter.dev/spotter/internal/agent/interrupt"
	awsprovider "spotter.dev/spotter/internal/cloud/aws"
	"spotter.dev/spotter/internal/drain"
	"spotter.dev/spotter/internal/emulator/awsapi"
	"spotter.dev/spotter/internal/emulator/awsimds"
	"spotter.dev/spotter/internal/testenv"
	tu "spotter.dev/spotter/internal/testutil"
)

// The controller's interruption queue on AWS, no agent: EventBridge's events
// reach an SQS queue in the emulator, and `spotter controller` reads them
// through aws-sdk-go-v2.
//
//   - A scale-in held by a terminating lifecycle hook: the node is drained,
//     then the action completed; the instance terminates and its Node, which
//     no cloud controller manager deletes here, is deleted.
//   - A rebalance recommendation: handled as agent.rebalanceAction says
//     (Taint: a PreferNoSchedule taint, no cordon).
//   - A spot interruption warning: the instance's node is tainted and
//     cordoned within 2 s of the message, its ordinary pods evicted before
//     its critical ones, all gone before the two minutes end.
//   - A malformed message, one for another cluster's instance and a repeat
//     of the warning: deleted and counted.
//
// Every message leaves the queue.
func TestAWSInterruptionQueue(t *testing.T) {
	l := startAWSLab(t)
	l.keepNodes.Store(true)
	const queueName = "spotter-events"
	l.emu.RouteEventsTo(queueName)
	queueURL := os.Getenv("AWS_ENDPOINT_URL") + "/123456789012/" + queueName
	ctx := testenv.Context(t, 8*time.Minute)
	env := l.env

	if err := l.emu.UpdateGroupSize("spot", 0, 6, 2); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "two spot nodes Ready", func(ctx context.Context) (bool, string, error) {
		n := l.readyNodes(ctx, t, "SPOT")
		return n == 2, fmt.Sprintf("%d ready", n), nil
	})
	onSpot := tu.RequireNodeLabel(awsprovider.CapacityTypeLabel, "SPOT")
	for _, d := range []struct {
		name     string
		replicas int32
		opts     []tu.PodOption
	}{
		{"q-batch", 4, nil},
		{"q-dns", 2, []tu.PodOption{func(p *corev1.Pod) { p.Spec.PriorityClassName = "system-cluster-critical" }}},
	} {
		dep := tu.Deployment(d.name, d.replicas, append([]tu.PodOption{tu.CPU("100m"), tu.GracePeriod(1), onSpot}, d.opts...)...)
		if _, err := env.Client.AppsV1().Deployments("default").Create(ctx, dep, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	env.WaitForPodsRunning("default", "app=q-batch", 4, time.Minute)
	env.WaitForPodsRunning("default", "app=q-dns", 2, time.Minute)

	metrics := startQueueController(t, l, queueURL)

	// Noise: a malformed message, and a warning for another cluster's
	// instance.
	for _, b := range []string{"not json", spotWarning("i-0f0f0f0f0f0f0f0f0", "foreign-event")} {
		if _, err := l.emu.SendMessage(queueName, b); err != nil {
			t.Fatal(err)
		}
	}

	// A scale-in held by a lifecycle hook: drained, then completed.
	if err := l.emu.PutLifecycleHook("spot", awsapi.LifecycleHook{Name: "drain", Transition: awsapi.TransitionTerminating, HeartbeatTimeout: 5 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	before := spotInstances(t, l.emu)
	if err := l.emu.UpdateGroupSize("spot", 0, 6, 1); err != nil {
		t.Fatal(err)
	}
	// The instance Auto Scaling chose is the one its lifecycle action (the
	// message the hook sent) names. A node without pods is drained and the
	// action completed within a second, so the hold itself may be over
	// before a poll would see it.
	var held, victim string
	testenv.Eventually(t, 30*time.Second, "an instance held by the lifecycle hook", func(context.Context) (bool, string, error) {
		held, victim = "", ""
		for _, b := range l.emu.QueueHistory(queueName) {
			for _, id := range before {
				if strings.Contains(b, awsapi.DetailTypeTerminateHook) && strings.Contains(b, id) {
					held = id
				}
			}
		}
		for _, id := range before {
			if id != held {
				victim = id
			}
		}
		return held != "" && victim != "", "", nil
	})
	heldAt := time.Now()
	heldNode, victimNode := nodeName(held), nodeName(victim)
	testenv.Eventually(t, time.Minute, "the lifecycle action completed", func(context.Context) (bool, string, error) {
		return !l.emu.HookWaiting(held), "", nil
	})
	completedAt := time.Now()
	t.Logf("scale-in held by the lifecycle hook to the action completed (node drained): %s", completedAt.Sub(heldAt).Round(10*time.Millisecond))
	if left := podsOnNode(ctx, t, env, heldNode); len(left) != 0 {
		t.Errorf("the lifecycle action was completed with pods on %s: %v", heldNode, podNames(left))
	}
	testenv.Eventually(t, 30*time.Second, "the Node of the terminated instance deleted", func(ctx context.Context) (bool, string, error) {
		_, err := env.Client.CoreV1().Nodes().Get(ctx, heldNode, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		return false, "still there", err
	})
	// The instance shuts down for the emulator's TerminateDelay (1 s), then
	// EC2 says it is terminated.
	t.Logf("lifecycle action completed to the Node of the terminated instance deleted: %s", time.Since(completedAt).Round(10*time.Millisecond))
	env.WaitForPodsRunning("default", "app=q-batch", 4, time.Minute)
	env.WaitForPodsRunning("default", "app=q-dns", 2, time.Minute)

	// A rebalance recommendation, as configured: a PreferNoSchedule taint.
	if err := l.emu.RecommendRebalance(victim); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, victimNode+" tainted PreferNoSchedule", func(ctx context.Context) (bool, string, error) {
		n, err := env.Client.CoreV1().Nodes().Get(ctx, victimNode, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return hasTaintEffect(n, interrupt.TaintKey, corev1.TaintEffectPreferNoSchedule), fmt.Sprint(n.Spec.Taints), nil
	})
	if n := getNodeE2E(ctx, t, env, victimNode); n.Spec.Unschedulable {
		t.Errorf("a rebalance recommendation cordoned %s; agent.rebalanceAction says Taint", victimNode)
	}

	// A spot interruption warning.
	victims := podsOnNode(ctx, t, env, victimNode)
	if len(victims) != 6 {
		t.Fatalf("%d pods on %s, want the 6 of the Deployments", len(victims), victimNode)
	}
	deleted := watchDeletions(ctx, t, env)
	notice := time.Now()
	if err := l.emu.InterruptSpot(victim); err != nil {
		t.Fatal(err)
	}
	latency := waitCordoned(t, env, victimNode, notice)
	t.Logf("spot interruption warning to taint and cordon, through the queue: %s", latency)
	if latency > 2*time.Second {
		t.Errorf("cordoned %s after the message, want within 2 s", latency)
	}
	// EventBridge delivers at least once: the warning again.
	var warning string
	for _, b := range l.emu.QueueHistory(queueName) {
		if strings.Contains(b, awsapi.DetailTypeSpotWarning) && strings.Contains(b, victim) {
			warning = b
		}
	}
	if _, err := l.emu.SendMessage(queueName, warning); err != nil {
		t.Fatal(err)
	}
	waitGone(t, env, victims, time.Until(notice.Add(awsapi.SpotInterruptionNotice)))
	t.Logf("all %d pods of the interrupted node gone %s after the warning", len(victims), time.Since(notice).Round(100*time.Millisecond))
	order := deleted()
	var lastOrdinary, firstCritical time.Time
	for _, p := range victims {
		at, ok := order[p.Name]
		switch {
		case !ok:
			t.Errorf("pod %s left without a deletion seen", p.Name)
		case p.Spec.PriorityClassName == "system-cluster-critical":
			if firstCritical.IsZero() || at.Before(firstCritical) {
				firstCritical = at
			}
		case at.After(lastOrdinary):
			lastOrdinary = at
		}
	}
	if firstCritical.IsZero() || firstCritical.Before(lastOrdinary) {
		t.Errorf("the first critical pod was evicted at %s, the last ordinary one at %s: want the critical ones last",
			firstCritical.Format(time.StampMilli), lastOrdinary.Format(time.StampMilli))
	}

	// Every message handled and deleted, the noise counted.
	testenv.Eventually(t, 30*time.Second, "the queue empty", func(context.Context) (bool, string, error) {
		left := l.emu.QueueMessages(queueName)
		return len(left) == 0, fmt.Sprintf("%d left", len(left)), nil
	})
	scraped := scrape(t, env, metrics)
	for _, want := range []string{
		`spotter_queue_messages_total{outcome="malformed"} 1`,
		`spotter_queue_messages_total{outcome="foreign"} 1`,
		`spotter_queue_messages_total{outcome="duplicate"} 1`,
		`spotter_queue_messages_total{outcome="failed"} 0`,
		`spotter_queue_lifecycle_actions_total{result="completed"} 1`,
	} {
		if !strings.Contains(scraped, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	t.Logf("queue metrics: handled %s, ignored %s", labelled(scraped, `spotter_queue_messages_total{outcome="handled"}`), labelled(scraped, `spotter_queue_messages_total{outcome="ignored"}`))
}

// spotInstances returns the IDs of the running spot instances.
func spotInstances(t *testing.T, emu *awsapi.Server) []string {
	t.Helper()
	var out []string
	for _, i := range emu.Instances() {
		if i.Spot && i.State == awsapi.StateRunning {
			out = append(out, i.ID)
		}
	}
	return out
}

// spotWarning is a spot interruption warning as EventBridge delivers it.
func spotWarning(instance, id string) string {
	return fmt.Sprintf(`{"version":"0","id":%q,"detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","account":"123456789012","time":%q,"region":"us-east-1","resources":["arn:aws:ec2:us-east-1:123456789012:instance/%s"],"detail":{"instance-id":%q,"instance-action":"terminate"}}`, id, time.Now().UTC().Format(time.RFC3339), instance, instance)
}

// watchDeletions records when each pod of "default" is first seen deleted
// (deletionTimestamp set, or gone); the returned func gives the record.
func watchDeletions(ctx context.Context, t *testing.T, env *testenv.Env) func() map[string]time.Time {
	t.Helper()
	w, err := env.Client.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]time.Time{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || (ev.Type != watch.Deleted && p.DeletionTimestamp == nil) {
				continue
			}
			mu.Lock()
			if _, ok := seen[p.Name]; !ok {
				seen[p.Name] = time.Now()
			}
			mu.Unlock()
		}
	}()
	t.Cleanup(func() { w.Stop(); <-done })
	return func() map[string]time.Time {
		mu.Lock()
		defer mu.Unlock()
		out := make(map[string]time.Time, len(seen))
		for k, v := range seen {
			out[k] = v
		}
		return out
	}
}

// labelled returns the value of one labelled sample, or "absent".
func labelled(body, sample string) string {
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			return v
		}
	}
	return "absent"
}

// startQueueController runs `spotter controller` reading the interruption
// queue at queueURL, with agent.rebalanceAction Taint, and waits until it
// reads; it returns the address of its metrics.
func startQueueController(t *testing.T, l *awsLab, queueURL string) string {
	t.Helper()
	config := filepath.Join(l.dir, "queue.yaml")
	body := `apiVersion: spotter.dev/v1alpha1
kind: SpotterConfiguration
cloud:
  aws:
    region: us-east-1
    interruptionQueueURL: ` + queueURL + `
rescheduler:
  enabled: false
agent:
  rebalanceAction: Taint
drain:
  evictionBackoff: 200ms
  maxEvictionBackoff: 1s
`
	if err := os.WriteFile(config, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	metrics := testenv.FreeAddr(t)
	testenv.StartSpotter(t, "controller", "controller", "--config", config, "--kubeconfig", l.env.Kubeconfig,
		"--metrics-bind-address", metrics, "--health-probe-bind-address", "0", "--leader-elect=false")
	testenv.Eventually(t, 30*time.Second, "the controller to read the queue", func(context.Context) (bool, string, error) {
		return l.emu.Calls("ReceiveMessage") > 0, "", nil
	})
	return metrics
}

// The agent and the interruption queue both hear of one spot interruption:
// the agent from the instance metadata service, the controller from the
// queue. The node is drained once, by whichever recorded the notice first;
// the other records that it leaves the node to it.
func TestAWSQueueAndAgentDrainOnce(t *testing.T) {
	l := startAWSLab(t)
	const queueName = "spotter-events"
	l.emu.RouteEventsTo(queueName)
	queueURL := os.Getenv("AWS_ENDPOINT_URL") + "/123456789012/" + queueName
	ctx := testenv.Context(t, 5*time.Minute)
	env := l.env
	if err := l.emu.UpdateGroupSize("spot", 0, 6, 1); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "a spot node Ready", func(ctx context.Context) (bool, string, error) {
		n := l.readyNodes(ctx, t, "SPOT")
		return n == 1, fmt.Sprintf("%d ready", n), nil
	})
	spot := spotInstances(t, l.emu)[0]
	node := nodeName(spot)
	dep := tu.Deployment("q-web", 3, tu.CPU("100m"), tu.GracePeriod(1), tu.RequireNodeLabel(awsprovider.CapacityTypeLabel, "SPOT"))
	if _, err := env.Client.AppsV1().Deployments("default").Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitForPodsRunning("default", "app=q-web", 3, time.Minute)
	victims := podsOnNode(ctx, t, env, node)

	startQueueController(t, l, queueURL)
	imds := awsimds.New(awsimds.Options{})
	srv := httptest.NewServer(imds)
	t.Cleanup(srv.Close)
	startAgent(t, env, node, "aws", srv.URL, "")

	at := time.Now()
	imds.SetInstanceAction("terminate", at.Add(awsapi.SpotInterruptionNotice))
	if err := l.emu.InterruptSpot(spot); err != nil {
		t.Fatal(err)
	}
	waitGone(t, env, victims, awsapi.SpotInterruptionNotice)

	// Both have seen the notice once the one that lost the race says so.
	var handledBy []string
	testenv.Eventually(t, 30*time.Second, "both components to have seen the notice", func(ctx context.Context) (bool, string, error) {
		list, err := env.Client.EventsV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: fields.Set{"reason": interrupt.ReasonNotice}.String()})
		if err != nil {
			return false, "", err
		}
		handledBy = nil
		for _, e := range list.Items {
			if e.Regarding.Name == node {
				handledBy = append(handledBy, e.ReportingController+": "+e.Note)
			}
		}
		return len(handledBy) == 2, fmt.Sprint(handledBy), nil
	})
	list, err := env.Client.EventsV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: fields.Set{"reason": drain.ReasonDrainStarted}.String()})
	if err != nil {
		t.Fatal(err)
	}
	var drains []string
	for _, e := range list.Items {
		if e.Regarding.Name == node {
			drains = append(drains, e.ReportingController+": "+e.Note)
		}
	}
	if len(drains) != 1 {
		t.Errorf("%d drains of %s, want 1: %v (notices: %v)", len(drains), node, drains, handledBy)
	}
	left := 0
	for _, h := range handledBy {
		if strings.Contains(h, "which saw it first") {
			left++
		}
	}
	if left != 1 {
		t.Errorf("notices %v: want one of the two to leave the node to the other", handledBy)
	}
	t.Logf("notices: %v; drains: %v", handledBy, drains)
}
