package sim

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

// WriteTable prints the comparison, one row per strategy, the baseline first.
func (r *Report) WriteTable(out io.Writer) error {
	fmt.Fprintf(out, "Scenario %q, seed %d, %s from %s, step %s\n\n", r.Scenario, r.Seed, span(r.Days), r.Start, r.Step)
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "STRATEGY\tCOST\tSAVING\tSPOT POD-HOURS\tEVICTIONS/POD/DAY\tPREEMPTED PODS\tPENDING POD-MIN\tPDB BELOW BUDGET POD-MIN\tEVICTIONS REFUSED\tBACK TO SPOT\t")
	for _, res := range append([]Result{r.Baseline}, r.Results...) {
		saving := "-"
		if res.Strategy != Baseline {
			saving = fmt.Sprintf("%.1f%%", 100*res.Saving)
		}
		fmt.Fprintf(w, "%s\t%.2f %s\t%s\t%.1f%%\t%.3f\t%d\t%.0f\t%.0f\t%d\t%s\t\n", res.Strategy, res.Cost, r.Currency, saving,
			100*res.SpotShare, res.EvictionsPerPodDay, res.PreemptedPods, res.PendingPodMinutes, res.PDBBelowBudgetPodMinutes,
			res.EvictionsRefused, backToSpot(res))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(out, "\nSaving: against the all-on-demand baseline (same scenario, spot groups removed). PDB below budget: pods missing\n"+
		"below what PodDisruptionBudgets demand, any cause, times minutes; evictions refused: what the budgets held back (429).\n"+
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
		fmt.Fprintf(&b, "%s: cost %.4f saving %.4f spotShare %.4f evictions %d by %v refused %d wasted %d evictionsPerPodDay %.4f "+
			"preemptedNodes %d preemptedPods %d pendingPodMinutes %.1f lostPodMinutes %.1f pdbBelowBudgetPodMinutes %.1f pdbViolations %d "+
			"backToSpot %+v nodesLaunched %d\n",
			res.Strategy, res.Cost, res.Saving, res.SpotShare, res.Evictions, res.EvictionsBy, res.EvictionsRefused, res.WastedEvictions,
			res.EvictionsPerPodDay, res.PreemptedNodes, res.PreemptedPods, res.PendingPodMinutes, res.LostPodMinutes,
			res.PDBBelowBudgetPodMinutes, res.PDBViolations, res.BackToSpot, res.NodesLaunched)
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
