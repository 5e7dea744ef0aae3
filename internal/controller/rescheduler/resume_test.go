package rescheduler

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"spotter.dev/spotter/internal/disruption"
	"spotter.dev/spotter/internal/drain"
	"spotter.dev/spotter/internal/plan"
	"spotter.dev/spotter/internal/testenv"
	tu "spotter.dev/spotter/internal/testutil"
)

// waitsClock records the waits of the rescheduler's loop and of what it calls.
type waitsClock struct {
	*testingclock.FakeClock
	mu    sync.Mutex
	waits []time.Duration
}

func (c *waitsClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	c.waits = append(c.waits, d)
	c.mu.Unlock()
	return c.FakeClock.After(d)
}

func (c *waitsClock) last() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.waits) == 0 {
		return 0
	}
	return c.waits[len(c.waits)-1]
}

// A drain found unfinished at start (the process was killed mid-drain) obeys
// the rules of a fresh drain: the node must still be drainable by the plan,
// it takes a slot of the shared disruption budget, and after it the
// rescheduler waits for the replacements and drainDelay before the next
// drain. Where it may not go on now, it is rolled back: the node is left as
// it was found. (The rescheduler resumed such drains before its first cycle,
// without any of these, and started the next drain at once.)
func TestResumedDrainObeysTheRules(t *testing.T) {
	env := testenv.StartAPIServer(t)
	ctx := testenv.Context(t, 3*time.Minute)
	reader, err := client.New(env.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const drainDelay = time.Hour

	cases := []struct {
		name string
		// spotCPU is the spot node's CPU; od-2 exists when fresh is set.
		spotCPU string
		fresh   bool
		// migrator holds the budget's only slot.
		migrator bool
		// resumed: od-1's pod is evicted and its marks removed; else the
		// drain is rolled back and the pod stays.
		resumed bool
	}{
		{name: "resumed, then drainDelay before the next drain", spotCPU: "8", fresh: true, resumed: true},
		{name: "the pod no longer fits on spot: rolled back", spotCPU: "50m"},
		{name: "the disruption budget is spent: rolled back", spotCPU: "8", migrator: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			create(ctx, t, env, tu.Node("od-1", tu.OnDemand(), tu.Capacity("4", "16Gi")), tu.Node("spot-1", tu.Spot(), tu.Capacity(tc.spotCPU, "16Gi")))
			runningPod(ctx, t, env, tu.Pod("web-0", tu.OnNode("od-1"), tu.OwnedBy("ReplicaSet", "web"), tu.CPU("100m"), tu.GracePeriod(0)))
			if tc.fresh {
				create(ctx, t, env, tu.Node("od-2", tu.OnDemand(), tu.Capacity("4", "16Gi")))
				runningPod(ctx, t, env, tu.Pod("api-0", tu.OnNode("od-2"), tu.OwnedBy("ReplicaSet", "api"), tu.CPU("200m"), tu.GracePeriod(0)))
			}
			t.Cleanup(func() { cleanUp(t, env) })
			crashMark(ctx, t, env, "od-1")

			clk := &waitsClock{FakeClock: testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
			budget := disruption.NewWithWindows(1)
			if tc.migrator {
				if err := budget.Acquire("od-9", "migrator"); err != nil {
					t.Fatal(err)
				}
			}
			drainer := drain.New(env.Client, clk, nil, drain.Options{Component: Component, Cordon: true})
			c := New(reader, plan.New(plan.Options{}), drainer, budget, clk, nil, Options{
				Interval: time.Minute, DrainDelay: drainDelay, ReplacementTimeout: time.Minute, OnRestart: drain.Resume})
			run, stop := context.WithCancel(ctx)
			done := make(chan error)
			go func() { done <- c.Start(run) }()
			// The first cycle is over when the loop waits for the next (an
			// interval or drainDelay); shorter waits are polls within the
			// cycle, let go on the fake clock.
			for start := time.Now(); clk.last() < time.Minute; time.Sleep(time.Millisecond) {
				if time.Since(start) > time.Minute {
					t.Fatalf("the first cycle did not end; waits %v", clk.waits)
				}
				if clk.HasWaiters() && clk.last() > 0 {
					clk.Step(clk.last())
				}
			}
			waitParked(t, clk.FakeClock, 1)
			stop()
			if err := <-done; err != nil {
				t.Fatal(err)
			}

			_, err := env.Client.CoreV1().Pods("default").Get(ctx, "web-0", metav1.GetOptions{})
			if evicted := apierrors.IsNotFound(err); evicted != tc.resumed {
				t.Errorf("od-1's pod evicted: %v, want %v (%v)", evicted, tc.resumed, err)
			}
			node, err := env.Client.CoreV1().Nodes().Get(ctx, "od-1", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			_, marked, _ := drain.MarkOf(node)
			if marked || node.Spec.Unschedulable || hasTaint(node, drain.DrainingTaintKey) {
				t.Errorf("od-1 left marked (%v), cordoned (%v) or tainted (%v): the drain should have finished or been rolled back",
					marked, node.Spec.Unschedulable, node.Spec.Taints)
			}
			if tc.fresh {
				if _, err := env.Client.CoreV1().Pods("default").Get(ctx, "api-0", metav1.GetOptions{}); err != nil {
					t.Errorf("od-2 drained in the same turn as the resumed drain of od-1: %v", err)
				}
				if got := clk.last(); got != drainDelay {
					t.Errorf("after the resumed drain the loop waits %s, want drainDelay %s", got, drainDelay)
				}
			}
			if budget.InUse() != map[bool]int{true: 1, false: 0}[tc.migrator] {
				t.Errorf("%d budget slots in use after the cycle, want only the migrator's", budget.InUse())
			}
		})
	}
}

func create(ctx context.Context, t *testing.T, env *testenv.Env, nodes ...*corev1.Node) {
	t.Helper()
	for _, n := range nodes {
		n, err := env.Client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// Ready, as a kubelet would report it, and without the not-ready
		// taint admission put on it, as the node lifecycle controller would
		// remove it.
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		if n, err = env.Client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		n.Spec.Taints = nil
		if _, err := env.Client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// runningPod creates pod and reports it Running and Ready.
func runningPod(ctx context.Context, t *testing.T, env *testenv.Env, pod *corev1.Pod) {
	t.Helper()
	p, err := env.Client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status = tu.RunningReady()
	if _, err := env.Client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// crashMark leaves on a node the marks a drain killed after marking leaves:
// annotation, taint and cordon.
func crashMark(ctx context.Context, t *testing.T, env *testenv.Env, name string) {
	t.Helper()
	node, err := env.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if node.Annotations == nil {
		node.Annotations = map[string]string{}
	}
	node.Annotations[drain.DrainingAnnotation] = fmt.Sprintf(`{"by":%q,"reason":"interrupted","at":"2026-01-01T00:00:00Z","cordoned":true}`, Component)
	node.Spec.Unschedulable = true
	node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: drain.DrainingTaintKey, Value: Component, Effect: corev1.TaintEffectNoSchedule})
	if _, err := env.Client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// cleanUp deletes every node and pod, at once.
func cleanUp(t *testing.T, env *testenv.Env) {
	ctx := context.Background()
	now := int64(0)
	if err := env.Client.CoreV1().Pods("default").DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &now}, metav1.ListOptions{}); err != nil {
		t.Error(err)
	}
	if err := env.Client.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Error(err)
	}
}

func hasTaint(node *corev1.Node, key string) bool {
	for _, t := range node.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}
