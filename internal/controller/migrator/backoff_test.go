package migrator

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	testingclock "k8s.io/utils/clock/testing"

	"spotter.dev/spotter/internal/cloud/fake"
	"spotter.dev/spotter/internal/disruption"
	"spotter.dev/spotter/internal/plan"
	tu "spotter.dev/spotter/internal/testutil"
)

// spotController is a migrator over one fake spot group (0 to 10 nodes), on a
// fake clock, with a fake clientset: pure logic.
func spotController(opts Options) (*Controller, *fake.NodeGroup, *testingclock.FakeClock) {
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	p := fake.New("fake")
	g := fake.NewNodeGroup("spot", true, 0, 10)
	p.AddNodeGroup(g)
	c := New(nil, k8sfake.NewClientset(), p, plan.New(plan.Options{}), nil, disruption.NewWithWindows(1), clk, nil, opts)
	return c, g, clk
}

// Spot capacity that does not come within nodeReadyTimeout, on the injected
// clock, is cancelled and its group backed off: for spotUnavailableBackoff,
// twice as long after each further shortage, never more than
// maxSpotUnavailableBackoff, also after many shortages.
func TestSpotBackoffOnTheClock(t *testing.T) {
	const week = 7 * 24 * time.Hour
	c, g, clk := spotController(Options{NodeReadyTimeout: 10 * time.Minute, SpotUnavailableBackoff: time.Second, MaxSpotUnavailable: week})
	ctx := context.Background()
	node := tu.Node("od-1", tu.OnDemand())
	usable := func() bool {
		groups, err := c.spotGroups(ctx, clk.Now())
		if err != nil {
			t.Fatal(err)
		}
		return len(groups) == 1
	}

	// The first shortage: nothing comes Ready within ten minutes of the clock.
	g.SetCapacityUnavailable(true)
	done := make(chan bool)
	go func() {
		delivered, _ := c.addCapacity(ctx, node, g, 1, false)
		done <- delivered
	}()
	for waited := time.Duration(0); waited < 10*time.Minute; waited += time.Second {
		waitParked(t, clk, 1)
		select {
		case <-done:
			t.Fatalf("gave up on spot capacity after %s, want the node ready timeout of 10m", waited)
		default:
		}
		clk.Step(time.Second)
	}
	if <-done {
		t.Fatal("addCapacity reported capacity that never came")
	}
	if n := g.Unfulfilled(); n != 0 {
		t.Errorf("%d requests left after the timeout, want the request cancelled", n)
	}

	// Then each shortage (the group refuses at once) doubles the rest of the
	// group, up to a week.
	for shortages := 1; shortages <= 30; shortages++ {
		rest := week
		if shortages <= 20 {
			rest = min(time.Second<<(shortages-1), week)
		}
		clk.Step(rest - time.Second)
		if usable() {
			t.Fatalf("after %d shortages the group is used again %s later, want a rest of %s", shortages, rest-time.Second, rest)
		}
		clk.Step(time.Second)
		if !usable() {
			t.Fatalf("after %d shortages the group is still backed off once its rest of %s ended", shortages, rest)
		}
		g.SetNextError(fake.IncreaseSize, errors.New("no spot capacity"))
		if delivered, short := c.addCapacity(ctx, node, g, 1, false); delivered || !short {
			t.Fatalf("addCapacity: delivered %v, short %v; want short, as IncreaseSize failed", delivered, short)
		}
	}
}

// A new node takes pods once Ready, uncordoned and rid of the lifecycle
// taints it starts with; a taint of its kind (a spot taint the pods
// tolerate) or a PreferNoSchedule one does not hold it back.
func TestTakesPods(t *testing.T) {
	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue}
	node := func(unschedulable bool, taints ...corev1.Taint) *corev1.Node {
		return &corev1.Node{Spec: corev1.NodeSpec{Unschedulable: unschedulable, Taints: taints},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{ready}}}
	}
	notReady := node(false)
	notReady.Status.Conditions[0].Status = corev1.ConditionFalse
	for _, tc := range []struct {
		name string
		node *corev1.Node
		want bool
	}{
		{"Ready", node(false), true},
		{"not Ready", notReady, false},
		{"cordoned", node(true), false},
		{"not-ready taint still on", node(false, corev1.Taint{Key: "node.kubernetes.io/not-ready", Effect: corev1.TaintEffectNoSchedule}), false},
		{"uninitialized", node(false, corev1.Taint{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: corev1.TaintEffectNoSchedule}), false},
		{"spot taint", node(false, corev1.Taint{Key: "cloud.google.com/gke-spot", Value: "true", Effect: corev1.TaintEffectNoSchedule}), true},
		{"PreferNoSchedule", node(false, corev1.Taint{Key: "node.kubernetes.io/whatever", Effect: corev1.TaintEffectPreferNoSchedule}), true},
	} {
		if got := takesPods(tc.node); got != tc.want {
			t.Errorf("%s: takesPods = %v, want %v", tc.name, got, tc.want)
		}
	}
}
