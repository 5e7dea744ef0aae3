// Command spotter-agent is Spotter's node agent: it watches the cloud's instance
// metadata for interruption notices and drains its node before the deadline.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"spotter.dev/spotter/internal/agent/app"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := app.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
