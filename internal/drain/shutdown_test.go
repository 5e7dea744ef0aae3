package drain_test

import (
	"context"
	"errors"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"spotter.dev/spotter/internal/drain"
)

func TestOutlive(t *testing.T) {
	t.Run("outlives the parent by the grace period, then stops with ErrShutdown", func(t *testing.T) {
		clk := testingclock.NewFakeClock(time.Now())
		parent, stopParent := context.WithCancel(context.Background())
		ctx, cancel := drain.Outlive(parent, clk, 10*time.Second)
		defer cancel()

		stopParent()
		// The timer is armed from AfterFunc's goroutine.
		waitFor(t, clk.HasWaiters)
		if ctx.Err() != nil {
			t.Fatal("the drain context ended with its parent; it should outlive it by the grace period")
		}
		clk.Step(9 * time.Second)
		if ctx.Err() != nil {
			t.Fatal("the drain context ended before the grace period")
		}
		clk.Step(time.Second)
		<-ctx.Done()
		if !errors.Is(context.Cause(ctx), drain.ErrShutdown) {
			t.Errorf("cause %v, want ErrShutdown", context.Cause(ctx))
		}
	})
	t.Run("a zero grace stops at once", func(t *testing.T) {
		clk := testingclock.NewFakeClock(time.Now())
		parent, stopParent := context.WithCancel(context.Background())
		ctx, cancel := drain.Outlive(parent, clk, 0)
		defer cancel()
		stopParent()
		<-ctx.Done()
		if !errors.Is(context.Cause(ctx), drain.ErrShutdown) {
			t.Errorf("cause %v, want ErrShutdown", context.Cause(ctx))
		}
	})
	t.Run("cancel ends it without ErrShutdown and releases the timer", func(t *testing.T) {
		clk := testingclock.NewFakeClock(time.Now())
		parent, stopParent := context.WithCancel(context.Background())
		defer stopParent()
		ctx, cancel := drain.Outlive(parent, clk, time.Minute)
		cancel()
		<-ctx.Done()
		if errors.Is(context.Cause(ctx), drain.ErrShutdown) {
			t.Error("a drain that returned was not shut down")
		}
		stopParent()
		if clk.HasWaiters() {
			t.Error("a timer is still armed after cancel")
		}
	})
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(time.Millisecond)
	}
}
