package rescheduler

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"spotter.dev/spotter/internal/coop"
	"spotter.dev/spotter/internal/disruption"
	"spotter.dev/spotter/internal/plan"
	tu "spotter.dev/spotter/internal/testutil"
)

// cycles counts the rescheduler's cycles: one list of nodes each.
type cycles struct {
	client.Reader
	n atomic.Int32
}

func (c *cycles) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, ok := list.(*corev1.NodeList); ok {
		c.n.Add(1)
	}
	return c.Reader.List(ctx, list, opts...)
}

// A spot node that becomes Ready wakes an idle rescheduler: it plans
// WakeDelay later instead of at the end of its interval. An on-demand node,
// or a spot node that was Ready already, does not.
func TestSpotNodeReadyWakesTheRescheduler(t *testing.T) {
	clk := coop.NewSim(time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC))
	od, spot := tu.Node("od", tu.OnDemand()), tu.Node("spot", tu.Spot())
	reader := &cycles{Reader: fake.NewClientBuilder().WithObjects(od).Build()}
	c := New(reader, plan.New(plan.Options{}), nil, disruption.NewWithWindows(1), clk, nil, Options{Interval: time.Hour, DryRun: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clk.Go(func() { _ = c.Start(ctx) })
	at := func(d time.Duration) int32 {
		clk.RunUntil(clk.Now().Add(d))
		return reader.n.Load()
	}
	if got := at(10 * time.Minute); got != 1 {
		t.Fatalf("%d cycles in the first 10 minutes, want 1 (interval 1h)", got)
	}
	c.NodeChanged(nil, od)
	c.NodeChanged(spot, spot) // Ready before and after: no news
	if got := at(time.Minute); got != 1 {
		t.Errorf("an on-demand node and a spot node already Ready woke the rescheduler: %d cycles", got)
	}
	notReady := spot.DeepCopy()
	notReady.Status.Conditions[0].Status = corev1.ConditionFalse
	c.NodeChanged(notReady, spot)
	c.NodeChanged(nil, spot) // a second news before the cycle: one cycle
	if got := at(5 * time.Second); got != 1 {
		t.Errorf("planned before WakeDelay: %d cycles", got)
	}
	if got := at(10 * time.Second); got != 2 {
		t.Errorf("%d cycles 15s after a spot node became Ready, want 2", got)
	}
	if got := at(50 * time.Minute); got != 2 {
		t.Errorf("%d cycles before the interval ran out, want 2 (one news, one early cycle)", got)
	}
}
