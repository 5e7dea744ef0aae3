package migrator

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/robfig/cron/v3"
	testingclock "k8s.io/utils/clock/testing"

	"spotter.dev/spotter/internal/cloud/fake"
	"spotter.dev/spotter/internal/disruption"
	"spotter.dev/spotter/internal/plan"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// countingClock counts the waits of the migrator's loop: one per turn.
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

// waitParked waits until the code under test waits on clk (n waiters).
func waitParked(t *testing.T, clk *testingclock.FakeClock, n int) {
	t.Helper()
	for start := time.Now(); clk.Waiters() != n; time.Sleep(time.Millisecond) {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("the code under test does not wait on the clock: %d waiters, want %d", clk.Waiters(), n)
		}
	}
}

// The migrator's loop runs at the times of its schedule; a schedule with no
// next time makes it wait, not run without pause.
func TestLoopFollowsSchedule(t *testing.T) {
	hourly, err := v1alpha1.ParseSchedule("@hourly")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		schedule cron.Schedule
		// turns of the loop in two hours, a second at a time, from 00:00:30
		want int32
	}{
		{"hourly", hourly, 3},
		{"never", never{}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := &countingClock{FakeClock: testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 30, 0, time.UTC))}
			c := New(nil, nil, fake.New("fake"), plan.New(plan.Options{}), nil, disruption.NewWithWindows(1), clk, nil,
				Options{Schedule: tc.schedule, Mode: v1alpha1.MigrationMakeBeforeBreak, DryRun: true})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error)
			go func() { done <- c.Start(ctx) }()
			for range 2 * 3600 {
				waitParked(t, clk.FakeClock, 1)
				clk.Step(time.Second)
			}
			waitParked(t, clk.FakeClock, 1)
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if got := clk.afters.Load(); got != tc.want {
				t.Errorf("%d turns of the loop in two hours, want %d", got, tc.want)
			}
		})
	}
}
