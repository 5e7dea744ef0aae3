package rescheduler

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"spotter.dev/spotter/internal/disruption"
	"spotter.dev/spotter/internal/drain"
	"spotter.dev/spotter/internal/plan"
	tu "spotter.dev/spotter/internal/testutil"
)

// A node whose drain failed rests, on the injected clock, for failureBackoff,
// twice as long after each further failure, never more than
// maxFailureBackoff: also after so many failures that doubling the base would
// overflow (a 24h base did after 17 doublings, and the node was drained again
// at once).
func TestCooldownsOnTheClock(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	pod := tu.Pod("web-0", tu.WithUID(), tu.OnNode("od-1"), tu.OwnedBy("ReplicaSet", "web"), tu.CPU("100m"))
	pod.Status = tu.RunningReady()
	reader := crfake.NewClientBuilder().WithObjects(tu.Node("od-1", tu.OnDemand()), tu.Node("spot-1", tu.Spot()), pod).Build()
	// The drain fails at once: the API server the drainer talks to has no
	// such node. Each attempt reads the node once, to mark it.
	kube := k8sfake.NewClientset()
	attempts := 0
	kube.PrependReactor("get", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		attempts++
		return false, nil, nil
	})
	drainer := drain.New(kube, clk, nil, drain.Options{Component: Component})
	const day = 24 * time.Hour
	c := New(reader, plan.New(plan.Options{}), drainer, disruption.NewWithWindows(1), clk, nil,
		Options{Interval: time.Minute, FailureBackoff: day, MaxFailureBackoff: 7 * day})
	ctx := context.Background()

	c.Cycle(ctx)
	if attempts != 1 {
		t.Fatalf("%d drain attempts in the first cycle, want 1: the plan should find od-1 drainable", attempts)
	}
	for failures := 1; failures <= 30; failures++ {
		rest := 7 * day
		if failures <= 3 {
			rest = day << (failures - 1)
		}
		clk.Step(rest - time.Second)
		c.Cycle(ctx)
		if attempts != failures {
			t.Fatalf("after %d failures: drained again %s after the last failure, want a rest of %s", failures, rest-time.Second, rest)
		}
		clk.Step(time.Second)
		c.Cycle(ctx)
		if attempts != failures+1 {
			t.Fatalf("after %d failures: not drained again once the rest of %s ended", failures, rest)
		}
	}
}
