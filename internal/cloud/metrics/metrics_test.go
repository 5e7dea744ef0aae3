package metrics_test

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"

	"spotter.dev/spotter/internal/cloud"
	"spotter.dev/spotter/internal/cloud/fake"
	"spotter.dev/spotter/internal/cloud/metrics"
	"spotter.dev/spotter/internal/testutil"
)

func counter(t *testing.T, c prometheus.Collector) float64 {
	t.Helper()
	m, ok := c.(prometheus.Metric)
	if !ok {
		t.Fatalf("%T is not a metric", c)
	}
	var out dto.Metric
	if err := m.Write(&out); err != nil {
		t.Fatal(err)
	}
	return out.GetCounter().GetValue()
}

func histogramCount(t *testing.T, name, method string) uint64 {
	t.Helper()
	o, err := metrics.Duration.GetMetricWithLabelValues(name, method)
	if err != nil {
		t.Fatal(err)
	}
	var out dto.Metric
	if err := o.(prometheus.Metric).Write(&out); err != nil {
		t.Fatal(err)
	}
	return out.GetHistogram().GetSampleCount()
}

func TestDecorateCountsCallsAndErrors(t *testing.T) {
	ctx := context.Background()
	const name = "metrics-test" // a provider name of its own keeps the counts apart
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

	for _, tc := range []struct {
		metric prometheus.Collector
		want   float64
	}{
		{metrics.Calls.WithLabelValues(name, "Instances"), 2},
		{metrics.Errors.WithLabelValues(name, "Instances", metrics.ErrorThrottled), 1},
		{metrics.Calls.WithLabelValues(name, "DeleteInstance"), 1},
		{metrics.Errors.WithLabelValues(name, "DeleteInstance", metrics.ErrorNotFound), 1},
		{metrics.Calls.WithLabelValues(name, "NodeGroups"), 1},
		{metrics.Calls.WithLabelValues(name, "NodeGroup.IncreaseSize"), 3},
		{metrics.Errors.WithLabelValues(name, "NodeGroup.IncreaseSize", metrics.ErrorCapacityUnavailable), 1},
		{metrics.Errors.WithLabelValues(name, "NodeGroup.IncreaseSize", metrics.ErrorOther), 1},
	} {
		if got := counter(t, tc.metric); got != tc.want {
			t.Errorf("%s = %v, want %v", tc.metric.(prometheus.Metric).Desc(), got, tc.want)
		}
	}
	if got := histogramCount(t, name, "NodeGroup.IncreaseSize"); got != 3 {
		t.Errorf("latency samples = %d, want 3", got)
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
