package interrupt

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"

	"spotter.dev/spotter/internal/agent/notice"
	"spotter.dev/spotter/internal/drain"
	tu "spotter.dev/spotter/internal/testutil"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// leadClock records the waits handed to After: the drain lead is one.
type leadClock struct {
	*testingclock.FakeClock
	mu    sync.Mutex
	waits []time.Duration
}

func (c *leadClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	c.waits = append(c.waits, d)
	c.mu.Unlock()
	return c.FakeClock.After(d)
}

// A maintenance event far enough ahead is drained drainLead before its
// deadline (less the margin), on the injected clock; until then the node is
// only tainted and cordoned. A termination, or an event closer than the lead,
// drains at once. The drain then runs to the notice's deadline on the same
// clock.
func TestDrainLeadOnTheClock(t *testing.T) {
	const (
		lead   = 10 * time.Minute
		margin = 5 * time.Second
	)
	cases := []struct {
		name   string
		kind   notice.Kind
		ahead  time.Duration // the notice's deadline, from now
		starts time.Duration // when the drain must start, from now
	}{
		{"maintenance an hour ahead", notice.Maintenance, time.Hour, time.Hour - margin - lead},
		{"maintenance within the lead", notice.Maintenance, 5 * time.Minute, 0},
		{"termination", notice.Termination, 2 * time.Minute, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			clk := &leadClock{FakeClock: testingclock.NewFakeClock(start)}
			web := tu.Pod("web", tu.WithUID(), tu.OnNode("n1"), tu.OwnedBy("ReplicaSet", "web"))
			client := k8sfake.NewClientset(tu.Node("n1", tu.Spot()), web)
			// An eviction is recorded with the clock's time, and the pod goes.
			var mu sync.Mutex
			var evicted []time.Time
			client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if a.GetSubresource() != "eviction" {
					return false, nil, nil
				}
				mu.Lock()
				evicted = append(evicted, clk.Now())
				mu.Unlock()
				return true, nil, client.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), "default", "web")
			})
			evictions := func() []time.Time {
				mu.Lock()
				defer mu.Unlock()
				return append([]time.Time(nil), evicted...)
			}
			h := New(client, drain.New(client, clk, nil, drain.Options{Component: Component}), clk, nil, nil, Options{
				Node: "n1", DeadlineMargin: margin, DrainLead: lead,
				RebalanceAction: v1alpha1.ActionTaint, MaintenanceAction: v1alpha1.ActionDrain,
			})
			ctx := context.Background()
			if err := h.Handle(ctx, notice.Notice{Cloud: "aws", ID: "event-1", Kind: tc.kind, Action: "system-reboot", Deadline: start.Add(tc.ahead)}); err != nil {
				t.Fatal(err)
			}

			node, err := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !node.Spec.Unschedulable {
				t.Error("the node must be cordoned as soon as the notice arrives")
			}
			if tc.starts > 0 {
				// Waiting for the lead, and nothing else.
				leadEventually(t, "the drain to wait for its lead", func() bool { return clk.Waiters() == 1 })
				clk.mu.Lock()
				waits := append([]time.Duration(nil), clk.waits...)
				clk.mu.Unlock()
				if len(waits) != 1 || waits[0] != tc.starts {
					t.Fatalf("waits %v on the clock, want one of %s (deadline less margin less lead)", waits, tc.starts)
				}
				clk.Step(tc.starts - time.Second)
				if got := evictions(); len(got) != 0 {
					t.Fatalf("evicted at %s, before the lead", got[0].Sub(start))
				}
				if _, marked, _ := drain.MarkOf(leadNode(t, client)); marked {
					t.Fatal("the drain started before the lead")
				}
				clk.Step(time.Second)
			}
			leadEventually(t, "the drain to end", func() bool {
				h.mu.Lock()
				defer h.mu.Unlock()
				return h.job == nil
			})
			got := evictions()
			if len(got) != 1 || !got[0].Equal(start.Add(tc.starts)) {
				t.Fatalf("evictions at %v, want one at %s", got, start.Add(tc.starts))
			}
			if m, marked, _ := drain.MarkOf(leadNode(t, client)); !marked || !m.At.Time.Equal(start.Add(tc.starts)) {
				t.Errorf("drain mark %+v, want one made at %s", m, start.Add(tc.starts))
			}
		})
	}
}

func leadNode(t *testing.T, client *k8sfake.Clientset) *corev1.Node {
	t.Helper()
	node, err := client.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return node
}

// leadEventually waits for cond, which other goroutines make true.
func leadEventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for start := time.Now(); !cond(); time.Sleep(time.Millisecond) {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("still waiting for %s", what)
		}
	}
}
