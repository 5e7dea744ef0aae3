package sim

import (
	"os"
	"path/filepath"
	"testing"

	"spotter.dev/spotter/internal/sim/scenario"
)

// A scenario names trace files relative to itself, or synthetic markets.
func TestScenarioFileWithTracesAndSynthetic(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "cap.json"), []byte(`{"metadata": {"gap_seconds": 60}, "data": [2, 2, 0, 3]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "s.yaml")
	if err := os.WriteFile(file, []byte(`apiVersion: spotter.dev/v1alpha1
kind: SimulationScenario
name: tiny
duration: 2h
zones:
- {name: a, spotCapacity: {trace: cap.json}}
- {name: b, cloud: gcp, spotCapacity: {nodes: 3, shortagesPerDay: 2}, preemptions: {ratePerNodeHour: 0.1}}
nodeGroups:
- {name: od, zone: a, capacityType: on-demand, cpu: "2", memory: 8Gi, pricePerHour: 0.1, initial: 1}
- {name: sp, zone: b, capacityType: spot, cpu: "2", memory: 8Gi, pricePerHour: 0.03}
workloads:
- {name: web, replicas: 3, cpu: 500m, memory: 1Gi, pdb: {maxUnavailable: 1}}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	sc, err := scenario.LoadScenario(file)
	if err != nil {
		t.Fatal(err)
	}
	if sc.Step.Duration.String() != "1m0s" || sc.Zones[0].Cloud != "aws" || scenario.Notice(sc.Zones[1].Cloud).String() != "30s" {
		t.Errorf("defaults: %+v", sc)
	}
	if r := run(t, sc); len(r.Results) != 4 {
		t.Errorf("got %d results", len(r.Results))
	}
}
