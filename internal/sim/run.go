package sim

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"spotter.dev/spotter/internal/plan"
	"spotter.dev/spotter/internal/sim/hindsight"
	"spotter.dev/spotter/internal/sim/report"
	"spotter.dev/spotter/internal/sim/scenario"
	"spotter.dev/spotter/internal/sim/strategy"
	"spotter.dev/spotter/internal/sim/world"
	"spotter.dev/spotter/internal/snapshot"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// Options tune a simulation run.
type Options struct {
	// Strategies to compare; default strategy.Names.
	Strategies []string
	// Config configures the spotter strategy; nil uses the defaults.
	Config *v1alpha1.SpotterConfiguration
	// Progress, when set, is called now and then with the share done (0..1)
	// and a description such as "strategy spotter day 3/7".
	Progress func(done float64, what string)
	// Parallel bounds the runs at once; default GOMAXPROCS.
	Parallel int
	// initial, when set, changes each world before its first step: the
	// cluster --from-cluster starts from.
	initial func(*world.World)
	// exhaustive turns off the shortcuts of the seeds and the autoscaler
	// that spare scheduling questions whose answer is known: for the test
	// that they change no answer.
	exhaustive bool
	// tap, when set, is handed the world and the API of the spotter
	// strategy once its controllers are built: for the test that replays
	// their decisions in a real apiserver.
	tap func(*world.World, *world.API)
}

// Run simulates every strategy and the all-on-demand baseline on the scenario,
// each in its own world with the same seed, in parallel.
func Run(ctx context.Context, sc *scenario.Scenario, opts Options) (*report.Report, error) {
	began := time.Now()
	names := opts.Strategies
	if len(names) == 0 {
		names = strategy.Names
	}
	runs := append([]string{report.Baseline}, names...)
	steps := int(sc.Duration.Duration / sc.Step.Duration)
	results := make([]report.Result, len(runs))
	errs := make([]error, len(runs))
	progress := make([]atomic.Int64, len(runs))
	parallel := opts.Parallel
	if parallel <= 0 {
		parallel = runtime.GOMAXPROCS(0)
	}
	stop := make(chan struct{})
	var reporter sync.WaitGroup
	if opts.Progress != nil {
		reporter.Add(1)
		go func() {
			defer reporter.Done()
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for {
				total := int64(0)
				slowest, slowestAt := "", int64(steps)
				for i := range runs {
					v := progress[i].Load()
					total += v
					if v < slowestAt {
						slowest, slowestAt = runs[i], v
					}
				}
				day := float64(slowestAt) * sc.Step.Hours() / 24
				what := fmt.Sprintf("strategy %s day %d/%d", slowest, int(day)+1, int(sc.Duration.Hours()/24+0.999))
				opts.Progress(float64(total)/float64(steps*len(runs)), what)
				select {
				case <-stop:
					return
				case <-tick.C:
				}
			}
		}()
	}
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	var oracleRes, boundRes report.Result
	var oracleNotes []string
	var oracleErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		sem <- struct{}{}
		defer func() { <-sem }()
		oracleRes, boundRes, oracleNotes, oracleErr = hindsight.Run(ctx, sc, opts.initial, nil)
	}()
	for i, name := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			results[i], errs[i] = runOne(ctx, sc, name, opts, &progress[i])
		}()
	}
	wg.Wait()
	close(stop)
	reporter.Wait()
	if opts.Progress != nil {
		opts.Progress(1, "done")
	}
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("strategy %s: %w", runs[i], err)
		}
	}
	if oracleErr != nil {
		return nil, fmt.Errorf("packing and bound: %w", oracleErr)
	}
	rep := &report.Report{Scenario: sc.Name, Description: sc.Description, Seed: sc.Seed, Start: sc.Start, Days: sc.Duration.Hours() / 24,
		Step: sc.Step.Duration.String(), Currency: sc.Currency, Baseline: results[0], Results: results[1:], Packing: &oracleRes, Bound: &boundRes,
		Warnings: append(sc.Warnings(), oracleNotes...)}
	for _, z := range sc.Zones {
		rep.Zones = append(rep.Zones, z.Name)
		priced := false
		for _, t := range []string{z.SpotCapacity.Trace, z.Preemptions.Trace} {
			if t != "" {
				rep.Traces = append(rep.Traces, t)
				tr, err := scenario.LoadTrace(t, sc.Dir())
				priced = priced || (err == nil && tr.Prices != nil)
			}
		}
		if priced {
			rep.PricedZones = append(rep.PricedZones, z.Name)
		}
	}
	rep.SetSavings()
	rep.Elapsed = time.Since(began)
	return rep, nil
}

// runOne simulates one strategy from the start to the end of the scenario.
func runOne(ctx context.Context, sc *scenario.Scenario, name string, opts Options, progress *atomic.Int64) (report.Result, error) {
	w, err := world.New(sc, int64(sc.Seed), name == report.Baseline)
	if err != nil {
		return report.Result{}, err
	}
	if opts.initial != nil {
		opts.initial(w)
	}
	e, err := plan.NewEngine(ctx, &snapshot.Snapshot{Namespaces: w.Namespaces()})
	if err != nil {
		return report.Result{}, err
	}
	strategyImpl, err := strategy.New(name, opts.Config)
	if err != nil {
		return report.Result{}, err
	}
	if err := strategyImpl.Setup(w, e); err != nil {
		return report.Result{}, err
	}
	if s, ok := strategyImpl.(interface{ API() *world.API }); ok && opts.tap != nil {
		opts.tap(w, s.API())
	}
	sched, err := world.NewScheduler(ctx, w)
	if err != nil {
		return report.Result{}, err
	}
	if u, ok := strategyImpl.(interface{ UseScheduler(*world.Scheduler, bool) }); ok {
		u.UseScheduler(sched, opts.exhaustive) // a seed that waits while pods are unschedulable
	}
	as, err := world.NewAutoscaler(ctx, w, opts.exhaustive)
	if err != nil {
		return report.Result{}, err
	}
	if err := w.WatchSpread(ctx, as.StaticFit().Fits); err != nil {
		return report.Result{}, err
	}
	// A pod whose gate comes off mid-step is placed at once.
	var ungatedErr error
	w.OnUngated = func() {
		if err := sched.Run(ctx); err != nil && ungatedErr == nil {
			ungatedErr = err
		}
	}
	step := sc.Step.Duration
	steps := int(sc.Duration.Duration / step)
	for i := range steps {
		if i%64 == 0 {
			if err := ctx.Err(); err != nil {
				return report.Result{}, err
			}
			progress.Store(int64(i))
		}
		if ungatedErr != nil {
			return report.Result{}, ungatedErr
		}
		w.Advance()
		if err := strategyImpl.Step(ctx, w); err != nil {
			return report.Result{}, err
		}
		if err := sched.Run(ctx); err != nil {
			return report.Result{}, err
		}
		if err := as.Run(ctx, sched.Unschedulable); err != nil {
			return report.Result{}, err
		}
		w.Observe(step)
		w.Clock.Step(step)
	}
	progress.Store(int64(steps))
	res := w.Result(name, sc.Duration.Hours()/24)
	// Controllers running on the world's clock stop after the measurement.
	if s, ok := strategyImpl.(interface{ Stop() }); ok {
		s.Stop()
	}
	return res, nil
}
