package sim

import (
	"testing"
	"time"

	"spotter.dev/spotter/internal/sim/simtest"
	"spotter.dev/spotter/internal/sim/strategy"
)

// The column tells strategies apart where PDB violations (0 by construction)
// cannot: preemptions and drains cost pods below budget beyond what the load
// cycle alone costs the all-on-demand baseline.
func TestPDBBelowBudgetTellsStrategiesApart(t *testing.T) {
	rep := run(t, simtest.Short(t, 48*time.Hour))
	base := rep.Baseline.PDBBelowBudgetPodMinutes
	for _, name := range strategy.Names {
		r := result(t, rep, name)
		if r.PDBViolations != 0 {
			t.Errorf("%s: %d PDB violations", name, r.PDBViolations)
		}
		if r.PDBBelowBudgetPodMinutes <= base {
			t.Errorf("%s: %.0f pod-minutes below budget, not above the baseline's %.0f despite %d preempted pods",
				name, r.PDBBelowBudgetPodMinutes, base, r.PreemptedPods)
		}
	}
	if m, n := result(t, rep, strategy.Migrator), result(t, rep, strategy.None); m.PDBBelowBudgetPodMinutes <= n.PDBBelowBudgetPodMinutes {
		t.Errorf("migrator %.0f, none %.0f: draining every on-demand node hourly costs nothing below budget?",
			m.PDBBelowBudgetPodMinutes, n.PDBBelowBudgetPodMinutes)
	}
}

// The column tells apart the cost-manager-style model, whose hourly drains of
// every on-demand node leave zones without nodes (and its spread workloads
// in the zones left), from the all-on-demand baseline and the autoscaler
// alone, which keep nodes in every zone.
func TestZoneSpreadShortTellsStrategiesApart(t *testing.T) {
	rep := run(t, simtest.Short(t, 48*time.Hour), strategy.None, strategy.Migrator)
	if b, n := rep.Baseline.ZoneSpreadShortZoneMinutes, result(t, rep, strategy.None).ZoneSpreadShortZoneMinutes; b != 0 || n != 0 {
		t.Errorf("zone-minutes short: baseline %v, none %v; want 0 (on-demand nodes in every zone)", b, n)
	}
	if m := result(t, rep, strategy.Migrator).ZoneSpreadShortZoneMinutes; m == 0 {
		t.Error("the migrator model: no zone-minute short, though its drains leave zones without nodes")
	}
}
