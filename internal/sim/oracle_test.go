package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"

	"spotter.dev/spotter/internal/sim/report"
	"spotter.dev/spotter/internal/sim/simtest"
)

// The bound costs no more than the packing, and the packing no more than any
// strategy: on the default scenario, two days, seeds 1 to 4. Each row's
// shares of the bound's and the packing's saving are its saving over theirs,
// in the table, report.json and the summary.
func TestBoundAndPackingBelowEveryStrategy(t *testing.T) {
	for seed := int32(1); seed <= 4; seed++ {
		sc := simtest.Short(t, 48*time.Hour)
		sc.Seed = seed
		rep := run(t, sc)
		o, lb := rep.Packing, rep.Bound
		if o == nil || o.Strategy != report.Packing || lb == nil || lb.Strategy != report.Bound {
			t.Fatalf("seed %d: no packing or bound row", seed)
		}
		if o.Cost <= 0 || o.Saving <= 0 || o.PendingPodMinutes != 0 || lb.Cost <= 0 || lb.PendingPodMinutes != 0 {
			t.Errorf("seed %d: packing cost %.2f, saving %.3f, unplaced pod-minutes %.0f; bound cost %.2f, unheld pod-minutes %.0f",
				seed, o.Cost, o.Saving, o.PendingPodMinutes, lb.Cost, lb.PendingPodMinutes)
		}
		if lb.Cost > o.Cost {
			t.Errorf("seed %d: the bound costs %.2f, the packing %.2f", seed, lb.Cost, o.Cost)
		}
		for _, r := range append([]report.Result{rep.Baseline}, rep.Results...) {
			if o.Cost > r.Cost {
				t.Errorf("seed %d: the packing costs %.2f, %s %.2f", seed, o.Cost, r.Strategy, r.Cost)
			}
		}
		for _, r := range rep.Results {
			if r.PackingShare == nil || *r.PackingShare != r.Saving/o.Saving {
				t.Errorf("seed %d: %s share %v, want %v / %v", seed, r.Strategy, r.PackingShare, r.Saving, o.Saving)
			}
			if r.BoundShare == nil || *r.BoundShare != r.Saving/lb.Saving {
				t.Errorf("seed %d: %s share of bound %v, want %v / %v", seed, r.Strategy, r.BoundShare, r.Saving, lb.Saving)
			}
		}
		if rep.Baseline.PackingShare != nil || rep.Baseline.BoundShare != nil || lb.BoundShare != nil {
			t.Errorf("the baseline or the bound has a share of a saving")
		}
		if seed > 1 {
			continue
		}
		var table, js bytes.Buffer
		if err := rep.WriteTable(&table); err != nil {
			t.Fatal(err)
		}
		if err := rep.WriteJSON(&js); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"SHARE OF BOUND", "SHARE OF PACKING", "\n        packing", "\n          bound"} {
			if !strings.Contains(table.String(), want) {
				t.Errorf("the table lacks %q:\n%s", want, table.String())
			}
		}
		for _, r := range rep.Results {
			want := fmt.Sprintf(`\s%.0f%%\s+%.0f%%\s`, 100**r.BoundShare, 100**r.PackingShare)
			if !regexp.MustCompile(want).MatchString(rowOf(table.String(), r.Strategy)) {
				t.Errorf("%s row %q lacks its shares %s", r.Strategy, rowOf(table.String(), r.Strategy), want)
			}
		}
		var back report.Report
		if err := json.Unmarshal(js.Bytes(), &back); err != nil {
			t.Fatal(err)
		}
		if back.Packing == nil || back.Packing.Cost != o.Cost || len(back.Packing.Series) == 0 {
			t.Errorf("report.json: packing %+v", back.Packing)
		}
		if back.Bound == nil || back.Bound.Cost != lb.Cost || len(back.Bound.Series) == 0 {
			t.Errorf("report.json: bound %+v", back.Bound)
		}
		for i, r := range back.Results {
			if r.PackingShare == nil || math.Abs(*r.PackingShare-*rep.Results[i].PackingShare) > 1e-12 ||
				r.BoundShare == nil || math.Abs(*r.BoundShare-*rep.Results[i].BoundShare) > 1e-12 {
				t.Errorf("report.json: %s shares %v, %v", r.Strategy, r.PackingShare, r.BoundShare)
			}
		}
	}
}

// rowOf is the table's row of a strategy.
func rowOf(table, name string) string {
	for _, l := range strings.Split(table, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == name {
			return l
		}
	}
	return ""
}

// The bound of a small scenario, solved by hand: 6 spot-eligible pods of 1
// CPU and 2 on-demand-only ones, 4-CPU nodes, spot plentiful. The cheapest
// fractional capacity is 1.5 spot nodes (0.07 an hour) and half an
// on-demand node (0.2 an hour): 0.205 an hour, whatever the strategy, and
// every row pays more.
func TestBoundByHand(t *testing.T) {
	db := simtest.App("db", 2, "1", "")
	db.OnDemandOnly = true
	sc := simtest.ConstructedScenario(t, simtest.App("web", 6, "1", ""), db)
	sc.Duration.Duration = 6 * time.Hour
	rep := run(t, sc)
	if want := 0.205 * 6; math.Abs(rep.Bound.Cost-want) > 1e-9 {
		t.Errorf("the bound costs %.6f over 6 hours, want %.6f", rep.Bound.Cost, want)
	}
	for _, r := range append([]report.Result{rep.Baseline, *rep.Packing}, rep.Results...) {
		if r.Cost < rep.Bound.Cost {
			t.Errorf("%s costs %.4f, below the bound's %.4f", r.Strategy, r.Cost, rep.Bound.Cost)
		}
	}
}
