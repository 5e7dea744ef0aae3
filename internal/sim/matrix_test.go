package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"spotter.dev/spotter/internal/sim/scenario"
	"spotter.dev/spotter/internal/sim/strategy"
)

// Each variant changes what it says, and only applies where it changes
// something.
func TestMatrixVariants(t *testing.T) {
	byName := map[string]Variant{}
	for _, v := range Variants {
		byName[v.Name] = v
	}
	sc := scenario.DefaultScenario()
	if !byName["no-minDomains"].apply(sc) {
		t.Fatal("the default scenario has minDomains: the variant applies")
	}
	for _, w := range sc.Workloads {
		if w.MinDomains != 0 {
			t.Errorf("workload %s keeps minDomains %d", w.Name, w.MinDomains)
		}
	}
	if byName["no-minDomains"].apply(sc) {
		t.Error("applied to a scenario without minDomains")
	}
	sc = scenario.DefaultScenario()
	byName["slow"].apply(sc)
	if sc.Cluster.PodStartup.Duration != 3*time.Minute || sc.Cluster.NodeLossDetection.Duration != 5*time.Minute ||
		sc.NodeGroups[0].ProvisioningTime.Duration != 5*time.Minute || sc.Zones[0].SpotCapacity.StockOutDelay.Duration != 10*time.Minute {
		t.Errorf("slow: %+v, provisioning %s, stock-outs after %s", sc.Cluster, sc.NodeGroups[0].ProvisioningTime.Duration, sc.Zones[0].SpotCapacity.StockOutDelay.Duration)
	}
	sc = scenario.DefaultScenario()
	if !byName["hazard"].apply(sc) || !sc.Zones[0].Preemptions.Hazard {
		t.Error("hazard: the preemption traces are not read as hazards")
	}
}

// The lines count the seeds where the spotter row is ahead of the migrator
// model and evicts no more per unit saved than the rescheduler model; a row
// that evicted and saved nothing is infinitely costly.
func TestMatrixLines(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	cell := func(seed int32, spotter, migrator float64, spotterPerUSD, reschedulerPerUSD *float64) MatrixCell {
		return MatrixCell{Scenario: "s", Variant: "v", Seed: seed, Rows: map[string]MatrixRow{
			strategy.Spotter:     {Saving: spotter, EvictionsPerUSD: spotterPerUSD, BoundShare: f(spotter / 0.6), VoluntaryPDBMinutes: 2},
			strategy.Migrator:    {Saving: migrator},
			strategy.Rescheduler: {EvictionsPerUSD: reschedulerPerUSD},
		}}
	}
	lines := matrixLines([]MatrixCell{
		cell(1, 0.48, 0.44, f(1), f(2)),  // ahead, fewer
		cell(2, 0.40, 0.44, f(3), f(2)),  // behind, more
		cell(3, 0.44, 0.44, f(2), nil),   // a tie is ahead; the rescheduler evicted for nothing
		cell(4, 0.50, 0.30, nil, f(0.5)), // spotter evicted for nothing
	})
	if len(lines) != 1 {
		t.Fatalf("%d lines, want 1", len(lines))
	}
	l := lines[0]
	if l.Seeds != 4 || l.AheadOfMigrator != 3 || l.FewerPerUSD != 2 || l.VoluntaryPDBMinutes != 8 {
		t.Errorf("line %+v: want 4 seeds, 3 ahead, 2 with fewer evictions per unit, 8 PDB minutes", l)
	}
	if l.Spotter.Min != 0.40 || l.Spotter.Max != 0.50 || l.Spotter.Mean < 0.4549 || l.Spotter.Mean > 0.4551 {
		t.Errorf("spotter saving %+v, want mean 0.455, 0.40-0.50", l.Spotter)
	}
	if l.SpotterPerUSD != nil || l.ReschedulerPerUSD != nil {
		t.Errorf("means with an infinite seed are %v, %v; want infinite (nil)", l.SpotterPerUSD, l.ReschedulerPerUSD)
	}
	if _, err := json.Marshal(l); err != nil {
		t.Errorf("the line does not encode: %v", err)
	}
}

// A short matrix of the default scenario runs every variant over the seeds
// and prints a line for each.
func TestRunMatrix(t *testing.T) {
	var done int
	rep, err := RunMatrix(context.Background(), MatrixOptions{Scenarios: []string{"default"}, Duration: 2 * time.Hour,
		Done: func(_ MatrixCell, n, total int) { done = n; _ = total }})
	if err != nil {
		t.Fatal(err)
	}
	want := len(Variants) * len(MatrixSeeds)
	if len(rep.Cells) != want || rep.Runs != want || done != want || len(rep.Lines) != len(Variants) {
		t.Fatalf("%d cells, %d runs, %d reported, %d lines; want %d cells and %d lines", len(rep.Cells), rep.Runs, done, len(rep.Lines), want, len(Variants))
	}
	for _, c := range rep.Cells {
		if len(c.Rows) != 3 {
			t.Errorf("%s %s seed %d: rows %v, want rescheduler, migrator, spotter", c.Scenario, c.Variant, c.Seed, c.Rows)
		}
	}
	var b bytes.Buffer
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	for _, v := range Variants {
		if !strings.Contains(b.String(), v.Name) {
			t.Errorf("the table has no line of %s:\n%s", v.Name, b.String())
		}
	}
	if _, err := RunMatrix(context.Background(), MatrixOptions{Scenarios: []string{"nope"}}); err == nil || !strings.Contains(err.Error(), "builtin:default") {
		t.Errorf("an unknown scenario: %v; want the built-in ones named", err)
	}
}
