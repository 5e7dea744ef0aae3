package plan

import (
	"context"
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"spotter.dev/spotter/internal/snapshot"
	tu "spotter.dev/spotter/internal/testutil"
)

// Planning again and again with one long-lived context, as the rescheduler
// does, leaves no goroutine behind: each scheduler framework's metrics
// recorder ends with the plan (they once ran until the controller stopped,
// three more per plan).
func TestPlansLeaveNoGoroutines(t *testing.T) {
	s := &snapshot.Snapshot{
		Nodes: []*corev1.Node{tu.Node("od", tu.OnDemand()), tu.Node("spot", tu.Spot())},
		Pods:  []*corev1.Pod{pod("a", "od", "1"), pod("b", "od", "500m")},
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := New(Options{})
	if _, err := p.Plan(ctx, s); err != nil {
		t.Fatal(err)
	}
	settle := func() int {
		n := runtime.NumGoroutine()
		// The recorders stop asynchronously once their context ends.
		for range 100 {
			time.Sleep(20 * time.Millisecond)
			m := runtime.NumGoroutine()
			if m == n {
				break
			}
			n = m
		}
		return n
	}
	before := settle()
	for range 30 {
		if _, err := p.Plan(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if after := settle(); after > before+5 {
		t.Errorf("%d goroutines after 30 plans, %d before: plans leave goroutines running", after, before)
	}
}
