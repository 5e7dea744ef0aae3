package hindsight

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	fwk "k8s.io/kube-scheduler/framework"

	"spotter.dev/spotter/internal/plan"
	"spotter.dev/spotter/internal/sim/scenario"
	"spotter.dev/spotter/internal/sim/simtest"
	"spotter.dev/spotter/internal/sim/worldtest"
)

// The oracle packs within what the market allows: new spot nodes only up to
// the zone's capacity of the moment, the spot nodes of the step before kept
// beyond it (capacity limits launches), the rest on on-demand; pods pinned
// to on-demand only there.
func TestOracleSpotLimits(t *testing.T) {
	sc := simtest.ConstructedScenario(t,
		simtest.App("free", 16, "1", ""), // four nodes' worth
		simtest.PlacedApp{Workload: scenario.Workload{Name: "pinned", Replicas: 2, CPU: resource.MustParse("1"), OnDemandOnly: true}},
	)
	sc.NodeGroups[1].Min = 0
	o, err := newOracle(context.Background(), sc, nil)
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
	sc := simtest.Short(t, 48*time.Hour)
	ctx := context.Background()
	o, err := newOracle(ctx, sc, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := worldtest.MustEngine(t, o.w)
	desired, price, capacity := make([]int, len(o.apps)), make([]float64, len(o.groups)), make([]int, len(o.w.Zones()))
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
		nodes[ni] = o.w.Template(o.groups[nd.group].g, ni)
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
