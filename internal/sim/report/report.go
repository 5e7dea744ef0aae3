package report

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"
)

// SetSavings sets each run's saving against the all-on-demand baseline and
// each strategy's share of the bound's and of the packing's saving.
func (r *Report) SetSavings() {
	saving := func(res *Result) {
		if r.Baseline.Cost > 0 {
			res.Saving = 1 - res.Cost/r.Baseline.Cost
		}
	}
	for _, res := range r.runs()[1:] {
		saving(res)
	}
	for _, res := range r.runs()[1:] {
		if r.Bound != nil && r.Bound.Saving > 0 && res != r.Bound {
			share := res.Saving / r.Bound.Saving
			res.BoundShare = &share
		}
		if r.Packing != nil && r.Packing.Saving > 0 && res != r.Bound {
			share := res.Saving / r.Packing.Saving
			res.PackingShare = &share
		}
	}
}

// runs are the rows of the report in order: the baseline, the strategies
// and, when there are, the packing and the bound.
func (r *Report) runs() []*Result {
	out := []*Result{&r.Baseline}
	for i := range r.Results {
		out = append(out, &r.Results[i])
	}
	if r.Packing != nil {
		out = append(out, r.Packing)
	}
	if r.Bound != nil {
		out = append(out, r.Bound)
	}
	return out
}

// WriteTable prints the comparison, one row per run: the baseline first, the
// packing and the bound last.
func (r *Report) WriteTable(out io.Writer) error {
	fmt.Fprintf(out, "Scenario %q, seed %d, %s from %s, step %s\n\n", r.Scenario, r.Seed, span(r.Days), r.Start, r.Step)
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, strings.Join(tableHeader, "\t")+"\t")
	for _, res := range r.runs() {
		fmt.Fprintln(w, strings.Join(r.cells(res), "\t")+"\t")
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(out, "\nSaving: against the all-on-demand baseline (same scenario, spot groups removed). Bound: the cheapest\n"+
		"fractional capacity that holds every pod the workloads want at each moment (a linear program: no run that runs\n"+
		"them all pays less); packing: those pods packed on the cheapest capacity of each moment, migrations free (a\n"+
		"heuristic: an achievable cost, between the bound and the runs); share of bound, of packing: saving / its saving.\n"+
		"PDB below budget: pods missing below what PodDisruptionBudgets demand, any cause, times minutes (in parentheses:\n"+
		"while voluntarily evicted pods' replacements were starting); zone spread short: zones missing from where workloads\n"+
		"that must spread over zones run (of those their node groups offer), times minutes (the scheduler spreads only over\n"+
		"zones that have nodes); evictions refused: what the budgets held back (429) of the strategy's voluntary evictions\n"+
		"(in parentheses: of the drains of nodes being taken back, by the agent or the seed rows' termination handler).\n"+
		"Back to spot: mean (max) time spot capacity sat unused while spot-eligible pods ran on on-demand nodes of the same\n"+
		"zone. docs/simulate.md defines each column.\n")
	if len(r.Traces) > 0 {
		fmt.Fprintf(out, "Spot markets replay traces of \"Can't Be Late\" (NSDI '24), skypilot-org/spot-traces.\n")
	}
	if len(r.PricedZones) > 0 {
		fmt.Fprintf(out, "Spot prices follow the traces' prices in %s (the node groups' prices are their mean).\n", strings.Join(r.PricedZones, ", "))
	}
	for _, w := range r.Warnings {
		fmt.Fprintf(out, "Warning: %s\n", w)
	}
	return nil
}

// tableHeader names the columns of the table (and, in words, of the HTML
// summary: htmlHeader).
var tableHeader = []string{"STRATEGY", "COST", "SAVING", "SHARE OF BOUND", "SHARE OF PACKING", "SPOT POD-HOURS", "EVICTIONS/POD/DAY", "PREEMPTED PODS",
	"PENDING POD-MIN", "PDB BELOW BUDGET POD-MIN", "ZONE SPREAD SHORT ZONE-MIN", "EVICTIONS REFUSED", "BACK TO SPOT"}

// cells are a run's figures as the table and the HTML summary show them, in
// the order of tableHeader: "-" where a figure does not apply (the
// baseline's saving; what the packing and the bound, which evict and wait
// for nothing, do not have).
func (r *Report) cells(res *Result) []string {
	pct := func(v *float64) string {
		if v == nil {
			return "-"
		}
		return fmt.Sprintf("%.0f%%", 100**v)
	}
	saving := "-"
	if res.Strategy != Baseline {
		saving = fmt.Sprintf("%.1f%%", 100*res.Saving)
	}
	out := []string{res.Strategy, fmt.Sprintf("%.2f %s", res.Cost, r.Currency), saving, pct(res.BoundShare), pct(res.PackingShare)}
	switch res.Strategy {
	case Packing:
		return append(out, fmt.Sprintf("%.1f%%", 100*res.SpotShare), "-", "-", fmt.Sprintf("%.0f", res.PendingPodMinutes), "-", "-", "-", "-")
	case Bound:
		return append(out, "-", "-", "-", fmt.Sprintf("%.0f", res.PendingPodMinutes), "-", "-", "-", "-")
	}
	return append(out, fmt.Sprintf("%.1f%%", 100*res.SpotShare), fmt.Sprintf("%.3f", res.EvictionsPerPodDay), fmt.Sprint(res.PreemptedPods),
		fmt.Sprintf("%.0f", res.PendingPodMinutes), fmt.Sprintf("%.0f (%.0f)", res.PDBBelowBudgetPodMinutes, res.PDBBelowBudgetVoluntaryPodMinutes),
		fmt.Sprintf("%.0f", res.ZoneSpreadShortZoneMinutes), refused(*res), backToSpot(*res))
}

// refused is the evictions-refused cell: the strategy's voluntary evictions
// refused, then, when the agent or the termination handler ran, theirs in
// parentheses; the autoscaler's (every row has it) are left out.
func refused(res Result) string {
	ran, theirs := false, 0
	for _, by := range []string{ComponentAgent, ComponentHandler} {
		n, refused := res.EvictionsRefusedBy[by]
		_, evicted := res.EvictionsBy[by]
		ran, theirs = ran || refused || evicted, theirs+n
	}
	own := res.EvictionsRefused - theirs - res.EvictionsRefusedBy[ComponentAutoscaler]
	if !ran {
		return fmt.Sprint(own)
	}
	return fmt.Sprintf("%d (%d)", own, theirs)
}

func backToSpot(res Result) string {
	b := res.BackToSpot
	if b.Episodes == 0 {
		return "-"
	}
	s := fmt.Sprintf("%s (%s)", minutes(b.MeanMinutes), minutes(b.MaxMinutes))
	if b.OpenAtEnd {
		s += " open"
	}
	return s
}

func minutes(m float64) string {
	d := time.Duration(m * float64(time.Minute)).Round(time.Minute)
	if d >= time.Hour {
		return fmt.Sprintf("%.1fh", d.Hours())
	}
	return fmt.Sprintf("%dm", int(d.Minutes()))
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(out io.Writer) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteFiles writes report.json and report.html into dir and returns their
// paths.
func (r *Report) WriteFiles(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var paths []string
	for _, f := range []struct {
		name  string
		write func(io.Writer) error
	}{{"report.json", r.WriteJSON}, {"report.html", r.WriteHTML}} {
		p := filepath.Join(dir, f.name)
		file, err := os.Create(p)
		if err != nil {
			return nil, err
		}
		if err := f.write(file); err != nil {
			_ = file.Close()
			return nil, fmt.Errorf("writing %s: %w", p, err)
		}
		if err := file.Close(); err != nil {
			return nil, err
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// Summary is the report without time series and timings: what the golden
// test compares.
func (r *Report) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "scenario %s seed %d days %.0f step %s\n", r.Scenario, r.Seed, r.Days, r.Step)
	for _, res := range append([]Result{r.Baseline}, r.Results...) {
		share, boundShare := "-", "-"
		if res.PackingShare != nil {
			share = fmt.Sprintf("%.4f", *res.PackingShare)
		}
		if res.BoundShare != nil {
			boundShare = fmt.Sprintf("%.4f", *res.BoundShare)
		}
		fmt.Fprintf(&b, "%s: cost %.4f saving %.4f boundShare %s packingShare %s spotShare %.4f evictions %d by %v refused %d by %v wasted %d evictionsPerPodDay %.4f "+
			"preemptedNodes %d preemptedPods %d pendingPodMinutes %.1f lostPodMinutes %.1f pdbBelowBudgetPodMinutes %.1f (voluntary %.1f) zoneSpreadShortZoneMinutes %.1f pdbViolations %d "+
			"backToSpot %+v nodesLaunched %d spotStockOuts %d\n",
			res.Strategy, res.Cost, res.Saving, boundShare, share, res.SpotShare, res.Evictions, res.EvictionsBy, res.EvictionsRefused, res.EvictionsRefusedBy, res.WastedEvictions,
			res.EvictionsPerPodDay, res.PreemptedNodes, res.PreemptedPods, res.PendingPodMinutes, res.LostPodMinutes,
			res.PDBBelowBudgetPodMinutes, res.PDBBelowBudgetVoluntaryPodMinutes, res.ZoneSpreadShortZoneMinutes, res.PDBViolations, res.BackToSpot, res.NodesLaunched, res.SpotStockOuts)
	}
	if o := r.Packing; o != nil {
		fmt.Fprintf(&b, "%s: cost %.4f saving %.4f spotShare %.4f pendingPodMinutes %.1f\n", o.Strategy, o.Cost, o.Saving, o.SpotShare, o.PendingPodMinutes)
	}
	if o := r.Bound; o != nil {
		fmt.Fprintf(&b, "%s: cost %.4f saving %.4f pendingPodMinutes %.1f\n", o.Strategy, o.Cost, o.Saving, o.PendingPodMinutes)
	}
	return b.String()
}

// span says how long a run simulated: "7 days", "1 day", "12 hours".
func span(days float64) string {
	switch {
	case days == 1:
		return "1 day"
	case days >= 1 && days == float64(int(days)):
		return fmt.Sprintf("%d days", int(days))
	case days >= 1:
		return fmt.Sprintf("%.1f days", days)
	}
	return fmt.Sprintf("%.0f hours", days*24)
}
