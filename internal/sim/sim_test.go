package sim

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"spotter.dev/spotter/internal/agent/interrupt"
	"spotter.dev/spotter/internal/plan"
	"spotter.dev/spotter/internal/sim/report"
	"spotter.dev/spotter/internal/sim/scenario"
	"spotter.dev/spotter/internal/snapshot"
)

// short returns the default scenario cut to d, for tests.
func short(t testing.TB, d time.Duration) *scenario.Scenario {
	t.Helper()
	sc := scenario.DefaultScenario()
	sc.Duration.Duration = d
	return sc
}

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
	rep := run(t, short(t, 48*time.Hour))
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
	if again := run(t, short(t, 48*time.Hour)).Summary(); again != got {
		t.Errorf("a second run differs:\n%s\n%s", again, got)
	}
	// A different seed takes other preemption victims.
	sc := short(t, 48*time.Hour)
	sc.Seed = 2
	if other := run(t, sc).Summary(); other == got {
		t.Errorf("seed 2 gives the same summary as seed 1")
	}
}

// Spotter never violates a PodDisruptionBudget, and the checker would see it
// if a strategy did.
func TestPDBViolationsCheckedZeroForSpotter(t *testing.T) {
	rep := run(t, short(t, 48*time.Hour), StrategySpotter)
	r := result(t, rep, StrategySpotter)
	if r.PDBViolations != 0 {
		t.Errorf("spotter: %d PDB violations", r.PDBViolations)
	}
	if r.Evictions == 0 {
		t.Errorf("spotter evicted nothing in two days: the check proves nothing")
	}

	w, _ := startedWorld(t, 5)
	var app *App
	for _, a := range w.Apps {
		if a.PDB != nil && a.PDB.Spec.MinAvailable != nil {
			app = a
			break
		}
	}
	healthy, desired := w.pdbHealth(app)
	if healthy-desired < 0 {
		t.Fatalf("%s not healthy yet: %d < %d", app.Name, healthy, desired)
	}
	evicted := 0
	for _, p := range app.pods {
		if err := w.Evict(p, "test"); err == nil {
			evicted++
		}
	}
	if evicted != healthy-desired || w.m.violations != 0 {
		t.Errorf("Eviction API let %d through (budget %d), %d violations", evicted, healthy-desired, w.m.violations)
	}
	for _, p := range app.pods {
		if !p.Terminating {
			w.forceEvict(p, "test")
			break
		}
	}
	if w.m.violations != 1 {
		t.Errorf("a forced eviction below the budget: %d violations seen, want 1", w.m.violations)
	}
}

// none never evicts and stays on on-demand after shortages: every other
// strategy gets more pod-hours onto spot.
func TestNoneNeverEvicts(t *testing.T) {
	rep := run(t, short(t, 48*time.Hour))
	none := result(t, rep, StrategyNone)
	if none.Evictions != 0 {
		t.Errorf("none evicted %d pods", none.Evictions)
	}
	for _, name := range []string{StrategyRescheduler, StrategyMigrator, StrategySpotter} {
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
	rep := run(t, short(t, 48*time.Hour), StrategyNone, StrategySpotter)
	none, sp := result(t, rep, StrategyNone), result(t, rep, StrategySpotter)
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

// The migrator seed drains only at the top of the hour and churns; the
// rescheduler seed waits its drain delay between drains.
func TestSeedsTiming(t *testing.T) {
	sc := short(t, 24*time.Hour)
	for _, name := range []string{StrategyMigrator, StrategyRescheduler} {
		w, err := newWorld(sc, int64(sc.Seed), false)
		if err != nil {
			t.Fatal(err)
		}
		e := mustEngine(t, w)
		strategyImpl, _ := newStrategy(name, nil)
		if err := strategyImpl.setup(w, e); err != nil {
			t.Fatal(err)
		}
		sched, as := mustScheduler(t, w), &autoscaler{w: w, e: e}
		var drainStarts []time.Duration
		prevEvictions := 0
		for range 24 * 60 {
			w.advance()
			if err := strategyImpl.step(context.Background(), w); err != nil {
				t.Fatal(err)
			}
			if w.m.evict > prevEvictions {
				drainStarts = append(drainStarts, w.Elapsed())
			}
			prevEvictions = w.m.evict
			_ = sched.run(context.Background())
			_ = as.run(context.Background(), sched.unschedulable)
			w.Clock.Step(time.Minute)
		}
		if len(drainStarts) == 0 {
			t.Errorf("%s: no eviction in a day", name)
			continue
		}
		switch name {
		case StrategyMigrator:
			if first := drainStarts[0]; first%time.Hour != 0 {
				t.Errorf("migrator: first eviction at %s, not at the top of an hour", first)
			}
		case StrategyRescheduler:
			s := strategyImpl.(*reschedulerSeed)
			_ = s
			last := -time.Hour
			for _, d := range drainStarts {
				if gap := d - last; gap > 2*time.Minute && gap < seedDrainDelay {
					t.Errorf("rescheduler: evictions at %s and %s, less than the drain delay apart", last, d)
				}
				last = d
			}
		}
	}
}

func TestParseStrategies(t *testing.T) {
	got, err := ParseStrategies("spotter, none,spotter")
	if err != nil || strings.Join(got, ",") != "spotter,none" {
		t.Errorf("got %v, %v", got, err)
	}
	if _, err := ParseStrategies("karpenter"); err == nil || !strings.Contains(err.Error(), "unknown strategy \"karpenter\"") {
		t.Errorf("unknown: %v", err)
	}
}

func BenchmarkSimulateDefault(b *testing.B) {
	sc := scenario.DefaultScenario()
	// As `spotter simulate` runs it: the recommended configuration.
	for b.Loop() {
		if _, err := Run(context.Background(), sc, Options{Config: RecommendedConfig()}); err != nil {
			b.Fatal(err)
		}
	}
}

// mustScheduler builds the world's scheduler.
func mustScheduler(t testing.TB, w *World) *scheduler {
	t.Helper()
	s, err := newScheduler(t.Context(), w)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustEngine(t testing.TB, w *World) *plan.Engine {
	t.Helper()
	e, err := plan.NewEngine(context.Background(), &snapshot.Snapshot{Namespaces: w.nsObjs})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// The report names the agent's evictions without importing the agent: the
// name must stay the one the agent's drains are labelled with.
func TestAgentComponentName(t *testing.T) {
	if want := "spotter-" + interrupt.Component; report.ComponentAgent != want {
		t.Errorf("report.ComponentAgent = %q, the agent's drains are labelled %q", report.ComponentAgent, want)
	}
}
