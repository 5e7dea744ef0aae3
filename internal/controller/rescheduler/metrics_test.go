package rescheduler

import (
	"context"
	"errors"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	k8sfake "k8s.io/client-go/kubernetes/fake"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
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

// A cycle that cannot read the cluster counts in
// spotter_rescheduler_plan_errors_total{stage="read"}, which the chart's
// SpotterPlannerErrors alert watches.
func TestPlanErrorsCounted(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	reader := crfake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
			return errors.New("the cache is gone")
		},
	}).Build()
	drainer := drain.New(k8sfake.NewClientset(), clk, nil, drain.Options{Component: Component, DryRun: true})
	c := New(reader, plan.New(plan.Options{}), drainer, disruption.NewWithWindows(1), clk, nil, Options{DryRun: true, Interval: time.Minute})
	before := counterValue(t, "read")
	if wait := c.Cycle(context.Background()); wait != time.Minute {
		t.Errorf("the next cycle in %s, want the interval", wait)
	}
	if got := counterValue(t, "read") - before; got != 1 {
		t.Errorf("plan_errors_total{stage=read} rose by %v, want 1", got)
	}
}

// counterValue reads spotter_rescheduler_plan_errors_total{stage}.
func counterValue(t *testing.T, stage string) float64 {
	t.Helper()
	var m dto.Metric
	if err := planErrors.WithLabelValues(stage).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
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
