package rescheduler

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"spotter.dev/spotter/internal/disruption"
)

// countingClock counts the waits of the rescheduler's loop: one per cycle.
type countingClock struct {
	*testingclock.FakeClock
	afters atomic.Int32
}

func (c *countingClock) After(d time.Duration) <-chan time.Time {
	c.afters.Add(1)
	return c.FakeClock.After(d)
}

// never is a schedule with no next activation, as the cron library answers
// an expression no date matches ("0 0 30 2 *").
type never struct{}

func (never) Next(time.Time) time.Time { return time.Time{} }

// waitParked waits until the loop under test waits on clk (n waiters).
func waitParked(t *testing.T, clk *testingclock.FakeClock, n int) {
	t.Helper()
	for start := time.Now(); clk.Waiters() != n; time.Sleep(time.Millisecond) {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("the loop does not wait on the clock: %d waiters, want %d", clk.Waiters(), n)
		}
	}
}

// With drain windows that never open, the loop still waits an interval
// between two cycles: it does not spin on a zero "next window".
func TestLoopWaitsWhenNoWindowEverOpens(t *testing.T) {
	clk := &countingClock{FakeClock: testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	budget := disruption.NewWithWindows(1, disruption.Window{Schedule: never{}, Duration: time.Hour})
	c := New(nil, nil, nil, budget, clk, nil, Options{Interval: time.Minute, DryRun: true})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- c.Start(ctx) }()
	// Ten minutes, a second at a time: one cycle at the start and one a minute.
	for range 600 {
		waitParked(t, clk.FakeClock, 1)
		clk.Step(time.Second)
	}
	waitParked(t, clk.FakeClock, 1)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := clk.afters.Load(); got != 11 {
		t.Errorf("%d cycles in ten minutes, want 11 (one a minute)", got)
	}
}
