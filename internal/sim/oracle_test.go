package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	fwk "k8s.io/kube-scheduler/framework"

	"spotter.dev/spotter/internal/plan"
	"spotter.dev/spotter/internal/sim/report"
	"spotter.dev/spotter/internal/sim/scenario"
)

// The oracle packs within what the market allows: new spot nodes only up to
// the zone's capacity of the moment, the spot nodes of the step before kept
// beyond it (capacity limits launches), the rest on on-demand; pods pinned
// to on-demand only there.
func TestOracleSpotLimits(t *testing.T) {
	sc := constructedScenario(t,
		app("free", 16, "1", ""), // four nodes' worth
		placedApp{Workload: scenario.Workload{Name: "pinned", Replicas: 2, CPU: resource.MustParse("1"), OnDemandOnly: true}},
	)
	sc.NodeGroups[1].Min = 0
	o, err := newOracle(context.Background(), sc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range o.apps {
		if want := a.a.Name == "free"; a.eligible[1] != want || !a.eligible[0] {
			t.Errorf("%s: eligible groups %v (on-demand, spot), want spot %v", a.a.Name, a.eligible, want)
		}
	}
	price := []float64{0.2, 0.07}
	for _, c := range []struct {
		name           string
		capacity, kept int
		spot, od       int
	}{
		{"capacity for all", 10, 0, 4, 1},
		{"capacity for two", 2, 0, 2, 3},
		{"no capacity, three kept", 0, 3, 3, 2},
		{"capacity two, three kept: no new node", 2, 3, 3, 2},
		{"capacity four, one kept", 4, 1, 4, 1},
		{"capacity five, four kept, group max five", 5, 4, 4, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			pk := o.pack([]int{16, 2}, limits{capacity: []int{c.capacity}, kept: []int{0, c.kept}}, price)
			if pk.opened[1] != c.spot || pk.opened[0] != c.od || pk.unplaced != 0 {
				t.Errorf("spot %d, on-demand %d, unplaced %d; want %d, %d, 0", pk.opened[1], pk.opened[0], pk.unplaced, c.spot, c.od)
			}
			for _, nd := range pk.nodes {
				for k, ai := range nd.apps {
					if o.apps[ai].a.Name == "pinned" && nd.group != 0 && nd.counts[k] > 0 {
						t.Errorf("a pinned pod on group %d", nd.group)
					}
				}
			}
		})
	}
}

// Every packing the oracle makes is one the kube-scheduler accepts: each pod
// on the node the oracle chose passes the filter plugins (resources, pods
// per node, node selectors, zone spread), placed one by one on the nodes of
// the packing.
func TestOraclePackingsPassTheFilterPlugins(t *testing.T) {
	sc := short(t, 48*time.Hour)
	ctx := context.Background()
	o, err := newOracle(ctx, sc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := mustEngine(t, o.w)
	desired, price, capacity := make([]int, len(o.apps)), make([]float64, len(o.groups)), make([]int, len(o.w.zones))
	m := limits{capacity: capacity, kept: make([]int, len(o.groups))}
	checked := 0
	for i := 0; i < int(sc.Duration.Duration/sc.Step.Duration); i += 37 {
		o.at(time.Duration(i)*sc.Step.Duration, desired, price, capacity)
		pk := o.pack(desired, m, price)
		checkPacking(ctx, t, o, e, pk, desired)
		for gi := range m.kept {
			m.kept[gi] = pk.opened[gi] // as run does (no preemption here)
		}
		checked++
	}
	if checked < 50 {
		t.Fatalf("only %d packings checked", checked)
	}
}

// checkPacking places the packing's pods on its nodes with the filter
// plugins and fails the test where one does not pass.
func checkPacking(ctx context.Context, t *testing.T, o *oracle, e *plan.Engine, pk packing, desired []int) {
	t.Helper()
	nodes := make([]*corev1.Node, len(pk.nodes))
	for ni, nd := range pk.nodes {
		nodes[ni] = o.w.template(o.groups[nd.group].g, ni)
	}
	// Each app's pods, its nodes taken in turn zone by zone, so that a
	// spread app never goes beyond its skew on the way.
	target := map[*corev1.Pod]string{}
	var pending []*corev1.Pod
	placed := 0
	for ai := range o.apps {
		byZone := map[string][]string{}
		var zones []string
		for ni, nd := range pk.nodes {
			for k, a := range nd.apps {
				if a != ai {
					continue
				}
				z := o.groups[nd.group].g.Zone
				if _, ok := byZone[z]; !ok {
					zones = append(zones, z)
				}
				for range nd.counts[k] {
					byZone[z] = append(byZone[z], nodes[ni].Name)
				}
			}
		}
		for more := true; more; {
			more = false
			for _, z := range zones {
				if len(byZone[z]) == 0 {
					continue
				}
				p := o.apps[ai].a.Template.DeepCopy()
				p.Name = fmt.Sprintf("%s-%d", o.apps[ai].a.Name, placed)
				placed++
				target[p] = byZone[z][0]
				byZone[z] = byZone[z][1:]
				pending = append(pending, p)
				more = true
			}
		}
	}
	want := -pk.unplaced
	for _, d := range desired {
		want += d
	}
	if placed != want {
		t.Fatalf("the packing holds %d pods, want %d (%d unplaced)", placed, want, pk.unplaced)
	}
	out, err := e.Schedule(ctx, plan.ScheduleRequest{Nodes: nodes, Pending: pending,
		Pick: func(pod *corev1.Pod, feasible []fwk.NodeInfo) int {
			for i, ni := range feasible {
				if ni.Node().Name == target[pod] {
					return i
				}
			}
			return 0
		}})
	if err != nil {
		t.Fatal(err)
	}
	for _, pl := range out {
		if pl.Node != target[pl.Pod] {
			t.Fatalf("pod %s: the oracle put it on %s, the filter plugins say %q (%s)", pl.Pod.Name, target[pl.Pod], pl.Node, pl.Reason)
		}
	}
}

// The bound costs no more than the packing, and the packing no more than any
// strategy: on the default scenario, two days, seeds 1 to 4. Each row's
// shares of the bound's and the packing's saving are its saving over theirs,
// in the table, report.json and the summary.
func TestBoundAndPackingBelowEveryStrategy(t *testing.T) {
	for seed := int32(1); seed <= 4; seed++ {
		sc := short(t, 48*time.Hour)
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
func rowOf(table, strategy string) string {
	for _, l := range strings.Split(table, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == strategy {
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
	db := app("db", 2, "1", "")
	db.OnDemandOnly = true
	sc := constructedScenario(t, app("web", 6, "1", ""), db)
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
