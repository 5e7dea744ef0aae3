package sim

import (
	"context"
	"strings"
	"testing"
	"time"

	"spotter.dev/spotter/internal/sim/hindsight"
	"spotter.dev/spotter/internal/sim/scenario"
	"spotter.dev/spotter/internal/sim/simtest"
	"spotter.dev/spotter/internal/sim/strategy"
)

// The shortcuts of the seeds and the autoscaler (world.StaticFit, the rescheduler
// seed's mayFit, the autoscaler's lazy templates and constraining pods)
// change no answer: the runs with and without them measure the same, on the
// default scenario and on the first eight hours of the 200-node week (the
// rescheduler seed drains from the sixth or so).
func TestShortcutsChangeNoAnswer(t *testing.T) {
	week, err := scenario.LoadScenario(scenario.BuiltinPrefix + "week-200")
	if err != nil {
		t.Fatal(err)
	}
	week.Duration.Duration = 8 * time.Hour
	for _, c := range []struct {
		name       string
		sc         *scenario.Scenario
		strategies []string
	}{
		{"default, a day", simtest.Short(t, 24*time.Hour), []string{strategy.None, strategy.Rescheduler, strategy.Migrator}},
		{"week-200, eight hours", week, []string{strategy.Rescheduler}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var summaries [2]string
			for i, exhaustive := range []bool{true, false} {
				rep, err := Run(context.Background(), c.sc, Options{Strategies: c.strategies, exhaustive: exhaustive})
				if err != nil {
					t.Fatal(err)
				}
				summaries[i] = rep.Summary()
			}
			if summaries[0] != summaries[1] {
				t.Errorf("with the shortcuts:\n%s\nwithout:\n%s", summaries[1], summaries[0])
			}
		})
	}
}

// Every built-in scenario loads by name; the 200-node week has 4,000 pods at
// its peak and 2,240 at night, and needs about 200 nodes at the peak: the
// oracle, which packs tightly, uses 190 to 210.
func TestBuiltinScenarios(t *testing.T) {
	names := scenario.BuiltinScenarios()
	if len(names) < 2 {
		t.Fatalf("built-in scenarios %v", names)
	}
	for _, name := range names {
		if _, err := scenario.LoadScenario(name); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := scenario.LoadScenario(scenario.BuiltinPrefix + "nope"); err == nil || !strings.Contains(err.Error(), scenario.BuiltinPrefix+"week-200") {
		t.Errorf("unknown built-in scenario: %v", err)
	}
	sc, err := scenario.LoadScenario(scenario.BuiltinPrefix + "week-200")
	if err != nil {
		t.Fatal(err)
	}
	low, peak := 0, 0
	for _, w := range sc.Workloads {
		low += int(w.Count * w.Replicas)
		peak += int(w.Count * w.PeakReplicas)
	}
	if low != 2240 || peak != 4000 {
		t.Errorf("%d pods at night, %d at the peak; want 2,240 and 4,000", low, peak)
	}
	sc.Duration.Duration = 24 * time.Hour
	o, _, _, err := hindsight.Run(context.Background(), sc, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	most := 0
	for _, s := range o.Series {
		most = max(most, s.SpotNodes+s.OnDemandNodes)
	}
	if most < 190 || most > 210 {
		t.Errorf("the oracle's busiest moment holds %d nodes, want about 200", most)
	}
}

// The 200-node, 4,000-pod week with every strategy (BENCHMARKS.md):
//
//	go test ./internal/sim -run '^$' -bench SimulateWeek200 -benchtime 1x
func BenchmarkSimulateWeek200(b *testing.B) {
	sc, err := scenario.LoadScenario(scenario.BuiltinPrefix + "week-200")
	if err != nil {
		b.Fatal(err)
	}
	// As `spotter simulate --scenario builtin:week-200` runs it: the
	// recommended configuration.
	for b.Loop() {
		if _, err := Run(context.Background(), sc, Options{Config: strategy.RecommendedConfig()}); err != nil {
			b.Fatal(err)
		}
	}
}
