package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"spotter.dev/spotter/internal/cloud"
	"spotter.dev/spotter/internal/cloud/fake"
	"spotter.dev/spotter/internal/cloud/metrics"
	"spotter.dev/spotter/internal/testutil"
)

// sample returns the value of the metric called name (a counter's value, a
// histogram's sample count) with the given provider and method (and error kind
// when not empty), as served from controller-runtime's registry.
func sample(t *testing.T, name, provider, method, kind string) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels[metrics.LabelProvider] != provider || labels[metrics.LabelMethod] != method || labels[metrics.LabelError] != kind {
				continue
			}
			if h := m.GetHistogram(); h != nil {
				return float64(h.GetSampleCount())
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

var runs atomic.Int32

func TestDecorateCountsCallsAndErrors(t *testing.T) {
	ctx := context.Background()
	// A provider name of its own keeps the counts apart, also with -count.
	name := fmt.Sprintf("metrics-test-%d", runs.Add(1))
	inner := fake.New(name)
	g := fake.NewNodeGroup("spot-a", true, 0, 2)
	inner.AddNodeGroup(g)
	p := metrics.Decorate(inner)
	if p.Name() != name {
		t.Errorf("Name = %q", p.Name())
	}

	nodes := []*corev1.Node{testutil.Node("n1")}
	_, _ = p.Instances(ctx, nodes)
	inner.SetNextError(fake.Instances, cloud.NewThrottledError(errors.New("429"), 0))
	if _, err := p.Instances(ctx, nodes); !cloud.IsThrottled(err) {
		t.Fatalf("the decorator changed the error: %v", err)
	}
	if err := p.DeleteInstance(ctx, testutil.Node("gone")); !cloud.IsNotFound(err) {
		t.Fatalf("DeleteInstance: %v", err)
	}
	groups, err := p.NodeGroups(ctx)
	if err != nil || len(groups) != 1 {
		t.Fatalf("NodeGroups = %v, %v", groups, err)
	}
	g.SetNextError(fake.IncreaseSize, cloud.NewCapacityUnavailableError("spot-a", errors.New("none")))
	_ = groups[0].IncreaseSize(ctx, 1)
	_ = groups[0].IncreaseSize(ctx, 1)
	_ = groups[0].IncreaseSize(ctx, 5) // above max

	const (
		calls    = "spotter_cloudprovider_calls_total"
		errs     = "spotter_cloudprovider_errors_total"
		duration = "spotter_cloudprovider_call_duration_seconds"
	)
	for _, tc := range []struct {
		metric, method, kind string
		want                 float64
	}{
		{calls, "Instances", "", 2},
		{errs, "Instances", metrics.ErrorThrottled, 1},
		{calls, "DeleteInstance", "", 1},
		{errs, "DeleteInstance", metrics.ErrorNotFound, 1},
		{calls, "NodeGroups", "", 1},
		{errs, "NodeGroups", metrics.ErrorOther, 0},
		{calls, "NodeGroup.IncreaseSize", "", 3},
		{errs, "NodeGroup.IncreaseSize", metrics.ErrorCapacityUnavailable, 1},
		{errs, "NodeGroup.IncreaseSize", metrics.ErrorOther, 1},
		{duration, "NodeGroup.IncreaseSize", "", 3},
	} {
		if got := sample(t, tc.metric, name, tc.method, tc.kind); got != tc.want {
			t.Errorf("%s{method=%q,error=%q} = %v, want %v", tc.metric, tc.method, tc.kind, got, tc.want)
		}
	}
	if got := g.Calls(fake.IncreaseSize); got != 3 {
		t.Errorf("the decorator did not pass calls through: %d", got)
	}
}

func TestKind(t *testing.T) {
	for err, want := range map[error]string{
		cloud.NewNotFoundError(nil):                 metrics.ErrorNotFound,
		cloud.NewThrottledError(nil, 0):             metrics.ErrorThrottled,
		cloud.NewCapacityUnavailableError("g", nil): metrics.ErrorCapacityUnavailable,
		&cloud.ControlPlaneError{}:                  metrics.ErrorControlPlane,
		errors.New("x"):                             metrics.ErrorOther,
	} {
		if got := metrics.Kind(err); got != want {
			t.Errorf("Kind(%v) = %s, want %s", err, got, want)
		}
	}
}
