package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"spotter.dev/spotter/internal/controller/labeler"
	"spotter.dev/spotter/internal/controller/migrator"
	"spotter.dev/spotter/internal/lab"
	"spotter.dev/spotter/internal/testenv"
)

// Spot capacity returning starts a migration within seconds, not at the
// migrator's schedule (once a year here): a spot node that registers (as an
// autoscaler's would) is news for spotter controller's node informer, and
// the migrator runs migrator.spotReadyDelay later and replaces an on-demand
// node by spot capacity.
func TestSpotNodeReadyStartsAMigration(t *testing.T) {
	l := startMigratorLab(t, "", 1)
	config := filepath.Join(l.dir, "spotter.yaml")
	body := fmt.Sprintf(`apiVersion: spotter.dev/v1alpha1
kind: SpotterConfiguration
cloud:
  provider: kwok
  kwokConfigFile: %s
migrator:
  enabled: true
  schedule: "0 0 1 1 *"
  spotReadyDelay: 1s
  nodeReadyTimeout: 20s
rescheduler:
  enabled: false
drain:
  evictionBackoff: 200ms
  maxEvictionBackoff: 1s
`, filepath.Join(l.dir, "groups.yaml"))
	if err := os.WriteFile(config, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	testenv.StartSpotter(t, "controller", "controller", "--config", config, "--kubeconfig", l.env.Kubeconfig,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--leader-elect=false")
	// No run before the spot node: the schedule's next time is in January,
	// and the nodes of the informer's first list are no news. The spot node
	// comes once the controller's node informer runs: the labeler, on the
	// same informer, has tainted every on-demand node.
	testenv.Eventually(t, time.Minute, "the labeler's taint on every on-demand node", func(ctx context.Context) (bool, string, error) {
		tainted := 0
		for _, n := range l.nodesOf(ctx, t, "od") {
			for _, taint := range n.Spec.Taints {
				if taint.Key == labeler.OnDemandTaintKey {
					tainted++
				}
			}
		}
		return tainted == 3, fmt.Sprintf("%d of 3 tainted", tainted), nil
	})
	l.env.CreateNodes(lab.NodeSpec{Name: "spot-extra", Class: lab.ClassSpot, InstanceType: "m5.xlarge"})
	start := time.Now()
	// Within two minutes (waitEventReason's limit), where the schedule would
	// take until January.
	waitEventReason(t, l.env, migrator.ReasonSelected)
	t.Logf("an on-demand node was selected for replacement %s after the spot node was created", time.Since(start).Round(time.Second))
}
