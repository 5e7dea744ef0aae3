package emulatorkit

import (
	"context"
	"time"

	"k8s.io/utils/clock"
)

// Run calls step every interval of clk until ctx is done: an emulator's
// Run, which moves its world (launches, deletions, operations) on its
// clock.
func Run(ctx context.Context, clk clock.WithTicker, interval time.Duration, step func()) {
	t := clk.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			step()
		}
	}
}
