package sim

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"spotter.dev/spotter/internal/sim/report"
	"spotter.dev/spotter/internal/sim/scenario"
	"spotter.dev/spotter/internal/sim/strategy"
)

// The out-of-sample matrix (`spotter simulate --matrix`): every built-in
// scenario, each as built and changed in ways its defaults were not tuned
// on, over several seeds, with the same strategies and configuration. A
// default is chosen on the matrix as a whole, never on one scenario.

// Variant changes a scenario for the matrix.
type Variant struct {
	Name        string
	Description string
	// apply changes the scenario, and reports whether the variant applies
	// to it (a scenario without minDomains has no variant without them).
	apply func(*scenario.Scenario) bool
}

// Variants are the matrix's changes of each scenario, in order.
var Variants = []Variant{
	{Name: "as-built", Description: "the scenario as it is", apply: func(*scenario.Scenario) bool { return true }},
	{Name: "no-minDomains", Description: "the zone spread of the workloads without minDomains", apply: func(sc *scenario.Scenario) bool {
		changed := false
		for i := range sc.Workloads {
			if sc.Workloads[i].MinDomains != 0 {
				sc.Workloads[i].MinDomains, changed = 0, true
			}
		}
		return changed
	}},
	{Name: "slow", Description: "pods start in 3m, nodes provision in 5m, node loss is detected in 5m, stock-outs are reported after 10m", apply: func(sc *scenario.Scenario) bool {
		sc.Cluster.PodStartup.Duration = 3 * time.Minute
		sc.Cluster.NodeLossDetection.Duration = 5 * time.Minute
		for i := range sc.NodeGroups {
			sc.NodeGroups[i].ProvisioningTime.Duration = 5 * time.Minute
		}
		for i := range sc.Zones {
			sc.Zones[i].SpotCapacity.StockOutDelay.Duration = 10 * time.Minute
		}
		return true
	}},
	{Name: "hazard", Description: "the preemption traces read as per-node hazards, scaled with the fleet", apply: func(sc *scenario.Scenario) bool {
		changed := false
		for i := range sc.Zones {
			if sc.Zones[i].Preemptions.Trace != "" {
				sc.Zones[i].Preemptions.Hazard, changed = true, true
			}
		}
		return changed
	}},
}

// MatrixSeeds are the seeds every cell of the matrix runs.
var MatrixSeeds = []int32{1, 2, 3, 4}

// MatrixOptions tune a matrix run.
type MatrixOptions struct {
	// Scenarios are the built-in scenarios to run, by name without the
	// prefix; default every one.
	Scenarios []string
	// Duration, when set, replaces each scenario's.
	Duration time.Duration
	// Run are the options of each simulation (the configuration of the
	// spotter strategy; its strategies are the matrix's).
	Run Options
	// Done, when set, is called after each simulation with the cell, its
	// number (from 1) and the total.
	Done func(c MatrixCell, n, total int)
}

// Matrix strategies: the spotter row and the two models it is held to.
var matrixStrategies = []string{strategy.Rescheduler, strategy.Migrator, strategy.Spotter}

// MatrixCell is one simulation of the matrix: a scenario, a variant, a seed.
type MatrixCell struct {
	Scenario string `json:"scenario"`
	Variant  string `json:"variant"`
	Seed     int32  `json:"seed"`
	// Rows are the strategies' figures, by strategy.
	Rows    map[string]MatrixRow `json:"rows"`
	Elapsed time.Duration        `json:"elapsedNanoseconds"`
}

// MatrixRow is one strategy's figures in a cell.
type MatrixRow struct {
	Saving    float64 `json:"saving"`
	Evictions int     `json:"evictions"`
	// EvictionsPerUSD is voluntary evictions per unit of currency saved
	// against the baseline (+Inf, written as null, when nothing is saved but
	// pods were evicted).
	EvictionsPerUSD    *float64 `json:"evictionsPerUnitSaved"`
	EvictionsPerPodDay float64  `json:"evictionsPerPodDay"`
	// VoluntaryPDBMinutes is PDBBelowBudgetVoluntaryPodMinutes.
	VoluntaryPDBMinutes float64  `json:"pdbBelowBudgetVoluntaryPodMinutes"`
	BoundShare          *float64 `json:"boundShare,omitempty"`
}

// MatrixReport is a matrix run: every cell, and the line of the table each
// scenario and variant gives.
type MatrixReport struct {
	// Config names the spotter row's configuration ("" for the recommended
	// one).
	Config string       `json:"config,omitempty"`
	Seeds  []int32      `json:"seeds"`
	Cells  []MatrixCell `json:"cells"`
	Lines  []MatrixLine `json:"lines"`
	// Runs counts the cells; AheadOfMigrator and FewerPerUSD add up the
	// lines'.
	Runs            int           `json:"runs"`
	AheadOfMigrator int           `json:"aheadOfMigrator"`
	FewerPerUSD     int           `json:"fewerEvictionsPerUnitSaved"`
	Elapsed         time.Duration `json:"elapsedNanoseconds"`
}

// MatrixLine sums up a scenario and variant over the seeds.
type MatrixLine struct {
	Scenario string `json:"scenario"`
	Variant  string `json:"variant"`
	Seeds    int    `json:"seeds"`
	// Saving of the spotter row and the migrator model: mean, min, max.
	Spotter  Spread `json:"spotterSaving"`
	Migrator Spread `json:"migratorSaving"`
	// AheadOfMigrator counts the seeds where the spotter row saved at least
	// as much as the migrator model.
	AheadOfMigrator int `json:"aheadOfMigrator"`
	// SpotterPerUSD and ReschedulerPerUSD are the voluntary evictions per
	// unit saved, mean over the seeds (null: infinite, a seed evicted and
	// saved nothing); FewerPerUSD counts the seeds where the spotter row's
	// were at most the rescheduler model's.
	SpotterPerUSD     *float64 `json:"spotterEvictionsPerUnitSaved"`
	ReschedulerPerUSD *float64 `json:"reschedulerEvictionsPerUnitSaved"`
	FewerPerUSD       int      `json:"fewerEvictionsPerUnitSaved"`
	// VoluntaryPDBMinutes adds up the spotter row's.
	VoluntaryPDBMinutes float64 `json:"spotterPdbBelowBudgetVoluntaryPodMinutes"`
	// BoundShare is the spotter row's share of the bound: mean, min, max.
	BoundShare Spread `json:"spotterBoundShare"`
}

// Spread is a mean with its extremes.
type Spread struct {
	Mean float64 `json:"mean"`
	Min  float64 `json:"min"`
	Max  float64 `json:"max"`
}

func spread(v []float64) Spread {
	if len(v) == 0 {
		return Spread{}
	}
	s := Spread{Min: slices.Min(v), Max: slices.Max(v)}
	for _, x := range v {
		s.Mean += x / float64(len(v))
	}
	return s
}

// RunMatrix runs the matrix: for each scenario and variant that applies to
// it, each seed, the rescheduler and migrator models and the spotter row.
func RunMatrix(ctx context.Context, o MatrixOptions) (*MatrixReport, error) {
	names := o.Scenarios
	if len(names) == 0 {
		for _, s := range scenario.BuiltinScenarios() {
			names = append(names, strings.TrimPrefix(s, scenario.BuiltinPrefix))
		}
	}
	type job struct {
		scenario, variant string
		sc                *scenario.Scenario
	}
	var jobs []job
	for _, name := range names {
		for _, v := range Variants {
			sc, err := scenario.Builtin(name)
			if err != nil {
				return nil, fmt.Errorf("scenario %q: %w; built-in scenarios: %s", name, err, strings.Join(scenario.BuiltinScenarios(), ", "))
			}
			if !v.apply(sc) {
				continue
			}
			if o.Duration > 0 {
				sc.Duration.Duration = o.Duration
			}
			if errs := scenario.ValidateScenario(sc, ""); len(errs) > 0 {
				return nil, &scenario.InvalidScenarioError{Path: scenario.BuiltinPrefix + name + " (" + v.Name + ")", Errors: errs}
			}
			jobs = append(jobs, job{name, v.Name, sc})
		}
	}
	start := time.Now()
	rep := &MatrixReport{Seeds: MatrixSeeds}
	total := len(jobs) * len(MatrixSeeds)
	for _, j := range jobs {
		for _, seed := range MatrixSeeds {
			sc := *j.sc
			sc.Seed = seed
			opts := o.Run
			opts.Strategies = matrixStrategies
			r, err := Run(ctx, &sc, opts)
			if err != nil {
				return nil, fmt.Errorf("%s, %s, seed %d: %w", j.scenario, j.variant, seed, err)
			}
			c := matrixCell(r, j.scenario, j.variant)
			rep.Cells = append(rep.Cells, c)
			if o.Done != nil {
				o.Done(c, len(rep.Cells), total)
			}
		}
	}
	rep.Lines = matrixLines(rep.Cells)
	for _, l := range rep.Lines {
		rep.Runs += l.Seeds
		rep.AheadOfMigrator += l.AheadOfMigrator
		rep.FewerPerUSD += l.FewerPerUSD
	}
	rep.Elapsed = time.Since(start)
	return rep, nil
}

// matrixCell reads a report's figures.
func matrixCell(r *report.Report, name, variant string) MatrixCell {
	c := MatrixCell{Scenario: name, Variant: variant, Seed: r.Seed, Rows: map[string]MatrixRow{}, Elapsed: r.Elapsed}
	for _, res := range r.Results {
		row := MatrixRow{Saving: res.Saving, Evictions: res.Evictions, EvictionsPerPodDay: res.EvictionsPerPodDay,
			VoluntaryPDBMinutes: res.PDBBelowBudgetVoluntaryPodMinutes, BoundShare: res.BoundShare}
		switch saved := r.Baseline.Cost - res.Cost; {
		case saved > 0:
			row.EvictionsPerUSD = finite(float64(res.Evictions) / saved)
		case res.Evictions == 0:
			row.EvictionsPerUSD = finite(0)
		}
		c.Rows[res.Strategy] = row
	}
	return c
}

// perUSD is a row's evictions per unit saved, +Inf when it evicted and saved
// nothing.
func (r MatrixRow) perUSD() float64 {
	if r.EvictionsPerUSD == nil {
		return math.Inf(1)
	}
	return *r.EvictionsPerUSD
}

// finite is v, or nil when v is infinite (JSON has no infinity).
func finite(v float64) *float64 {
	if math.IsInf(v, 0) {
		return nil
	}
	return &v
}

// matrixLines sums the cells up by scenario and variant, in the cells'
// order.
func matrixLines(cells []MatrixCell) []MatrixLine {
	var out []MatrixLine
	for _, c := range cells {
		if len(out) == 0 || out[len(out)-1].Scenario != c.Scenario || out[len(out)-1].Variant != c.Variant {
			out = append(out, MatrixLine{Scenario: c.Scenario, Variant: c.Variant})
		}
	}
	for i := range out {
		l := &out[i]
		var sp, mg, bs, spU, reU []float64
		for _, c := range cells {
			if c.Scenario != l.Scenario || c.Variant != l.Variant {
				continue
			}
			s, m, r := c.Rows[strategy.Spotter], c.Rows[strategy.Migrator], c.Rows[strategy.Rescheduler]
			l.Seeds++
			sp, mg = append(sp, s.Saving), append(mg, m.Saving)
			if s.Saving >= m.Saving {
				l.AheadOfMigrator++
			}
			if s.perUSD() <= r.perUSD() {
				l.FewerPerUSD++
			}
			spU, reU = append(spU, s.perUSD()), append(reU, r.perUSD())
			l.VoluntaryPDBMinutes += s.VoluntaryPDBMinutes
			if s.BoundShare != nil {
				bs = append(bs, *s.BoundShare)
			}
		}
		l.Spotter, l.Migrator, l.BoundShare = spread(sp), spread(mg), spread(bs)
		l.SpotterPerUSD, l.ReschedulerPerUSD = finite(spread(spU).Mean), finite(spread(reU).Mean)
	}
	return out
}

// WriteTable prints the matrix's table: one line per scenario and variant,
// and what the lines add up to.
func (m *MatrixReport) WriteTable(out io.Writer) error {
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "SCENARIO\tVARIANT\tSPOTTER SAVING\tMIGRATOR MODEL\tAHEAD\tEVICTIONS/UNIT SAVED\tRESCHEDULER MODEL\tFEWER\tVOLUNTARY PDB POD-MIN\tSHARE OF BOUND\t")
	pct := func(s Spread) string {
		return fmt.Sprintf("%.1f%% (%.1f-%.1f)", 100*s.Mean, 100*s.Min, 100*s.Max)
	}
	for _, l := range m.Lines {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d/%d\t%s\t%s\t%d/%d\t%.0f\t%s\t\n", l.Scenario, l.Variant, pct(l.Spotter), pct(l.Migrator),
			l.AheadOfMigrator, l.Seeds, PerUnit(l.SpotterPerUSD), PerUnit(l.ReschedulerPerUSD), l.FewerPerUSD, l.Seeds, l.VoluntaryPDBMinutes,
			fmt.Sprintf("%.0f%% (%.0f-%.0f)", 100*l.BoundShare.Mean, 100*l.BoundShare.Min, 100*l.BoundShare.Max))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(out, "\nSpotter saved at least as much as the migrator model in %d of %d runs, with at most the rescheduler model's evictions per unit saved in %d of %d (seeds %s; %s).\n",
		m.AheadOfMigrator, m.Runs, m.FewerPerUSD, m.Runs, seedList(m.Seeds), cmp.Or(m.Config, "the recommended configuration"))
	return err
}

// PerUnit prints evictions per unit saved; nil is infinite.
func PerUnit(v *float64) string {
	if v == nil {
		return "inf"
	}
	return fmt.Sprintf("%.2f", *v)
}

func seedList(seeds []int32) string {
	s := make([]string, len(seeds))
	for i, v := range seeds {
		s[i] = fmt.Sprint(v)
	}
	return strings.Join(s, ", ")
}
