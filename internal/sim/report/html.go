package report

import (
	"fmt"
	"html"
	"io"
	"math"
	"sort"
	"strings"
)

// palette colours the strategies and zones.
var palette = []string{"#6b7280", "#d97706", "#2563eb", "#7c3aed", "#059669", "#dc2626", "#0891b2", "#65a30d"}

type point struct{ x, y float64 }

type line struct {
	name   string
	color  string
	points []point
	step   bool   // draw as a step function
	dash   string // stroke-dasharray, "" for a solid line
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
		b.WriteString(l.polyline(pts.String()))
	}
	legend(&b, c.lines, padL, chartH-10)
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

// polyline draws a line's points.
func (l *line) polyline(points string) string {
	dash := ""
	if l.dash != "" {
		dash = fmt.Sprintf(` stroke-dasharray="%s"`, l.dash)
	}
	return fmt.Sprintf(`<polyline class="series" data-name="%s" fill="none" stroke="%s" stroke-width="1.6"%s points="%s"/>`,
		html.EscapeString(l.name), l.color, dash, strings.TrimSpace(points))
}

// legend draws one entry per line (its colour and dash) from x along y.
func legend(b *strings.Builder, lines []line, x float64, y int) {
	for _, l := range lines {
		dash := ""
		if l.dash != "" {
			dash = fmt.Sprintf(` stroke-dasharray="%s"`, l.dash)
		}
		fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="%s" stroke-width="2"%s/><text x="%.1f" y="%d" class="legend">%s</text>`,
			x, x+18, y-3, y-3, l.color, dash, x+22, y, html.EscapeString(l.name))
		x += 32 + 7.2*float64(len(l.name))
	}
}

// multiples is a chart of small multiples: one panel per run, on the same
// axes, so that runs that overlap stay readable.
type multiples struct {
	id, title string
	yMax      float64
	yFormat   func(float64) string
	panels    []panel
}

type panel struct {
	name  string
	lines []line
}

const panelH, panelGap = 64, 20

// svg renders the panels one under the other, each with its run's name,
// its lines, and the y axis's top and zero; days along the bottom, and a
// legend of the first panel's lines at the top.
func (c *multiples) svg(xMax float64) string {
	var b strings.Builder
	if c.yMax <= 0 {
		c.yMax = 1
	}
	plotW := float64(chartW - padL - padR)
	h := padT + panelGap + len(c.panels)*(panelH+panelGap) + 28
	x := func(v float64) float64 { return padL + v/xMax*plotW }
	fmt.Fprintf(&b, `<svg class="chart" id="%s" role="img" aria-label="%s" viewBox="0 0 %d %d" width="100%%" xmlns="http://www.w3.org/2000/svg">`,
		c.id, html.EscapeString(c.title), chartW, h)
	fmt.Fprintf(&b, `<text x="%d" y="20" class="title">%s</text>`, padL, html.EscapeString(c.title))
	if len(c.panels) > 0 {
		legend(&b, c.panels[0].lines, float64(chartW-padR)-40*float64(len(c.panels[0].lines))-7.2*float64(legendChars(c.panels[0].lines)), 20)
	}
	days := int(math.Ceil(xMax / 24))
	for i, p := range c.panels {
		top := float64(padT + panelGap + i*(panelH+panelGap))
		y := func(v float64) float64 { return top + panelH - math.Min(v, c.yMax)/c.yMax*panelH }
		fmt.Fprintf(&b, `<g class="panel" data-name="%s">`, html.EscapeString(p.name))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" class="panel-name">%s</text>`, padL, top-5, html.EscapeString(p.name))
		for _, v := range []float64{0, c.yMax} {
			fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" class="grid"/><text x="%d" y="%.1f" class="tick" text-anchor="end">%s</text>`,
				padL, chartW-padR, y(v), y(v), padL-6, y(v)+4, html.EscapeString(c.yFormat(v)))
		}
		for d := 0; d <= days; d++ {
			hx := math.Min(float64(d*24), xMax)
			fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" class="grid"/>`, x(hx), x(hx), top, top+panelH)
		}
		for _, l := range p.lines {
			var pts strings.Builder
			prevY := math.NaN()
			for _, pt := range l.points {
				if l.step && !math.IsNaN(prevY) {
					fmt.Fprintf(&pts, "%.1f,%.1f ", x(pt.x), prevY)
				}
				fmt.Fprintf(&pts, "%.1f,%.1f ", x(pt.x), y(pt.y))
				prevY = y(pt.y)
			}
			b.WriteString(l.polyline(pts.String()))
		}
		b.WriteString(`</g>`)
	}
	bottom := padT + panelGap + len(c.panels)*(panelH+panelGap)
	for d := 0; d <= days; d++ {
		hx := math.Min(float64(d*24), xMax)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" class="tick" text-anchor="middle">day %d</text>`, x(hx), bottom+6, d)
	}
	b.WriteString(`</svg>`)
	return b.String()
}

func legendChars(lines []line) int {
	n := 0
	for _, l := range lines {
		n += len(l.name)
	}
	return n
}

// scatter is a chart of one labelled point per run, and horizontal reference
// lines (labelled at the right) at the y of runs that have no x.
type scatter struct {
	id, title, xLabel, yLabel string
	xFormat, yFormat          func(float64) string
	points, refs              []mark
}

// mark is a scatter's point, or a reference line (dash) at its y.
type mark struct {
	name, color, dash string
	x, y              float64
}

// svg renders the scatter as inline SVG: grid and ticks on both axes (from
// zero, or below it when a y is negative, to niceMax of the largest value),
// the reference lines, and each point with its name beside it, moved up or
// down out of the way of the points and of the labels placed before it.
func (c *scatter) svg() string {
	var b strings.Builder
	xMax, yMin, yMax := 0.0, 0.0, 0.0
	for _, p := range c.points {
		xMax, yMin, yMax = max(xMax, p.x), min(yMin, p.y), max(yMax, p.y)
	}
	for _, r := range c.refs {
		yMin, yMax = min(yMin, r.y), max(yMax, r.y)
	}
	xMax, yMax = niceMax(xMax), niceMax(yMax)
	if yMin < 0 {
		yMin = -niceMax(-yMin)
	}
	plotW, plotH := float64(chartW-padL-padR), float64(chartH-padT-padB)
	x := func(v float64) float64 { return padL + v/xMax*plotW }
	y := func(v float64) float64 { return padT + plotH - (v-yMin)/(yMax-yMin)*plotH }
	fmt.Fprintf(&b, `<svg class="chart" id="%s" role="img" aria-label="%s" viewBox="0 0 %d %d" width="100%%" xmlns="http://www.w3.org/2000/svg">`,
		c.id, html.EscapeString(c.title), chartW, chartH)
	fmt.Fprintf(&b, `<text x="%d" y="20" class="title">%s</text>`, padL, html.EscapeString(c.title))
	for i := 0; i <= 4; i++ {
		vy, vx := yMin+(yMax-yMin)*float64(i)/4, xMax*float64(i)/4
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" class="grid"/><text x="%d" y="%.1f" class="tick" text-anchor="end">%s</text>`,
			padL, chartW-padR, y(vy), y(vy), padL-6, y(vy)+4, html.EscapeString(c.yFormat(vy)))
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%.1f" class="grid"/><text x="%.1f" y="%.1f" class="tick" text-anchor="middle">%s</text>`,
			x(vx), x(vx), padT, padT+plotH, x(vx), padT+plotH+16, html.EscapeString(c.xFormat(vx)))
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" class="tick" text-anchor="middle">%s</text>`, padL+plotW/2, padT+plotH+34, html.EscapeString(c.xLabel))
	fmt.Fprintf(&b, `<text x="14" y="%.1f" class="tick" transform="rotate(-90 14 %.1f)" text-anchor="middle">%s</text>`,
		padT+plotH/2, padT+plotH/2, html.EscapeString(c.yLabel))
	// placed are the labels' boxes so far: left, top, right, bottom.
	var placed [][4]float64
	free := func(l, t, r, bt float64) bool {
		for _, p := range placed {
			if l < p[2] && p[0] < r && t < p[3] && p[1] < bt {
				return false
			}
		}
		return true
	}
	for _, r := range c.refs {
		name := r.name + " " + c.yFormat(r.y)
		w, ty := labelW(name), y(r.y)-4
		for !free(chartW-padR-w, ty-11, chartW-padR, ty+2) {
			ty -= 12
		}
		placed = append(placed, [4]float64{chartW - padR - w, ty - 11, chartW - padR, ty + 2})
		fmt.Fprintf(&b, `<line class="ref" data-name="%s" x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="%s" stroke-width="1.6" stroke-dasharray="%s"/>`,
			html.EscapeString(r.name), padL, chartW-padR, y(r.y), y(r.y), r.color, r.dash)
		fmt.Fprintf(&b, `<text class="legend ref-name" x="%d" y="%.1f" text-anchor="end">%s</text>`, chartW-padR, ty, html.EscapeString(name))
	}
	order := make([]int, len(c.points))
	for i, p := range c.points {
		order[i] = i
		placed = append(placed, [4]float64{x(p.x) - 4.5, y(p.y) - 4.5, x(p.x) + 4.5, y(p.y) + 4.5})
	}
	sort.SliceStable(order, func(i, j int) bool { return c.points[order[i]].y > c.points[order[j]].y })
	for _, i := range order {
		p := c.points[i]
		px, py, w := x(p.x), y(p.y), labelW(p.name)
		left, lx, anchor := px+7, px+7, "start"
		if left+w > chartW-padR {
			left, lx, anchor = px-7-w, px-7, "end"
		}
		ty := py + 4
		for k := 1; !free(left, ty-11, left+w, ty+2); k++ {
			ty += float64(12*k) * float64(1-2*(k%2)) // 12 above, 12 below, 24 above, ...
		}
		placed = append(placed, [4]float64{left, ty - 11, left + w, ty + 2})
		fmt.Fprintf(&b, `<circle class="point" data-name="%s" cx="%.1f" cy="%.1f" r="4.5" fill="%s" stroke="#fff" stroke-width="1"/>`,
			html.EscapeString(p.name), px, py, p.color)
		fmt.Fprintf(&b, `<text class="legend point-name" data-name="%s" x="%.1f" y="%.1f" text-anchor="%s">%s</text>`,
			html.EscapeString(p.name), lx, ty, anchor, html.EscapeString(p.name))
	}
	b.WriteString(`</svg>`)
	return b.String()
}

// labelW guesses the width of a label in the 11px legend font.
func labelW(s string) float64 { return 6.2 * float64(len(s)) }

// WriteHTML writes the report as one self-contained HTML page: no external
// resources, charts as inline SVG, a few lines of script only to count what
// rendered (data-charts on <body>, read by the report's browser test).
func (r *Report) WriteHTML(out io.Writer) error {
	runs := r.runs()
	xMax := r.Days * 24
	money := func(v float64) string { return fmt.Sprintf("%.0f", v) }
	pct := func(v float64) string { return fmt.Sprintf("%.0f%%", 100*v) }
	count := func(v float64) string { return fmt.Sprintf("%.0f", v) }
	cost := chart{id: "cost", title: "Cost over time (cumulative, " + r.Currency + ")", yLabel: r.Currency, yFormat: money}
	share := chart{id: "spot-share", title: "Share of running pods on spot nodes", yLabel: "share", yMax: 1, yFormat: pct}
	capacity := chart{id: "capacity", title: "Spot capacity per zone (trace), preemption notices below", yLabel: "nodes", yFormat: count}
	nodes := multiples{id: "nodes", title: "Nodes over time, on-demand and spot, per run", yFormat: count}
	pending := multiples{id: "pending", title: "Pending pods over time, per run (packing: pods it could not place)", yFormat: count}
	tradeoff := scatter{id: "saving-evictions", title: "Saving against evictions",
		xLabel: "evictions per pod-day", yLabel: "saving", yFormat: func(v float64) string { return fmt.Sprintf("%.3g%%", 100*v) },
		xFormat: func(v float64) string { return fmt.Sprintf("%.4g", v) }}
	for i, res := range runs {
		color, dash := palette[i%len(palette)], ""
		switch res.Strategy {
		case Packing:
			dash = "6 3"
		case Bound:
			dash = "2 3"
		}
		var c, s, p, od, sp []point
		for _, smp := range res.Series {
			c = append(c, point{smp.Hours, smp.Cost})
			s = append(s, point{smp.Hours, smp.SpotShare})
			p = append(p, point{smp.Hours, float64(smp.Pending)})
			od = append(od, point{smp.Hours, float64(smp.OnDemandNodes)})
			sp = append(sp, point{smp.Hours, float64(smp.SpotNodes)})
			cost.yMax = math.Max(cost.yMax, smp.Cost)
			pending.yMax = math.Max(pending.yMax, float64(smp.Pending))
			nodes.yMax = math.Max(nodes.yMax, float64(max(smp.OnDemandNodes, smp.SpotNodes)))
		}
		cost.lines = append(cost.lines, line{name: res.Strategy, color: color, points: c, dash: dash})
		switch res.Strategy {
		case Packing, Bound:
			tradeoff.refs = append(tradeoff.refs, mark{name: res.Strategy, color: color, dash: dash, y: res.Saving})
		case Baseline: // saves nothing by definition
		default:
			tradeoff.points = append(tradeoff.points, mark{name: res.Strategy, color: color, x: res.EvictionsPerPodDay, y: res.Saving})
		}
		if res.Strategy == Bound {
			continue // fractional capacity: no nodes, pods or spot share to show
		}
		nodes.panels = append(nodes.panels, panel{name: res.Strategy, lines: []line{
			{name: "on-demand", color: "#dc2626", points: od, step: true},
			{name: "spot", color: "#059669", points: sp, step: true, dash: "4 2"}}})
		pending.panels = append(pending.panels, panel{name: res.Strategy, lines: []line{{name: "pending pods", color: color, points: p, step: true}}})
		if res.Strategy == Baseline {
			continue
		}
		share.lines = append(share.lines, line{name: res.Strategy, color: color, points: s, dash: dash})
		if res.Strategy == Packing {
			continue
		}
		var xs []float64
		for _, m := range res.Preemptions {
			xs = append(xs, m.Hours)
		}
		capacity.rugs = append(capacity.rugs, rug{name: res.Strategy, color: color, xs: xs})
	}
	if len(runs) > 0 {
		for zi, z := range r.Zones {
			var pts []point
			for _, smp := range runs[0].Series {
				if zi < len(smp.Capacity) {
					pts = append(pts, point{smp.Hours, float64(smp.Capacity[zi])})
					capacity.yMax = math.Max(capacity.yMax, float64(smp.Capacity[zi]))
				}
			}
			capacity.lines = append(capacity.lines, line{name: z, color: palette[(zi+4)%len(palette)], points: pts, step: true})
		}
	}
	cost.yMax, capacity.yMax = niceMax(cost.yMax), niceMax(capacity.yMax)
	pending.yMax, nodes.yMax = niceMax(pending.yMax), niceMax(nodes.yMax)

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
svg .grid{stroke:#e5e7eb;stroke-width:1}svg .mark{stroke-width:1.2}svg .panel-name{font-size:11px;font-weight:600;fill:#111827}
tr.hindsight td{color:#4b5563;font-style:italic}
footer{color:#6b7280;font-size:12px;margin-top:24px}p.warning{color:#92400e;font-size:13px;margin:6px 0}
</style></head><body>`)
	fmt.Fprintf(&b, "<h1>Spotter simulation: %s</h1>\n", html.EscapeString(r.Scenario))
	fmt.Fprintf(&b, `<p class="meta">Seed %d, %s from %s, step %s, simulated in %s. %s</p>`,
		r.Seed, span(r.Days), html.EscapeString(r.Start), html.EscapeString(r.Step), r.Elapsed.Round(1e7), html.EscapeString(r.Description))
	b.WriteString(`<table id="summary"><thead><tr>`)
	for _, h := range htmlHeader {
		if h.title != "" {
			fmt.Fprintf(&b, `<th title="%s">%s</th>`, html.EscapeString(h.title), html.EscapeString(h.name))
		} else {
			fmt.Fprintf(&b, `<th>%s</th>`, html.EscapeString(h.name))
		}
	}
	b.WriteString(`</tr></thead><tbody>`)
	for _, res := range runs {
		class := ""
		if res.Strategy == Packing || res.Strategy == Bound {
			class = ` class="hindsight"`
		}
		fmt.Fprintf(&b, "<tr%s>", class)
		for i, cell := range r.cells(res) {
			if htmlHeader[i].class != "" {
				fmt.Fprintf(&b, `<td class="%s">%s</td>`, htmlHeader[i].class, html.EscapeString(cell))
			} else {
				fmt.Fprintf(&b, "<td>%s</td>", html.EscapeString(cell))
			}
		}
		b.WriteString("</tr>\n")
	}
	b.WriteString("</tbody></table>\n")
	for _, w := range r.Warnings {
		fmt.Fprintf(&b, "<p class=\"warning\">Warning: %s</p>\n", html.EscapeString(w))
	}
	b.WriteString(cost.svg(xMax) + "\n" + tradeoff.svg() + "\n")
	for _, c := range []*chart{&share, &capacity} {
		b.WriteString(c.svg(xMax))
		b.WriteString("\n")
	}
	for _, c := range []*multiples{&nodes, &pending} {
		b.WriteString(c.svg(xMax))
		b.WriteString("\n")
	}
	b.WriteString(`<footer>Saving is against the all-on-demand baseline: the same scenario with its spot node groups removed. ` +
		`The bound (dotted) is the cheapest fractional capacity that holds every pod the workloads want at each moment, within what the market lets any run hold then and each pod's node groups: a linear program, so no run that runs them all pays less. ` +
		`The packing (dashed) is those pods packed on the cheapest capacity the market has then, within each pod's constraints, migrations free and instant: a heuristic, so an achievable cost between the bound and the runs. ` +
		`Share of bound and share of packing are a run's saving over theirs. ` +
		`PDB below budget: the pods missing below what PodDisruptionBudgets demand, whatever the cause, times the minutes; zone spread short: the zones missing from where the workloads that must spread over zones run, of those their node groups offer, times the minutes (the scheduler spreads only over zones that have nodes, so a cluster whose nodes all leave a zone gives the spread up without a pending pod); evictions refused: what the budgets held back of the strategy's voluntary evictions (in parentheses: of the drains of nodes being taken back, by the agent or a termination handler). ` +
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

// htmlHeader names the summary's columns, in the order of tableHeader, with
// a tooltip and a cell class where they have one.
var htmlHeader = []struct{ name, title, class string }{
	{name: "Strategy"}, {name: "Cost"}, {name: "Saving"},
	{name: "Share of bound", title: "saving / the bound's saving", class: "bound-share"},
	{name: "Share of packing", title: "saving / the packing heuristic's saving", class: "packing-share"},
	{name: "Spot pod-hours"}, {name: "Evictions / pod / day"}, {name: "Preempted pods"}, {name: "Pending pod-minutes"},
	{name: "PDB below budget, pod-minutes", title: "pods missing below what PodDisruptionBudgets demand, any cause, times minutes", class: "pdb-below"},
	{name: "Zone spread short, zone-minutes", title: "zones missing from where workloads that must spread over zones run (of those their node groups offer), times minutes", class: "spread-short"},
	{name: "Evictions refused", title: "evictions a PodDisruptionBudget refused (429): the strategy's voluntary ones; in parentheses, the drains of nodes being taken back (the agent, a termination handler)"},
	{name: "Back to spot, mean (max)"},
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
