package sim

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"spotter.dev/spotter/internal/sim/report"
	"spotter.dev/spotter/internal/sim/scenario"
	"spotter.dev/spotter/internal/sim/simtest"
	"spotter.dev/spotter/internal/sim/strategy"
)

func run(t testing.TB, sc *scenario.Scenario, strategies ...string) *report.Report {
	t.Helper()
	rep, err := Run(context.Background(), sc, Options{Strategies: strategies})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func result(t testing.TB, rep *report.Report, name string) report.Result {
	t.Helper()
	for _, r := range rep.Results {
		if r.Strategy == name {
			return r
		}
	}
	t.Fatalf("no result for %s", name)
	return report.Result{}
}

// The same scenario and seed give the same result: the golden summary of two
// simulated days of the default scenario. UPDATE_GOLDEN=1 rewrites it.
func TestGoldenSummary(t *testing.T) {
	rep := run(t, simtest.Short(t, 48*time.Hour))
	got := rep.Summary()
	golden := filepath.Join("testdata", "default-2d.golden")
	if os.Getenv("UPDATE_GOLDEN") == "1" {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run UPDATE_GOLDEN=1 go test ./internal/sim/ to create it)", err)
	}
	if got != string(want) {
		t.Errorf("summary differs from %s; if the change is intended, run UPDATE_GOLDEN=1 go test ./internal/sim/\n--- got ---\n%s--- want ---\n%s", golden, got, want)
	}
	// And once more in the same process: no state leaks between runs.
	if again := run(t, simtest.Short(t, 48*time.Hour)).Summary(); again != got {
		t.Errorf("a second run differs:\n%s\n%s", again, got)
	}
	// A different seed takes other preemption victims.
	sc := simtest.Short(t, 48*time.Hour)
	sc.Seed = 2
	if other := run(t, sc).Summary(); other == got {
		t.Errorf("seed 2 gives the same summary as seed 1")
	}
}

// Spotter never violates a PodDisruptionBudget, and the checker would see it
// if a strategy did.
func TestPDBViolationsCheckedZeroForSpotter(t *testing.T) {
	rep := run(t, simtest.Short(t, 48*time.Hour), strategy.Spotter)
	r := result(t, rep, strategy.Spotter)
	if r.PDBViolations != 0 {
		t.Errorf("spotter: %d PDB violations", r.PDBViolations)
	}
	if r.Evictions == 0 {
		t.Errorf("spotter evicted nothing in two days: the check proves nothing")
	}

}

// none never evicts and stays on on-demand after shortages: every other
// strategy gets more pod-hours onto spot.
func TestNoneNeverEvicts(t *testing.T) {
	rep := run(t, simtest.Short(t, 48*time.Hour))
	none := result(t, rep, strategy.None)
	if none.Evictions != 0 {
		t.Errorf("none evicted %d pods", none.Evictions)
	}
	for _, name := range []string{strategy.Rescheduler, strategy.Migrator, strategy.Spotter} {
		if r := result(t, rep, name); r.SpotShare <= none.SpotShare {
			t.Errorf("%s spot share %.3f not above none's %.3f", name, r.SpotShare, none.SpotShare)
		}
		if r := result(t, rep, name); r.Cost >= rep.Baseline.Cost {
			t.Errorf("%s costs %.2f, the all-on-demand baseline %.2f", name, r.Cost, rep.Baseline.Cost)
		}
	}
}

// The agent model drains noticed nodes: no pod is left to die with its node,
// unlike without it.
func TestSpotterAgentDrainsOnNotice(t *testing.T) {
	rep := run(t, simtest.Short(t, 48*time.Hour), strategy.None, strategy.Spotter)
	none, sp := result(t, rep, strategy.None), result(t, rep, strategy.Spotter)
	if sp.PreemptedPods == 0 || none.PreemptedPods == 0 {
		t.Fatalf("no preemption hit pods (none %d, spotter %d)", none.PreemptedPods, sp.PreemptedPods)
	}
	if sp.LostPodMinutes != 0 {
		t.Errorf("spotter: %.0f pod-minutes lost on gone nodes, want 0 (the agent evicts on the notice)", sp.LostPodMinutes)
	}
	if none.LostPodMinutes == 0 {
		t.Errorf("none: no pod-minutes lost despite %d preempted pods", none.PreemptedPods)
	}
	if sp.EvictionsBy[report.ComponentAgent] == 0 {
		t.Errorf("spotter: the agent evicted nothing")
	}
}

func BenchmarkSimulateDefault(b *testing.B) {
	sc := scenario.DefaultScenario()
	// As `spotter simulate` runs it: the recommended configuration.
	for b.Loop() {
		if _, err := Run(context.Background(), sc, Options{Config: strategy.RecommendedConfig()}); err != nil {
			b.Fatal(err)
		}
	}
}
