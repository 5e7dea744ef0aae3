package drain

import (
	"context"
	"time"

	"k8s.io/utils/clock"
)

// WithClockDeadline is context.WithDeadline on an injected clock: the
// returned context ends, with the cause context.DeadlineExceeded, once clk
// reaches deadline (at once if it has already). A fake clock thus drives a
// drain's timeout, tiers and retries in tests, without waiting.
//
// Its Err is context.Canceled when the deadline passes: use context.Cause to
// tell a deadline from a cancel. Its Deadline method reports the parent's
// only: the clock's time is not necessarily the wall clock's, and a
// transport that dials by Deadline must not read it as one. Call cancel when
// done, to release the clock's timer.
func WithClockDeadline(ctx context.Context, clk clock.Clock, deadline time.Time) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	wait := deadline.Sub(clk.Now())
	if wait <= 0 {
		cancel(context.DeadlineExceeded)
		return ctx, func() { cancel(context.Canceled) }
	}
	expire := func() { cancel(context.DeadlineExceeded) }
	var stop func() bool
	if c, ok := clk.(clock.WithDelayedExecution); ok {
		stop = c.AfterFunc(wait, expire).Stop
	} else {
		t := clk.NewTimer(wait)
		stop = t.Stop
		go func() {
			select {
			case <-t.C():
				expire()
			case <-ctx.Done():
			}
		}()
	}
	return ctx, func() {
		stop()
		cancel(context.Canceled)
	}
}

// WithClockTimeout is WithClockDeadline(ctx, clk, clk.Now().Add(timeout)).
func WithClockTimeout(ctx context.Context, clk clock.Clock, timeout time.Duration) (context.Context, context.CancelFunc) {
	return WithClockDeadline(ctx, clk, clk.Now().Add(timeout))
}

// unmarkTimeout bounds the calls that remove a drain's marks, on a context
// of their own: the drain's may have ended.
const unmarkTimeout = 30 * time.Second
