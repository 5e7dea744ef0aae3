package interrupt

import (
	"context"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"

	tu "spotter.dev/spotter/internal/testutil"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// A node update that fails (a 5xx) is tried again after 100 ms, 200 ms, ...
// (internal/backoff) on the handler's clock, at most updateAttempts times; a
// NotFound is not retried.
func TestUpdateRetriesOnTheClock(t *testing.T) {
	for _, tc := range []struct {
		name     string
		failures int
		notFound bool
		waits    []time.Duration
		ok       bool
	}{
		{"succeeds at once", 0, false, nil, true},
		{"three failures", 3, false, []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond}, true},
		{"always fails", 100, false, []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond,
			800 * time.Millisecond, 1600 * time.Millisecond, 3200 * time.Millisecond}, false},
		{"not found", 100, true, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := &leadClock{FakeClock: testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
			client := k8sfake.NewClientset(tu.Node("n1", tu.Spot()))
			updates := 0
			client.PrependReactor("update", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
				updates++
				if updates > tc.failures {
					return false, nil, nil
				}
				if tc.notFound {
					return true, nil, apierrors.NewNotFound(schema.GroupResource{Resource: "nodes"}, "n1")
				}
				return true, nil, apierrors.NewInternalError(context.DeadlineExceeded)
			})
			h := New(client, nil, clk, nil, nil, Options{Node: "n1", RebalanceAction: v1alpha1.ActionTaint, MaintenanceAction: v1alpha1.ActionDrain})
			done := make(chan error, 1)
			go func() {
				done <- h.update(context.Background(), func(s *State) { s.Notices["aws/x"] = Entry{Kind: "termination", Level: v1alpha1.ActionCordon} })
			}()
			var err error
			for finished := false; !finished; {
				select {
				case err = <-done:
					finished = true
				case <-time.After(time.Millisecond):
					if clk.HasWaiters() {
						clk.Step(100 * time.Millisecond)
					}
				}
			}
			if (err == nil) != tc.ok {
				t.Errorf("update: %v, want success %v", err, tc.ok)
			}
			clk.mu.Lock()
			defer clk.mu.Unlock()
			if !slices.Equal(clk.waits, tc.waits) {
				t.Errorf("waits %v, want %v", clk.waits, tc.waits)
			}
			if want := min(tc.failures+1, updateAttempts); !tc.notFound && updates != want {
				t.Errorf("%d updates, want %d", updates, want)
			}
		})
	}
}
