package report

import (
	"bytes"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The evictions-refused cell sets the agent's refusals, made by drains of
// nodes being taken back, apart from the strategy's voluntary ones.
func TestRefusedCell(t *testing.T) {
	for _, c := range []struct {
		res  Result
		want string
	}{
		{Result{EvictionsRefused: 7, EvictionsRefusedBy: map[string]int{"migrator": 7}}, "7"},
		{Result{}, "0"},
		{Result{EvictionsRefused: 30, EvictionsRefusedBy: map[string]int{ComponentAgent: 25, "spotter-rescheduler": 5}}, "5 (25)"},
		{Result{EvictionsRefused: 3, EvictionsRefusedBy: map[string]int{"spotter-migrator": 3}, EvictionsBy: map[string]int{ComponentAgent: 9}}, "3 (0)"},
		{Result{EvictionsRefused: 9, EvictionsRefusedBy: map[string]int{ComponentHandler: 4, "migrator": 5}}, "5 (4)"},
	} {
		if got := refused(c.res); got != c.want {
			t.Errorf("refused(%+v) = %q, want %q", c.res, got, c.want)
		}
	}
}

// The saving against evictions chart has one point per strategy, right of
// another where it evicts more and above it where it saves more (the two
// order them differently), each
// labelled with its name (two close points' labels apart), and the packing's
// and the bound's savings as labelled lines above them; the baseline has no
// point.
func TestHTMLSavingAgainstEvictions(t *testing.T) {
	rep := &Report{Scenario: "scatter", Days: 1, Currency: "EUR",
		Baseline: Result{Strategy: Baseline, Cost: 100, EvictionsPerPodDay: 0.01},
		Results: []Result{
			{Strategy: "calm", Cost: 70, Saving: 0.3, EvictionsPerPodDay: 0.05},
			{Strategy: "wasteful", Cost: 90, Saving: 0.1, EvictionsPerPodDay: 0.2},
			{Strategy: "busy", Cost: 60, Saving: 0.4, EvictionsPerPodDay: 0.3},
			{Strategy: "busier", Cost: 59, Saving: 0.41, EvictionsPerPodDay: 0.31},
		},
		Packing: &Result{Strategy: Packing, Cost: 50, Saving: 0.5},
		Bound:   &Result{Strategy: Bound, Cost: 45, Saving: 0.55},
	}
	var out bytes.Buffer
	if err := rep.WriteHTML(&out); err != nil {
		t.Fatal(err)
	}
	page := out.String()
	svg := regexp.MustCompile(`<svg[^>]*id="saving-evictions"[^>]*>[\s\S]*?</svg>`).FindString(page)
	if svg == "" {
		t.Fatal("no svg with id saving-evictions")
	}
	if !strings.Contains(svg, `aria-label="Saving against evictions"`) {
		t.Errorf("no aria-label: %.200s", svg)
	}
	if strings.Index(page, `id="saving-evictions"`) < strings.Index(page, `id="cost"`) {
		t.Error("the scatter comes before the cost chart")
	}
	num := func(s string) float64 {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	type xy struct{ x, y float64 }
	points, labels := map[string]xy{}, map[string]xy{}
	for _, m := range regexp.MustCompile(`<circle class="point" data-name="([^"]*)" cx="([-\d.]+)" cy="([-\d.]+)"`).FindAllStringSubmatch(svg, -1) {
		points[m[1]] = xy{num(m[2]), num(m[3])}
	}
	for _, m := range regexp.MustCompile(`<text class="legend point-name" data-name="([^"]*)" x="([-\d.]+)" y="([-\d.]+)"[^>]*>([^<]*)</text>`).FindAllStringSubmatch(svg, -1) {
		if m[4] != m[1] {
			t.Errorf("label %q of %s", m[4], m[1])
		}
		labels[m[1]] = xy{num(m[2]), num(m[3])}
	}
	if len(points) != len(rep.Results) || len(labels) != len(rep.Results) {
		t.Fatalf("points %v, labels %v: want one per strategy", points, labels)
	}
	// Saving and evictions order the strategies differently: x and y
	// swapped would put some pair the wrong way round.
	for _, a := range rep.Results {
		for _, b := range rep.Results {
			pa, pb := points[a.Strategy], points[b.Strategy]
			if a.EvictionsPerPodDay > b.EvictionsPerPodDay && pa.x <= pb.x {
				t.Errorf("%s evicts more than %s but its cx %v is not larger than %v", a.Strategy, b.Strategy, pa.x, pb.x)
			}
			if a.Saving > b.Saving && pa.y >= pb.y {
				t.Errorf("%s saves more than %s but its cy %v is not smaller than %v", a.Strategy, b.Strategy, pa.y, pb.y)
			}
		}
	}
	busier := points["busier"]
	for name, p := range points {
		if l := labels[name]; l.x <= p.x || l.x-p.x > 20 || math.Abs(l.y-p.y) > 30 {
			t.Errorf("%s's label at %v, its point at %v: want it beside", name, l, p)
		}
	}
	if d := labels["busy"].y - labels["busier"].y; d < 11 && d > -11 {
		t.Errorf("the labels of busy and busier overlap: y %v and %v", labels["busy"].y, labels["busier"].y)
	}
	for _, ref := range []struct{ name, label string }{{Packing, "packing 50%"}, {Bound, "bound 55%"}} {
		m := regexp.MustCompile(`<line class="ref" data-name="` + ref.name + `"[^>]* y1="([\d.]+)"`).FindStringSubmatch(svg)
		if m == nil {
			t.Errorf("no %s line", ref.name)
		} else if num(m[1]) >= busier.y {
			t.Errorf("%s line at y %s, below the points", ref.name, m[1])
		}
		if !strings.Contains(svg, ">"+ref.label+"</text>") {
			t.Errorf("no label %q", ref.label)
		}
	}
	for _, tick := range []string{">0.5</text>", ">0%</text>", ">100%</text>", ">evictions per pod-day</text>", ">saving</text>"} {
		if !strings.Contains(svg, tick) {
			t.Errorf("no tick or axis label %q", tick)
		}
	}
	if strings.Contains(svg, `data-name="`+Baseline+`"`) {
		t.Error("the baseline has a point")
	}
}
