package e2e

import (
	"testing"
	"time"

	"spotter.dev/spotter/internal/drain"
	"spotter.dev/spotter/internal/lab"
	"spotter.dev/spotter/internal/testenv"
)

// A spot node that appears is planned for within seconds, not at the end of
// the rescheduler's interval (an hour here): spotter controller watches
// Nodes and wakes the rescheduler (dry run: it says what it would drain).
func TestNewSpotNodeWakesTheRescheduler(t *testing.T) {
	env := testenv.StartLab(t)
	ctx := testenv.Context(t, 5*time.Minute)
	webOnOnDemand(ctx, t, env, 2, 1)

	config := writeConfig(t, "rescheduler:\n  dryRun: true\n  interval: 1h\n")
	testenv.StartSpotter(t, "controller", "controller", "--config", config, "--kubeconfig", env.Kubeconfig,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--leader-elect=false")
	// The first cycle finds no spot node.
	waitEventOn(t, env, "od-1", "SpotterNotDrainable")

	env.CreateNodes(lab.NodeSpec{Name: "spot-1", Class: lab.ClassSpot})
	start := time.Now()
	// Within a minute (waitEventOn's limit), where the interval would take an hour.
	waitEventOn(t, env, "od-1", drain.ReasonWouldDrain)
	t.Logf("planned %s after the spot node was created", time.Since(start).Round(time.Second))
}
