package drain

import (
	"context"
	"errors"
	"time"

	"k8s.io/utils/clock"
)

// ErrShutdown is the cause of a drain stopped because its process is shutting
// down and the grace period given to it ran out.
var ErrShutdown = errors.New("spotter is shutting down and the shutdown grace period ran out")

// Outlive returns a context for a drain that may outlive ctx by up to grace:
// when ctx ends (the process was asked to stop, or lost leadership), the drain
// keeps going for at most grace, so that one about to finish does, and then
// stops with the cause ErrShutdown, which makes the Drainer roll it back. A
// drain is thus never abandoned half-done by a graceful shutdown. Call cancel
// when the drain returns.
func Outlive(ctx context.Context, clk clock.Clock, grace time.Duration) (context.Context, context.CancelFunc) {
	dctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
		if grace <= 0 {
			cancel(ErrShutdown)
			return
		}
		t := clk.NewTimer(grace)
		defer t.Stop()
		select {
		case <-t.C():
			cancel(ErrShutdown)
		case <-dctx.Done():
		}
	})
	return dctx, func() {
		stop()
		cancel(context.Canceled)
	}
}
