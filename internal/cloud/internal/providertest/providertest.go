// Package providertest is the test scaffolding the cloud providers' tests
// (aws, gcp, azure) share: waiting for a provider to wait on a fake clock,
// the refusals every NodeGroup.DeleteNodes owes, and the benchmark of
// instance lookups. Only tests import it.
package providertest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	testingclock "k8s.io/utils/clock/testing"

	"spotter.dev/spotter/internal/cloud"
)

// WaitWaiters waits until something waits on clk (a provider between two
// polls of an operation), and fails t after about 5 s.
func WaitWaiters(t testing.TB, clk *testingclock.FakeClock) {
	t.Helper()
	for range 5000 {
		if clk.HasWaiters() {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("nothing waits on the clock")
}

// WaitWaitersOrDone waits until something waits on clk or done holds a
// value, for about 5 s at most.
func WaitWaitersOrDone(clk *testingclock.FakeClock, done chan error) {
	for range 5000 {
		if clk.HasWaiters() || len(done) > 0 {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// DeleteNodesRefused checks what g.DeleteNodes refuses: nodes of another
// group (foreign: cloud.ErrNotInNodeGroup), all of own, the nodes of g at
// its minimum size plus one or more (cloud.ErrBelowMinSize), and a
// control-plane copy of own[0] (a *cloud.ControlPlaneError).
func DeleteNodesRefused(t *testing.T, g cloud.NodeGroup, foreign, own []*corev1.Node) {
	t.Helper()
	ctx := context.Background()
	if err := g.DeleteNodes(ctx, foreign); !errors.Is(err, cloud.ErrNotInNodeGroup) {
		t.Errorf("a node of another group: %v", err)
	}
	if err := g.DeleteNodes(ctx, own); !errors.Is(err, cloud.ErrBelowMinSize) {
		t.Errorf("below the minimum: %v", err)
	}
	cp := own[0].DeepCopy()
	cp.Labels = map[string]string{"node-role.kubernetes.io/control-plane": ""}
	if err := g.DeleteNodes(ctx, []*corev1.Node{cp}); !cloud.IsControlPlane(err) {
		t.Errorf("a control-plane node: %v", err)
	}
}

// BenchmarkInstances measures Instances of nodes through a provider fresh
// at each iteration (newProvider): cold (nothing cached) and warm (the same
// call again), and the calls the cold one made (calls, after resetCalls),
// reported as calls-cold, ms-cold and µs-warm.
func BenchmarkInstances(b *testing.B, nodes []*corev1.Node, newProvider func(context.Context) (cloud.Provider, error), resetCalls func(), calls func() int) {
	ctx := context.Background()
	var cold, warm time.Duration
	var coldCalls int
	for b.Loop() {
		p, err := newProvider(ctx)
		if err != nil {
			b.Fatal(err)
		}
		resetCalls()
		start := time.Now()
		got, err := p.Instances(ctx, nodes)
		if err != nil || len(got) != len(nodes) {
			b.Fatalf("%d instances, %v", len(got), err)
		}
		cold += time.Since(start)
		coldCalls = calls()
		start = time.Now()
		if _, err := p.Instances(ctx, nodes); err != nil {
			b.Fatal(err)
		}
		warm += time.Since(start)
	}
	b.ReportMetric(float64(coldCalls), "calls-cold")
	b.ReportMetric(float64(cold.Milliseconds())/float64(b.N), "ms-cold")
	b.ReportMetric(float64(warm.Microseconds())/float64(b.N), "µs-warm")
}

// Grow checks the increases of g, an empty group of maximum size 5 whose
// new instances are not created at once: one above the maximum
// (cloud.ErrAboveMaxSize) and one of 0 (cloud.ErrInvalidDelta) are refused,
// one of 2 makes the target size 2.
func Grow(t *testing.T, g cloud.NodeGroup) {
	t.Helper()
	ctx := context.Background()
	if err := g.IncreaseSize(ctx, 6); !errors.Is(err, cloud.ErrAboveMaxSize) {
		t.Errorf("above max: %v", err)
	}
	if err := g.IncreaseSize(ctx, 0); !errors.Is(err, cloud.ErrInvalidDelta) {
		t.Errorf("increase of 0: %v", err)
	}
	if err := g.IncreaseSize(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if n, err := g.TargetSize(ctx); err != nil || n != 2 {
		t.Errorf("target %d %v", n, err)
	}
}

// CancelOne checks the cancellations of g after Grow, its 2 instances not
// created yet: both may be cancelled, not three (cloud.ErrNotUnfulfilled);
// one is, which makes the target size 1.
func CancelOne(t *testing.T, g cloud.NodeGroup) {
	t.Helper()
	ctx := context.Background()
	if err := g.DecreaseTargetSize(ctx, 3); !errors.Is(err, cloud.ErrNotUnfulfilled) {
		t.Errorf("cancel 3 of 2: %v", err)
	}
	if err := g.DecreaseTargetSize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if n, err := g.TargetSize(ctx); err != nil || n != 1 {
		t.Errorf("target %d %v after cancelling one", n, err)
	}
}

// WantResources checks a template's capacity and allocatable, each given
// as "name=quantity,...", exactly: no resource more or less.
func WantResources(t *testing.T, what string, n *corev1.Node, capacity, allocatable string) {
	t.Helper()
	for _, c := range []struct {
		name string
		got  corev1.ResourceList
		want string
	}{{"capacity", n.Status.Capacity, capacity}, {"allocatable", n.Status.Allocatable, allocatable}} {
		want := corev1.ResourceList{}
		for _, kv := range strings.Split(c.want, ",") {
			k, v, _ := strings.Cut(kv, "=")
			want[corev1.ResourceName(k)] = resource.MustParse(v)
		}
		if len(want) != len(c.got) {
			t.Errorf("%s: %s %v, want %s", what, c.name, c.got, c.want)
			continue
		}
		for r, q := range want {
			if g, ok := c.got[r]; !ok || g.Cmp(q) != 0 {
				t.Errorf("%s: %s %v, want %s", what, c.name, c.got, c.want)
				break
			}
		}
	}
}
