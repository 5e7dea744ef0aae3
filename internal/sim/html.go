package sim

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"
)

// palette colours the strategies and zones.
var palette = []string{"#6b7280", "#d97706", "#2563eb", "#7c3aed", "#059669", "#dc2626", "#0891b2", "#65a30d"}

type point struct{ x, y float64 }

type line struct {
	name   string
	color  string
	points []point
	step   bool // draw as a step function
}

type chart struct {
	id, title, yLabel string
	yMax              float64
	yFormat           func(float64) string
	lines             []line
	// rugs are rows of marks under the plot: one row per name.
	rugs []rug
}

type rug struct {
	name  string
	color string
	xs    []float64
}

const (
	chartW, chartH = 860, 280
	padL, padR     = 84, 16
	padT, padB     = 36, 44
)

// svg renders a chart as inline SVG: axes, grid, one polyline per line, a
// legend, and the rugs below.
func (c *chart) svg(xMax float64) string {
	var b strings.Builder
	rugH := 14 * len(c.rugs)
	h := chartH + rugH
	plotW, plotH := float64(chartW-padL-padR), float64(chartH-padT-padB)
	if c.yMax <= 0 {
		c.yMax = 1
	}
	x := func(v float64) float64 { return padL + v/xMax*plotW }
	y := func(v float64) float64 { return padT + plotH - math.Min(v, c.yMax)/c.yMax*plotH }
	fmt.Fprintf(&b, `<svg class="chart" id="%s" role="img" aria-label="%s" viewBox="0 0 %d %d" width="100%%" xmlns="http://www.w3.org/2000/svg">`,
		c.id, html.EscapeString(c.title), chartW, h)
	fmt.Fprintf(&b, `<text x="%d" y="20" class="title">%s</text>`, padL, html.EscapeString(c.title))
	for i := 0; i <= 4; i++ {
		v := c.yMax * float64(i) / 4
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" class="grid"/><text x="%d" y="%.1f" class="tick" text-anchor="end">%s</text>`,
			padL, chartW-padR, y(v), y(v), padL-6, y(v)+4, html.EscapeString(c.yFormat(v)))
	}
	days := int(math.Ceil(xMax / 24))
	for d := 0; d <= days; d++ {
		hx := math.Min(float64(d*24), xMax)
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%.1f" class="grid"/><text x="%.1f" y="%.1f" class="tick" text-anchor="middle">day %d</text>`,
			x(hx), x(hx), padT, padT+plotH, x(hx), padT+plotH+16, d)
	}
	fmt.Fprintf(&b, `<text x="14" y="%.1f" class="tick" transform="rotate(-90 14 %.1f)" text-anchor="middle">%s</text>`,
		padT+plotH/2, padT+plotH/2, html.EscapeString(c.yLabel))
	for _, l := range c.lines {
		var pts strings.Builder
		prevY := math.NaN()
		for _, p := range l.points {
			if l.step && !math.IsNaN(prevY) {
				fmt.Fprintf(&pts, "%.1f,%.1f ", x(p.x), prevY)
			}
			fmt.Fprintf(&pts, "%.1f,%.1f ", x(p.x), y(p.y))
			prevY = y(p.y)
		}
		fmt.Fprintf(&b, `<polyline class="series" data-name="%s" fill="none" stroke="%s" stroke-width="1.6" points="%s"/>`,
			html.EscapeString(l.name), l.color, strings.TrimSpace(pts.String()))
	}
	lx := float64(padL)
	for _, l := range c.lines {
		fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="12" height="4" fill="%s"/><text x="%.1f" y="%d" class="legend">%s</text>`,
			lx, chartH-12, l.color, lx+16, chartH-7, html.EscapeString(l.name))
		lx += 26 + 7.2*float64(len(l.name))
	}
	for i, r := range c.rugs {
		ry := chartH + 14*i
		fmt.Fprintf(&b, `<text x="%d" y="%d" class="tick" text-anchor="end">%s</text>`, padL-6, ry+10, html.EscapeString(r.name))
		for _, mx := range r.xs {
			fmt.Fprintf(&b, `<line class="mark" x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="%s"/>`, x(mx), x(mx), ry+1, ry+12, r.color)
		}
	}
	b.WriteString(`</svg>`)
	return b.String()
}

// WriteHTML writes the report as one self-contained HTML page: no external
// resources, charts as inline SVG, a few lines of script only to count what
// rendered (data-charts on <body>, read by the report's browser test).
func (r *Report) WriteHTML(out io.Writer) error {
	all := append([]Result{r.Baseline}, r.Results...)
	xMax := r.Days * 24
	money := func(v float64) string { return fmt.Sprintf("%.0f", v) }
	pct := func(v float64) string { return fmt.Sprintf("%.0f%%", 100*v) }
	count := func(v float64) string { return fmt.Sprintf("%.0f", v) }
	cost := chart{id: "cost", title: "Cost over time (cumulative, " + r.Currency + ")", yLabel: r.Currency, yFormat: money}
	share := chart{id: "spot-share", title: "Share of running pods on spot nodes", yLabel: "share", yMax: 1, yFormat: pct}
	pending := chart{id: "pending", title: "Pending pods", yLabel: "pods", yFormat: count}
	capacity := chart{id: "capacity", title: "Spot capacity per zone (trace), preemption notices below", yLabel: "nodes", yFormat: count}
	for i, res := range all {
		color := palette[i%len(palette)]
		var c, s, p []point
		for _, smp := range res.Series {
			c = append(c, point{smp.Hours, smp.Cost})
			s = append(s, point{smp.Hours, smp.SpotShare})
			p = append(p, point{smp.Hours, float64(smp.Pending)})
			cost.yMax = math.Max(cost.yMax, smp.Cost)
			pending.yMax = math.Max(pending.yMax, float64(smp.Pending))
		}
		cost.lines = append(cost.lines, line{name: res.Strategy, color: color, points: c})
		if res.Strategy != Baseline {
			share.lines = append(share.lines, line{name: res.Strategy, color: color, points: s})
			pending.lines = append(pending.lines, line{name: res.Strategy, color: color, points: p, step: true})
			var xs []float64
			for _, m := range res.Preemptions {
				xs = append(xs, m.Hours)
			}
			capacity.rugs = append(capacity.rugs, rug{name: res.Strategy, color: color, xs: xs})
		}
	}
	if len(all) > 0 {
		for zi, z := range r.Zones {
			var pts []point
			for _, smp := range all[0].Series {
				if zi < len(smp.Capacity) {
					pts = append(pts, point{smp.Hours, float64(smp.Capacity[zi])})
					capacity.yMax = math.Max(capacity.yMax, float64(smp.Capacity[zi]))
				}
			}
			capacity.lines = append(capacity.lines, line{name: z, color: palette[(zi+4)%len(palette)], points: pts, step: true})
		}
	}
	cost.yMax, pending.yMax, capacity.yMax = niceMax(cost.yMax), niceMax(pending.yMax), niceMax(capacity.yMax)

	var b strings.Builder
	b.WriteString(`<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>Spotter simulation: ` + html.EscapeString(r.Scenario) + `</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<script>
window.__errors=0;window.addEventListener("error",function(){window.__errors++;});
(function(){var e=console.error;console.error=function(){window.__errors++;e.apply(console,arguments);};})();
</script>
<style>
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px auto;max-width:920px;color:#111827;padding:0 12px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:16px;margin:28px 0 8px}p.meta{color:#4b5563;margin:0 0 16px}
table{border-collapse:collapse;width:100%;font-variant-numeric:tabular-nums;font-size:13px}
th,td{padding:5px 8px;border-bottom:1px solid #e5e7eb;text-align:right}th:first-child,td:first-child{text-align:left}
th{background:#f9fafb;font-weight:600}
svg.chart{display:block;margin:8px 0 20px;background:#fff}
svg .title{font-weight:600;font-size:14px;fill:#111827}svg .tick,svg .legend{font-size:11px;fill:#4b5563}
svg .grid{stroke:#e5e7eb;stroke-width:1}svg .mark{stroke-width:1.2}
footer{color:#6b7280;font-size:12px;margin-top:24px}p.warning{color:#92400e;font-size:13px;margin:6px 0}
</style></head><body>`)
	fmt.Fprintf(&b, "<h1>Spotter simulation: %s</h1>\n", html.EscapeString(r.Scenario))
	fmt.Fprintf(&b, `<p class="meta">Seed %d, %s from %s, step %s, simulated in %s. %s</p>`,
		r.Seed, span(r.Days), html.EscapeString(r.Start), html.EscapeString(r.Step), r.Elapsed.Round(1e7), html.EscapeString(r.Description))
	b.WriteString(`<table id="summary"><thead><tr><th>Strategy</th><th>Cost</th><th>Saving</th><th>Spot pod-hours</th><th>Evictions / pod / day</th><th>Preempted pods</th><th>Pending pod-minutes</th><th title="pods missing below what PodDisruptionBudgets demand, any cause, times minutes">PDB below budget, pod-minutes</th><th title="evictions a PodDisruptionBudget refused (429)">Evictions refused</th><th>Back to spot, mean (max)</th></tr></thead><tbody>`)
	for _, res := range all {
		saving := "-"
		if res.Strategy != Baseline {
			saving = fmt.Sprintf("%.1f%%", 100*res.Saving)
		}
		fmt.Fprintf(&b, "<tr><td>%s</td><td>%.2f %s</td><td>%s</td><td>%.1f%%</td><td>%.3f</td><td>%d</td><td>%.0f</td><td class=\"pdb-below\">%.0f</td><td>%d</td><td>%s</td></tr>\n",
			html.EscapeString(res.Strategy), res.Cost, html.EscapeString(r.Currency), saving, 100*res.SpotShare, res.EvictionsPerPodDay,
			res.PreemptedPods, res.PendingPodMinutes, res.PDBBelowBudgetPodMinutes, res.EvictionsRefused, html.EscapeString(backToSpot(res)))
	}
	b.WriteString("</tbody></table>\n")
	for _, w := range r.Warnings {
		fmt.Fprintf(&b, "<p class=\"warning\">Warning: %s</p>\n", html.EscapeString(w))
	}
	for _, c := range []*chart{&cost, &share, &capacity, &pending} {
		b.WriteString(c.svg(xMax))
		b.WriteString("\n")
	}
	b.WriteString(`<footer>Saving is against the all-on-demand baseline: the same scenario with its spot node groups removed. ` +
		`PDB below budget: the pods missing below what PodDisruptionBudgets demand, whatever the cause, times the minutes; evictions refused: what the budgets held back. ` +
		`Every figure is computed from the simulation; docs/simulate.md defines them and says which parts of the spotter strategy are Spotter's own code and which are models.`)
	if len(r.Traces) > 0 {
		b.WriteString(` Spot capacity and preemptions replay traces published with "Can't Be Late: Optimizing Spot Instance Savings under Deadlines" (Wu et al., NSDI '24), repository skypilot-org/spot-traces: ` +
			html.EscapeString(strings.Join(r.Traces, ", ")) + `.`)
	}
	if len(r.PricedZones) > 0 {
		b.WriteString(` Spot prices follow the traces' prices in ` + html.EscapeString(strings.Join(r.PricedZones, ", ")) + ` (the node groups' prices are their mean).`)
	}
	b.WriteString(`</footer>
<script>
(function(){var charts=document.querySelectorAll("svg.chart");var lines=document.querySelectorAll("svg.chart polyline.series");
document.body.setAttribute("data-charts",String(charts.length));document.body.setAttribute("data-series",String(lines.length));
document.body.setAttribute("data-errors",String(window.__errors));document.body.setAttribute("data-rendered","true");})();
</script></body></html>
`)
	_, err := io.WriteString(out, b.String())
	return err
}

// niceMax rounds a chart's top up to 1, 2 or 5 times a power of ten.
func niceMax(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}
