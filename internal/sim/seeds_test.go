package sim

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"spotter.dev/spotter/internal/sim/report"
	"spotter.dev/spotter/internal/sim/scenario"
)

// placedApp is a workload of a constructed world and the node its pods are
// bound to ("" leaves them Pending).
type placedApp struct {
	scenario.Workload
	node string
}

// constructedScenario is one zone with an on-demand group (one node at the
// start, od-0001) and a spot group (three nodes, spot-0002 to spot-0004) of
// 4 CPUs and 16Gi, at most 5 nodes each, the zone's spot capacity 10, and the
// given workloads (256Mi pods).
func constructedScenario(t *testing.T, apps ...placedApp) *scenario.Scenario {
	t.Helper()
	sc := &scenario.Scenario{Name: "constructed", Duration: metav1.Duration{Duration: time.Hour},
		Zones: []scenario.Zone{{Name: "z", SpotCapacity: scenario.CapacitySource{Nodes: ptr.To[int32](10)}}},
		NodeGroups: []scenario.NodeGroup{
			{Name: "od", Zone: "z", CapacityType: scenario.OnDemand, CPU: resource.MustParse("4"), Memory: resource.MustParse("16Gi"),
				PricePerHour: 0.2, Max: 5, Initial: ptr.To[int32](1)},
			{Name: "spot", Zone: "z", CapacityType: scenario.Spot, CPU: resource.MustParse("4"), Memory: resource.MustParse("16Gi"),
				PricePerHour: 0.07, Max: 5, Initial: ptr.To[int32](3)},
		}}
	for _, a := range apps {
		if a.Memory.IsZero() {
			a.Memory = resource.MustParse("256Mi")
		}
		sc.Workloads = append(sc.Workloads, a.Workload)
	}
	scenario.SetScenarioDefaults(sc)
	if errs := scenario.ValidateScenario(sc, ""); len(errs) > 0 {
		t.Fatal(errs)
	}
	return sc
}

// constructedWorld is the world of constructedScenario with the workloads'
// pods bound where they say, Ready: a minute has passed.
func constructedWorld(t *testing.T, apps ...placedApp) *World {
	t.Helper()
	sc := constructedScenario(t, apps...)
	w, err := newWorld(sc, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range w.Apps {
		for k := range int(a.Low) {
			p := w.createPod(a, k)
			if n := apps[i].node; n != "" {
				w.bind(p, w.NodeByName(n))
			}
		}
	}
	w.Clock.Step(time.Minute)
	w.advance() // the pods become Ready; the apps' desired scale is set
	return w
}

func app(name string, replicas int32, cpu string, node string) placedApp {
	return placedApp{Workload: scenario.Workload{Name: name, Replicas: replicas, CPU: resource.MustParse(cpu)}, node: node}
}

// k8s-spot-rescheduler fits pods onto the fullest spot node first (its code
// sorts spot nodes by requested CPU, most first; its README says the
// opposite), largest pod first, each on the first node that passes.
func TestReschedulerSeedFillsTheFullestSpotNodeFirst(t *testing.T) {
	w := constructedWorld(t,
		app("fill-a", 2, "500m", "spot-0002"), // 1000m used
		app("fill-b", 6, "500m", "spot-0003"), // 3000m used: the fullest
		app("small", 1, "500m", "od-0001"),
		app("big", 1, "1500m", "od-0001"),
	)
	s := &reschedulerSeed{}
	if err := s.setup(w, mustEngine(t, w)); err != nil {
		t.Fatal(err)
	}
	od := w.NodeByName("od-0001")
	nodes, isSpot := spotFirst(w)
	if got := []string{nodes[0].Name, nodes[1].Name, nodes[2].Name}; !equal(got, "spot-0003", "spot-0002", "spot-0004") {
		t.Errorf("spot order %v, want fullest first: spot-0003, spot-0002, spot-0004", got)
	}
	placed, err := s.fit(context.Background(), w, od, movable(od), nodes, isSpot)
	if err != nil {
		t.Fatal(err)
	}
	// big (1500m) first: spot-0003 has 1000m left, so spot-0002; then small
	// (500m) on spot-0003, the fullest. Most free CPU first would have put
	// both on the empty spot-0004.
	want := map[string]string{"big": "spot-0002", "small": "spot-0003"}
	if len(placed) != 2 || placed[0].Pod.Labels[AppLabel] != "big" {
		t.Fatalf("placements %v: want big first", placed)
	}
	for _, pl := range placed {
		if app := pl.Pod.Labels[AppLabel]; pl.Node != want[app] {
			t.Errorf("%s placed on %q, want %s", app, pl.Node, want[app])
		}
	}
}

func equal(got []string, want ...string) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

// k8s-spot-rescheduler does nothing in a round while a pod is unschedulable,
// and drains as soon as none is.
func TestReschedulerSeedWaitsWhilePodsAreUnschedulable(t *testing.T) {
	w := constructedWorld(t,
		app("small", 2, "500m", "od-0001"),
		app("huge", 1, "8", ""), // fits no node: Pending, unschedulable
	)
	ctx := context.Background()
	e := mustEngine(t, w)
	sched := mustScheduler(t, w)
	if err := sched.run(ctx); err != nil {
		t.Fatal(err)
	}
	if len(sched.unschedulable) != 1 {
		t.Fatalf("%d unschedulable pods, want the huge one", len(sched.unschedulable))
	}
	s := &reschedulerSeed{}
	if err := s.setup(w, e); err != nil {
		t.Fatal(err)
	}
	s.useRun(sched, false)
	for range 3 {
		if err := s.step(ctx, w); err != nil {
			t.Fatal(err)
		}
		w.Clock.Step(time.Minute)
	}
	if s.drains != 0 || w.m.evict != 0 {
		t.Fatalf("%d drains, %d evictions while a pod was unschedulable", s.drains, w.m.evict)
	}
	for _, p := range w.AllPods() {
		if p.App.Name == "huge" {
			w.DeletePod(p)
		}
	}
	if err := s.step(ctx, w); err != nil {
		t.Fatal(err)
	}
	if s.drains != 1 || w.m.evict != 2 {
		t.Errorf("no pod unschedulable: %d drains, %d evictions, want 1 and 2", s.drains, w.m.evict)
	}
}

// The loop keeps its 10 s times in one-minute steps: its first round 10 s
// after the start; a refused eviction retried every 10 s while the 2 min
// eviction timeout has not passed (12 tries); the drain failing when the
// timeout has passed, the drain delay counted from then, the next round 10 s
// later.
func TestReschedulerSeedKeepsItsTenSecondLoop(t *testing.T) {
	guarded := app("guarded", 2, "500m", "od-0001")
	guarded.PDB = &scenario.PDBSpec{MinAvailable: ptr.To[int32](2)} // no disruption allowed
	w := constructedWorld(t, guarded)
	ctx := context.Background()
	s := &reschedulerSeed{}
	if err := s.setup(w, mustEngine(t, w)); err != nil {
		t.Fatal(err)
	}
	t0 := w.Now()
	for range 4 {
		if err := s.step(ctx, w); err != nil {
			t.Fatal(err)
		}
		if s.drains == 1 && s.drain != nil && !s.drain.retryUntil.Equal(t0.Add(10*time.Second+seedEvictionTimeout)) {
			t.Errorf("the drain began at %s, want at the first round, %s", s.drain.retryUntil.Add(-seedEvictionTimeout), t0.Add(10*time.Second))
		}
		w.Clock.Step(time.Minute)
	}
	if s.drains != 1 || s.drain != nil {
		t.Fatalf("%d drains, still draining: %v; want one drain, over", s.drains, s.drain != nil)
	}
	if w.m.refused != 2*12 || w.m.evict != 0 || w.m.wasted != 0 {
		t.Errorf("refused %d, evicted %d, wasted %d: want 24 refusals (2 pods, 12 tries each), nothing evicted", w.m.refused, w.m.evict, w.m.wasted)
	}
	end := t0.Add(10*time.Second + seedEvictionTimeout)
	if !s.nextDrain.Equal(end.Add(seedDrainDelay)) || s.wake.Sub(end)%seedHousekeeping != 0 {
		t.Errorf("drain delay until %s, next round %s; want the drain to end at %s, rounds 10 s apart from then", s.nextDrain, s.wake, end)
	}
	if n := w.NodeByName("od-0001"); n.Draining != "" {
		t.Errorf("the failed drain left its taint %q", n.Draining)
	}
}

// The seed rows run the termination handler of their era: on a notice the
// node is cordoned and every pod evicted through the Eviction API at once,
// counted under the handler's name, not as the strategy's voluntary
// evictions; a refusal is asked again 5 s later.
func TestSeedRowsRunATerminationHandler(t *testing.T) {
	guarded := app("guarded", 2, "500m", "spot-0002")
	guarded.PDB = &scenario.PDBSpec{MinAvailable: ptr.To[int32](2)}
	w := constructedWorld(t, app("web", 2, "500m", "spot-0002"), guarded)
	s := &migratorSeed{}
	if err := s.setup(w, nil); err != nil {
		t.Fatal(err)
	}
	n := w.NodeByName("spot-0002")
	w.notice(n, n.Group.zone)
	if !n.Cordoned {
		t.Errorf("the noticed node is not cordoned")
	}
	w.Clock.Step(time.Second)
	for _, p := range w.Apps[0].pods {
		if p.Node == n && !p.Terminating {
			t.Errorf("pod %s still runs on the noticed node", p.Obj.Name)
		}
	}
	if got := w.m.evictBy[report.ComponentHandler]; got != 2 || w.m.evict != 0 {
		t.Errorf("%d evictions by the handler, %d voluntary; want 2 and 0", got, w.m.evict)
	}
	before := w.m.refusedBy[report.ComponentHandler]
	w.Clock.Step(11 * time.Second)
	if got := w.m.refusedBy[report.ComponentHandler] - before; got != 4 {
		t.Errorf("%d refusals of the budget's pods in 11 s, want 4 (two pods, every 5 s)", got)
	}
}
