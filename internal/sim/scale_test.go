package sim

import (
	"context"
	"strings"
	"testing"
	"time"

	"spotter.dev/spotter/internal/sim/scenario"
)

// The shortcuts of the seeds and the autoscaler (staticFit, the rescheduler
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
		{"default, a day", short(t, 24*time.Hour), []string{StrategyNone, StrategyRescheduler, StrategyMigrator}},
		{"week-200, eight hours", week, []string{StrategyRescheduler}},
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
	o, _, _, err := runOracle(context.Background(), sc, Options{}, nil)
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
		if _, err := Run(context.Background(), sc, Options{Config: RecommendedConfig()}); err != nil {
			b.Fatal(err)
		}
	}
}

// The autoscaler's templates grow until one is left empty: pods that take a
// node each (2.1 CPUs on 4) need more templates than their requests suggest,
// and get as many as with a template per pod.
func TestAutoscalerTemplatesGrow(t *testing.T) {
	sc := constructedScenario(t, app("wide", 9, "2100m", ""))
	sc.NodeGroups[0].Max = 20
	w, err := newWorld(sc, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	var waiting []*Pod
	for k := range 9 {
		waiting = append(waiting, w.createPod(w.Apps[0], k))
	}
	ctx := context.Background()
	existing := nodeObjs(w.ReadyNodes())
	var got [2]option
	for i, exhaustive := range []bool{true, false} {
		a, err := newAutoscaler(ctx, w, exhaustive)
		if err != nil {
			t.Fatal(err)
		}
		o, err := a.tryGroup(ctx, w.Groups[0], int(w.Groups[0].Max)-w.Groups[0].count, waiting, existing, w.boundObjs())
		if err != nil {
			t.Fatal(err)
		}
		got[i] = *o
	}
	if got[0] != got[1] || got[1].nodes != 9 || got[1].helped != 9 {
		t.Errorf("exhaustive %+v, with shortcuts %+v; want 9 nodes for 9 pods", got[0], got[1])
	}
}

// mayFit is a necessary condition: in every round of a day of the default
// scenario, on every on-demand node, when the rescheduler seed's fit places
// every pod, mayFit said it might; and it spares most fits.
func TestReschedulerSeedMayFitIsNecessary(t *testing.T) {
	sc := short(t, 24*time.Hour)
	w, err := newWorld(sc, int64(sc.Seed), false)
	if err != nil {
		t.Fatal(err)
	}
	e := mustEngine(t, w)
	s := &reschedulerSeed{}
	if err := s.setup(w, e); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sched := mustScheduler(t, w)
	as, err := newAutoscaler(ctx, w, false)
	if err != nil {
		t.Fatal(err)
	}
	s.useRun(sched, false)
	fits, spared, asked := 0, 0, 0
	for i := range 24 * 60 {
		w.advance()
		if i%5 == 0 {
			nodes, isSpot := spotFirst(w)
			rooms := spotRoom(w)
			for _, od := range onDemandNodes(w) {
				pods := movable(od)
				if len(pods) == 0 {
					continue
				}
				may, err := s.mayFit(ctx, pods, rooms)
				if err != nil {
					t.Fatal(err)
				}
				placed, err := s.fit(ctx, w, od, pods, nodes, isSpot)
				if err != nil {
					t.Fatal(err)
				}
				all := true
				for _, pl := range placed {
					all = all && pl.Node != ""
				}
				asked++
				if all {
					fits++
					if !may {
						t.Fatalf("%s at %s: every pod fits, mayFit said no", od.Name, w.Elapsed())
					}
				}
				if !may {
					spared++
				}
			}
		}
		for _, step := range []func(context.Context) error{
			func(ctx context.Context) error { return s.step(ctx, w) }, sched.run,
			func(ctx context.Context) error { return as.run(ctx, sched.unschedulable) },
		} {
			if err := step(ctx); err != nil {
				t.Fatal(err)
			}
		}
		w.m.observe(time.Minute)
		w.Clock.Step(time.Minute)
	}
	if fits == 0 || spared < asked/2 {
		t.Errorf("%d of %d nodes fit, %d spared: the check proves little", fits, asked, spared)
	}
	t.Logf("%d of %d on-demand nodes fit; mayFit spared %d fits", fits, asked, spared)
}
