package plan

import (
	"context"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"

	"spotter.dev/spotter/internal/snapshot"
	tu "spotter.dev/spotter/internal/testutil"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

const capacityType = "karpenter.sh/capacity-type"

var consolidationPrices = v1alpha1.PricingConfig{Currency: "USD", InstanceTypes: map[string]v1alpha1.InstancePrice{"m5.xlarge": {OnDemand: 0.192, Spot: 0.07}}}

func priced(name string, opts ...tu.NodeOption) *corev1.Node {
	return tu.Node(name, append([]tu.NodeOption{tu.NodeLabel(InstanceTypeLabel, "m5.xlarge")}, opts...)...)
}

// pinned is a pod that must run on on-demand capacity.
func pinned(name, node, cpu string) *corev1.Pod {
	return pod(name, node, cpu, tu.RequireNodeLabel(capacityType, "on-demand"))
}

// planConsolidating plans s with consolidation c, and checks that the
// exhaustive planner agrees (planBothWays).
func planConsolidating(t *testing.T, c Consolidation, s *snapshot.Snapshot) *Plan {
	t.Helper()
	return planBothWays(t, Options{Pricing: consolidationPrices, Consolidation: c}, s)
}

// Two on-demand nodes, each with a pod pinned to on-demand and a pod that
// could run on spot; the spot node has room for the spot-eligible pods. No
// node empties onto spot alone; a consolidation empties the emptier one: its
// pinned pod goes to the other on-demand node, its other pod to spot.
func TestConsolidationPacksPinnedPods(t *testing.T) {
	s := &snapshot.Snapshot{
		Nodes: []*corev1.Node{priced("od-1", tu.OnDemand()), priced("od-2", tu.OnDemand()), priced("spot", tu.Spot())},
		Pods: []*corev1.Pod{
			pinned("db-1", "od-1", "500m"), pod("web-1", "od-1", "500m"),
			pinned("db-2", "od-2", "1"), pod("web-2", "od-2", "1"),
		},
	}
	without := planConsolidating(t, Consolidation{}, s)
	if without.Summary.DrainableNodes != 0 {
		t.Fatalf("without consolidation: %+v", without.Summary)
	}
	p := planConsolidating(t, Consolidation{Enabled: true, MinHourlySavingPerEviction: 0.01}, s)
	od1, od2 := node(p, "od-1"), node(p, "od-2")
	if !od1.Drainable || !od1.Consolidated || od1.Reason != "" {
		t.Fatalf("od-1: %+v", od1)
	}
	if od2.Drainable || od2.Reason != node(without, "od-2").Reason || od2.ConsolidationReason != "receives pods from the consolidation of od-1" {
		t.Errorf("od-2 received a pod and stays, with its reason as without consolidation and the consolidation's: %+v", od2)
	}
	want := map[string]struct {
		dest     string
		onDemand bool
	}{"db-1": {"od-2", true}, "web-1": {"spot", false}}
	for _, pp := range od1.Pods {
		if w := want[pp.Name]; pp.Destination != w.dest || pp.OnDemand != w.onDemand || pp.Action != "move" {
			t.Errorf("%s: %+v, want %+v", pp.Name, pp, w)
		}
	}
	if p.Summary.DrainableNodes != 1 || p.Summary.ConsolidatedNodes != 1 || p.Summary.PodsToMove != 2 || p.Summary.HourlySaving != 0.192 {
		t.Errorf("summary %+v", p.Summary)
	}
	// A node that drains onto spot alone is no consolidation.
	p = planConsolidating(t, Consolidation{Enabled: true}, &snapshot.Snapshot{Nodes: s.Nodes, Pods: []*corev1.Pod{pod("web-1", "od-1", "500m")}})
	if od1 := node(p, "od-1"); !od1.Drainable || od1.Consolidated || p.Summary.ConsolidatedNodes != 0 {
		t.Errorf("od-1 drains onto spot alone: %+v, %+v", od1, p.Summary)
	}
}

// What stops a consolidation: a price too low for its evictions, an unknown
// price, a pod that blocks the node, no room on the on-demand nodes that stay;
// and the node that received pods is never emptied in the same plan. Each
// node says why in ConsolidationReason, unless its spot-only reason said it
// (a blocking pod).
func TestConsolidationRefusals(t *testing.T) {
	base := func() *snapshot.Snapshot {
		return &snapshot.Snapshot{
			Nodes: []*corev1.Node{priced("od-1", tu.OnDemand()), priced("od-2", tu.OnDemand()), priced("spot", tu.Spot())},
			Pods: []*corev1.Pod{
				pinned("db-1", "od-1", "500m"), pod("web-1", "od-1", "500m"),
				pinned("db-2", "od-2", "1"), pod("web-2", "od-2", "1"),
			},
		}
	}
	on := Consolidation{Enabled: true, MinHourlySavingPerEviction: 0.01}
	cases := map[string]struct {
		change func(*snapshot.Snapshot)
		c      Consolidation
		// why is what each on-demand node's ConsolidationReason says.
		why string
	}{
		// 0.192/h for two evictions is 0.096 per eviction.
		"saving per eviction below the threshold": {func(*snapshot.Snapshot) {}, Consolidation{Enabled: true, MinHourlySavingPerEviction: 0.1},
			"0.192 per hour over 2 evictions is less than planner.consolidation.minHourlySavingPerEviction (0.1) each"},
		"price unknown": {func(s *snapshot.Snapshot) {
			for _, n := range s.Nodes {
				delete(n.Labels, InstanceTypeLabel)
			}
		}, on, "the node's on-demand price is unknown (pricing.instanceTypes, or the cloud provider's prices)"},
		"a pod blocks the node": {func(s *snapshot.Snapshot) {
			s.Pods[1].Annotations[DoNotMoveKey] = "true"
			s.Pods[3].Annotations[DoNotMoveKey] = "true"
		}, on, ""},
		"no room on the other on-demand node": {func(s *snapshot.Snapshot) {
			s.Pods = append(s.Pods, pinned("big-2", "od-2", "2"), pinned("big-1", "od-1", "2800m"))
		}, on, "0/1 other on-demand nodes fit: 1 NodeResourcesFit: Insufficient cpu; moving pods that may run on spot off the other on-demand nodes makes no room"},
		"the only on-demand node": {func(s *snapshot.Snapshot) {
			s.Nodes = []*corev1.Node{s.Nodes[0], s.Nodes[2]}
			s.Pods = s.Pods[:2]
		}, on, "no other on-demand node to send pods to"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := base()
			tc.change(s)
			p := planConsolidating(t, tc.c, s)
			if p.Summary.DrainableNodes != 0 || p.Summary.ConsolidatedNodes != 0 {
				t.Errorf("summary %+v", p.Summary)
			}
			for _, n := range p.Nodes {
				for _, pp := range n.Pods {
					if pp.OnDemand || pp.Destination != "" {
						t.Errorf("%s/%s: %+v", n.Name, pp.Name, pp)
					}
				}
				if n.Class != "on-demand" {
					continue
				}
				if !strings.Contains(n.ConsolidationReason, tc.why) || (tc.why == "") != (n.ConsolidationReason == "") {
					t.Errorf("%s: not consolidated because %q, want %q (reason %q)", n.Name, n.ConsolidationReason, tc.why, n.Reason)
				}
			}
		})
	}
}

// Pods that fit on spot go there first; a pod goes to an on-demand node only
// when no spot node takes it, and then to the fullest on-demand node that
// stays. Three on-demand nodes: the two emptier ones are consolidated onto
// the fullest, which stays.
func TestConsolidationPacksOntoTheFullest(t *testing.T) {
	s := &snapshot.Snapshot{
		Nodes: []*corev1.Node{priced("od-a", tu.OnDemand()), priced("od-b", tu.OnDemand()), priced("od-c", tu.OnDemand()), priced("spot", tu.Spot())},
		Pods: []*corev1.Pod{
			pinned("db-a", "od-a", "250m"),
			pinned("db-b", "od-b", "1"), pod("web-b", "od-b", "500m"),
			pinned("db-c", "od-c", "2"),
		},
	}
	p := planConsolidating(t, Consolidation{Enabled: true}, s)
	a, b, c := node(p, "od-a"), node(p, "od-b"), node(p, "od-c")
	if !a.Consolidated || destinations(a)["db-a"] != "od-c" {
		t.Errorf("od-a: %+v", a)
	}
	if d := destinations(b); !b.Consolidated || d["db-b"] != "od-c" || d["web-b"] != "spot" {
		t.Errorf("od-b: %+v", b)
	}
	if c.Drainable {
		t.Errorf("od-c received pods and must stay: %+v", c)
	}
	if p.Summary.DrainableNodes != 2 || p.Summary.ConsolidatedNodes != 2 {
		t.Errorf("summary %+v", p.Summary)
	}
}

// FitsOnDemand answers the re-check of a consolidation's drain: another
// on-demand node, never the pod's own.
func TestFitsOnDemand(t *testing.T) {
	s := &snapshot.Snapshot{
		Nodes: []*corev1.Node{priced("od-1", tu.OnDemand()), priced("od-2", tu.OnDemand()), priced("spot", tu.Spot())},
		Pods:  []*corev1.Pod{pinned("db-1", "od-1", "400m"), pinned("big", "od-1", "1"), pinned("db-2", "od-2", "3600m")},
	}
	pl := New(Options{})
	dest, reason, err := pl.FitsOnDemand(context.Background(), s, s.Pods[0])
	if err != nil || dest != "od-2" {
		t.Errorf("db-1: %q %q %v", dest, reason, err)
	}
	dest, reason, err = pl.FitsOnDemand(context.Background(), s, s.Pods[2])
	if err != nil || dest != "" || reason != "0/1 other on-demand nodes fit: 1 NodeResourcesFit: Insufficient cpu" {
		t.Errorf("db-2: %q %q %v", dest, reason, err)
	}
}

// The on-demand node that stays is full of pods that may run on spot: a
// consolidation moves the smallest one that makes room to spot (it is
// displaced), then the emptied node's pinned pod takes its place, in a later
// wave. Displaced pods count as evictions, draw on their budgets, and a
// budget that allows nothing keeps the node as it is.
func TestConsolidationDisplacesPodsThatMayRunOnSpot(t *testing.T) {
	base := func() *snapshot.Snapshot {
		return &snapshot.Snapshot{
			Nodes: []*corev1.Node{priced("od-1", tu.OnDemand()), priced("od-2", tu.OnDemand()), priced("spot", tu.Spot())},
			Pods: []*corev1.Pod{
				pinned("db-1", "od-1", "1500m"), pod("web-1a", "od-1", "1", tu.WithLabels("app", "web")), pod("web-1b", "od-1", "1200m"),
				pinned("db-2", "od-2", "600m"), pod("web-2", "od-2", "2"),
			},
		}
	}
	on := Consolidation{Enabled: true, MinHourlySavingPerEviction: 0.01}
	p := planConsolidating(t, on, base())
	od2 := node(p, "od-2")
	if !od2.Drainable || !od2.Consolidated {
		t.Fatalf("od-2: %+v", od2)
	}
	want := []PodPlan{{Namespace: "default", Name: "web-1a", Action: "move", Destination: "spot", From: "od-1", Wave: 1}}
	if !reflect.DeepEqual(od2.Displaced, want) {
		t.Errorf("displaced %+v, want %+v", od2.Displaced, want)
	}
	waves := map[string]int{"db-2": 2, "web-2": 1}
	for _, pp := range od2.Pods {
		if pp.Wave != waves[pp.Name] {
			t.Errorf("%s in wave %d, want %d", pp.Name, pp.Wave, waves[pp.Name])
		}
	}
	if db := od2.Pods[1]; db.Name != "db-2" || db.Destination != "od-1" || !db.OnDemand {
		t.Errorf("db-2: %+v", db)
	}
	if od2.Waves != 2 || od2.Evictions() != 3 || p.Summary.PodsToMove != 3 {
		t.Errorf("waves %d, evictions %d, summary %+v", od2.Waves, od2.Evictions(), p.Summary)
	}
	if got := od2.PodWaves(); !reflect.DeepEqual(got, map[string]int{"default/web-1a": 1, "default/web-2": 1, "default/db-2": 2}) {
		t.Errorf("PodWaves %v", got)
	}
	if got := od2.DisplacedPods(); !reflect.DeepEqual(got, map[string]string{"default/web-1a": "od-1"}) {
		t.Errorf("DisplacedPods %v", got)
	}
	if od1 := node(p, "od-1"); od1.Drainable {
		t.Errorf("od-1 received a pod and stays: %+v", od1)
	}

	// Refused: a budget of the displaced pod allows nothing; the saving per
	// eviction allows two evictions, not three; the spot node has no room
	// for the displaced pod.
	for name, tc := range map[string]struct {
		change func(*snapshot.Snapshot)
		c      Consolidation
	}{
		"budget": {func(s *snapshot.Snapshot) { s.PDBs = []*policyv1.PodDisruptionBudget{pdb("web", "web", 0)} }, on},
		// 0.192 per hour over 3 evictions is 0.064.
		"saving per eviction": {func(*snapshot.Snapshot) {}, Consolidation{Enabled: true, MinHourlySavingPerEviction: 0.065}},
		"no room on spot":     {func(s *snapshot.Snapshot) { s.Pods = append(s.Pods, pod("full", "spot", "1800m")) }, on},
	} {
		t.Run(name, func(t *testing.T) {
			s := base()
			tc.change(s)
			p := planConsolidating(t, tc.c, s)
			if od2 := node(p, "od-2"); od2.Drainable || len(od2.Displaced) > 0 || p.Summary.PodsToMove != 0 {
				t.Errorf("od-2: %+v; summary %+v", od2, p.Summary)
			}
		})
	}
	// Without the budget's refusal, the budget's one disruption is drawn.
	s := base()
	s.PDBs = []*policyv1.PodDisruptionBudget{pdb("web", "web", 1)}
	if od2 := node(planConsolidating(t, on, s), "od-2"); !od2.Drainable || len(od2.Displaced) != 1 {
		t.Errorf("with a budget of 1: %+v", od2)
	}
}

// A pod kept off spot by its zone spread constraint (the spot node is in
// another zone, and the spread allows no more pods there) goes to the
// on-demand node that stays, in its zone, like a pinned pod; a pod kept off
// spot by room alone does not.
func TestConsolidationMovesPodsTheirSpreadKeepsOffSpot(t *testing.T) {
	spread := []tu.PodOption{tu.WithLabels("app", "cache"), tu.Spread("cache", corev1.LabelTopologyZone, 1)}
	base := func() *snapshot.Snapshot {
		return &snapshot.Snapshot{
			Nodes: []*corev1.Node{priced("od-b1", tu.OnDemand(), tu.Zone("b")), priced("od-b2", tu.OnDemand(), tu.Zone("b")),
				priced("od-a", tu.OnDemand(), tu.Zone("a")), priced("spot-a", tu.Spot(), tu.Zone("a"))},
			Pods: []*corev1.Pod{
				// cache: one pod per zone; the one in b may not go to a.
				pod("cache-1", "od-b1", "500m", spread...), pod("cache-2", "od-a", "500m", spread...),
				pod("web-1", "od-b1", "500m"),
				pinned("db-2", "od-b2", "1"), pinned("db-a", "od-a", "1"),
			},
		}
	}
	on := Consolidation{Enabled: true, MinHourlySavingPerEviction: 0.01}
	p := planConsolidating(t, on, base())
	b1 := node(p, "od-b1")
	if !b1.Drainable || !b1.Consolidated {
		t.Fatalf("od-b1: %+v", b1)
	}
	want := map[string]PodPlan{
		"cache-1": {Destination: "od-b2", OnDemand: true},
		"web-1":   {Destination: "spot-a"},
	}
	for _, pp := range b1.Pods {
		if w := want[pp.Name]; pp.Destination != w.Destination || pp.OnDemand != w.OnDemand {
			t.Errorf("%s: %+v, want %+v", pp.Name, pp, w)
		}
	}

	// With room for it in a spot node of its own zone, cache-1 goes there.
	s := base()
	s.Nodes = append(s.Nodes, priced("spot-b", tu.Spot(), tu.Zone("b")))
	if b1 := node(planConsolidating(t, on, s), "od-b1"); !b1.Drainable || b1.Consolidated {
		t.Errorf("with spot in zone b, od-b1 drains onto spot alone: %+v", b1)
	}
	// Without the spread constraint, a cache pod that finds no room on spot
	// (web-1 still fits) keeps its node: full spot nodes are no reason to
	// move it between on-demand nodes.
	s = base()
	s.Pods[0] = pod("cache-1", "od-b1", "1", tu.WithLabels("app", "cache"))
	s.Pods = append(s.Pods, pod("full", "spot-a", "3100m"))
	if b1 := node(planConsolidating(t, on, s), "od-b1"); b1.Drainable {
		t.Errorf("od-b1 drained with spot full: %+v", b1)
	}
}

// A second pinned pod placed in what is left of the room a displacement made
// goes after the displaced pod too, though it needed no displacement of its
// own.
func TestConsolidationPodsToOnDemandFollowTheDisplaced(t *testing.T) {
	s := &snapshot.Snapshot{
		Nodes: []*corev1.Node{priced("od-1", tu.OnDemand()), priced("od-2", tu.OnDemand()), priced("spot", tu.Spot())},
		Pods: []*corev1.Pod{
			pinned("db-1", "od-1", "1500m"), pod("web-1a", "od-1", "2"), pod("web-1b", "od-1", "300m"),
			// db-2a needs web-1a's room; db-2b fits in what is left of it.
			pinned("db-2a", "od-2", "1"), pinned("db-2b", "od-2", "500m"), pod("web-2", "od-2", "1"),
		},
	}
	p := planConsolidating(t, Consolidation{Enabled: true, MinHourlySavingPerEviction: 0.01}, s)
	od2 := node(p, "od-2")
	if !od2.Drainable || len(od2.Displaced) != 1 || od2.Displaced[0].Name != "web-1a" {
		t.Fatalf("od-2: %+v", od2)
	}
	for _, pp := range od2.Pods {
		if want := map[bool]int{true: 2, false: 1}[pp.OnDemand]; pp.Wave != want {
			t.Errorf("%s (on-demand %v) in wave %d, want %d", pp.Name, pp.OnDemand, pp.Wave, want)
		}
	}
}

// A pod with a required constraint on other pods (here a zone spread) is
// never displaced: where it may go depends on pods of the drained node that
// leave in a later wave, and the drain's re-check before its eviction sees
// them still in place. (A consolidation displaced a zone-b replica of a
// spread workload to spot in another zone, counting the drained node's own
// replica of zone c as gone already; each drain evicted its first wave and
// stopped at that re-check, every few minutes.) Another pod of the node
// makes the room instead, or none does.
func TestConsolidationDisplacesNoPodWithInterPodConstraints(t *testing.T) {
	spread := []tu.PodOption{tu.WithLabels("app", "web"), tu.Spread("web", corev1.LabelTopologyZone, 1)}
	base := func(web1b ...tu.PodOption) *snapshot.Snapshot {
		return &snapshot.Snapshot{
			Nodes: []*corev1.Node{priced("od-1", tu.OnDemand(), tu.Zone("a")), priced("od-2", tu.OnDemand(), tu.Zone("a")), priced("spot", tu.Spot(), tu.Zone("a"))},
			Pods: []*corev1.Pod{
				// web-1a is the smallest pod that makes room on od-1 for db-2.
				pinned("db-1", "od-1", "1500m"), pod("web-1a", "od-1", "1", spread...), pod("web-1b", "od-1", "1200m", web1b...),
				pinned("db-2", "od-2", "600m"), pod("web-2", "od-2", "2"),
			},
		}
	}
	on := Consolidation{Enabled: true, MinHourlySavingPerEviction: 0.01}
	od2 := node(planConsolidating(t, on, base()), "od-2")
	if !od2.Drainable || len(od2.Displaced) != 1 || od2.Displaced[0].Name != "web-1b" {
		t.Errorf("od-2 should displace web-1b, not web-1a: %+v", od2)
	}
	// With web-1b spread too, no pod of od-1 may make the room.
	od2 = node(planConsolidating(t, on, base(tu.Spread("web", corev1.LabelTopologyZone, 1))), "od-2")
	if od2.Drainable || len(od2.Displaced) > 0 {
		t.Errorf("od-2 drainable by displacing a spread pod: %+v", od2)
	}
}

// The pods a consolidation sends to on-demand nodes in more than one wave
// are placed by the scheduler's scores (least allocated first), not by the
// plan's best fit: when that leaves a later wave's pod no node, the node is
// not consolidated. big-1 and big-2 share a budget of one disruption, so
// big-2 goes in the second wave; the plan puts small on z, the fullest node
// it fits, but the scheduler puts it on y, the emptier one, and big-2 then
// fits nowhere.
func TestConsolidationPlacesOnDemandPodsAsTheSchedulerWill(t *testing.T) {
	base := func(zRoom string) *snapshot.Snapshot {
		onDemand := tu.RequireNodeLabel(capacityType, "on-demand")
		return &snapshot.Snapshot{
			Nodes: []*corev1.Node{priced("od-w", tu.OnDemand()), priced("od-x", tu.OnDemand()), priced("od-y", tu.OnDemand()),
				priced("od-z", tu.OnDemand()), priced("spot", tu.Spot())},
			Pods: []*corev1.Pod{
				pod("big-1", "od-w", "1", onDemand, tu.WithLabels("app", "big")),
				pod("big-2", "od-w", "1", onDemand, tu.WithLabels("app", "big")),
				pinned("small", "od-w", "500m"),
				pinned("fill-x", "od-x", "3"), pinned("fill-y", "od-y", "3"), pinned("fill-z", "od-z", zRoom),
			},
			PDBs: []*policyv1.PodDisruptionBudget{pdb("big", "big", 1)},
		}
	}
	on := Consolidation{Enabled: true, MinHourlySavingPerEviction: 0.01}
	// (A node not consolidated keeps the reason of the spot-only passes.)
	if w := node(planConsolidating(t, on, base("3500m")), "od-w"); w.Drainable {
		t.Errorf("od-w consolidated, though big-2 would find no node: %+v", w)
	}
	// With room for a second big pod on z, the scheduler's placement works too.
	w := node(planConsolidating(t, on, base("3")), "od-w")
	if !w.Drainable || !w.Consolidated {
		t.Errorf("od-w with room on z: %+v", w)
	}
	waves := map[string]int{}
	for _, pp := range w.Pods {
		waves[pp.Name] = pp.Wave
	}
	if waves["big-1"] == waves["big-2"] {
		t.Errorf("waves %v: the test needs big-1 and big-2 in different waves", waves)
	}
}
