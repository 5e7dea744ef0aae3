package rescheduler

import (
	"context"
	"testing"
	"time"

	k8sfake "k8s.io/client-go/kubernetes/fake"
	testingclock "k8s.io/utils/clock/testing"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"spotter.dev/spotter/internal/disruption"
	"spotter.dev/spotter/internal/drain"
	"spotter.dev/spotter/internal/plan"
	tu "spotter.dev/spotter/internal/testutil"
)

// An on-demand node with nothing to move is no work for the rescheduler (the
// autoscaler removes it): spotter_rescheduler_drainable_nodes counts only the
// nodes it would drain. After both nodes of the issue were emptied, the gauge
// stayed at 2.
func TestDrainableNodesCountsOnlyNodesWithPodsToMove(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	pod := tu.Pod("web-0", tu.WithUID(), tu.OnNode("od-3"), tu.OwnedBy("ReplicaSet", "web"), tu.CPU("100m"))
	pod.Status = tu.RunningReady()
	reader := crfake.NewClientBuilder().WithObjects(
		tu.Node("od-1", tu.OnDemand()), tu.Node("od-2", tu.OnDemand()), tu.Node("od-3", tu.OnDemand()),
		tu.Node("spot-1", tu.Spot()), pod).Build()
	drainer := drain.New(k8sfake.NewClientset(), clk, nil, drain.Options{Component: Component, DryRun: true})
	c := New(reader, plan.New(plan.Options{}), drainer, disruption.NewWithWindows(1), clk, nil, Options{DryRun: true})
	drainableNodes.Set(-1)
	c.Cycle(context.Background())
	if got := gauge(t, "spotter_rescheduler_drainable_nodes"); got != 1 {
		t.Errorf("spotter_rescheduler_drainable_nodes %v, want 1: od-1 and od-2 are empty, only od-3 has a pod to move", got)
	}
}

// gauge reads a gauge without labels from the controller's registry.
func gauge(t *testing.T, name string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s", name)
	return 0
}
