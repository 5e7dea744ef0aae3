package world

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

// "PDB below budget" counts the pods a budget misses, minute by minute,
// whatever took them: here pods killed around the Eviction API (as a
// preemption does), two below the budget for three minutes.
func TestPDBBelowBudgetPodMinutes(t *testing.T) {
	w, _ := startedWorld(t, 10)
	var app *App
	for _, a := range w.Apps {
		if a.PDB != nil {
			if healthy, desired := w.PDBHealth(a); desired >= 2 && healthy >= desired {
				app = a
				break
			}
		}
	}
	if app == nil {
		t.Fatal("no healthy workload with a budget of two or more")
	}
	healthy, desired := w.PDBHealth(app)
	// Take the workload two pods below its budget.
	taken := 0
	for _, p := range app.pods {
		if taken == healthy-desired+2 {
			break
		}
		if p.Healthy(w.Now()) {
			w.DeletePod(p)
			taken++
		}
	}
	if h, d := w.PDBHealth(app); d-h != 2 {
		t.Fatalf("%d healthy of %d desired, want two below", h, d)
	}
	// Other workloads may still be starting: they count too.
	others := 0.0
	for _, a := range w.Apps {
		if a != app && a.PDB != nil {
			if h, d := w.PDBHealth(a); h < d {
				others += float64(d - h)
			}
		}
	}
	start := w.m.belowBudgetSeconds
	for range 3 {
		w.m.observe(time.Minute)
	}
	if got, want := (w.m.belowBudgetSeconds-start)/60, 3*(2+others); got != want {
		t.Errorf("%v pod-minutes below budget, want %v", got, want)
	}
	if res := w.m.result("test", 1); res.PDBBelowBudgetPodMinutes != w.m.belowBudgetSeconds/60 {
		t.Errorf("result %v, recorder %v", res.PDBBelowBudgetPodMinutes, w.m.belowBudgetSeconds/60)
	}
}

// The voluntary part of "PDB below budget": a pod evicted by the strategy
// (the budget allows it), then one more taken around the Eviction API while
// the first one's replacement starts: one pod below the budget, and it counts
// as voluntary until a pod of the workload is Ready again. The agent's
// evictions (its node is being taken back) are not voluntary.
func TestPDBBelowBudgetVoluntaryPodMinutes(t *testing.T) {
	w, sched := startedWorld(t, 10)
	// A workload whose budget allows exactly one disruption.
	oneAllowed := func() *App {
		t.Helper()
		for _, a := range w.Apps {
			if a.PDB != nil {
				if healthy, desired := w.PDBHealth(a); desired >= 1 && healthy == desired+1 {
					return a
				}
			}
		}
		t.Fatal("no healthy workload whose budget allows exactly one disruption")
		return nil
	}
	app := oneAllowed()
	healthyPods := func() []*Pod {
		var out []*Pod
		for _, p := range app.pods {
			if p.Healthy(w.Now()) {
				out = append(out, p)
			}
		}
		return out
	}
	if err := w.Evict(healthyPods()[0], report.ComponentAgent); err != nil {
		t.Fatal(err)
	}
	if app.evictedStarting != 0 {
		t.Fatalf("the agent's eviction counted as voluntary: %d", app.evictedStarting)
	}
	// The voluntary case, on another workload.
	app = oneAllowed()
	if err := w.Evict(healthyPods()[0], "rescheduler"); err != nil {
		t.Fatal(err)
	}
	w.DeletePod(healthyPods()[0]) // a preemption, around the Eviction API
	if h, d := w.PDBHealth(app); d-h != 1 || app.evictedStarting != 1 {
		t.Fatalf("%d healthy of %d desired, %d replacements starting; want one below, one starting", h, d, app.evictedStarting)
	}
	start, startVoluntary := w.m.belowBudgetSeconds, w.m.belowBudgetVoluntarySeconds
	for range 2 {
		w.m.observe(time.Minute)
	}
	if got := (w.m.belowBudgetVoluntarySeconds - startVoluntary) / 60; got != 2 {
		t.Errorf("%v voluntary pod-minutes below budget, want 2", got)
	}
	if got := (w.m.belowBudgetSeconds - start) / 60; got < 2 {
		t.Errorf("%v pod-minutes below budget in all, want at least 2", got)
	}
	// Room for the replacements (the test runs no autoscaler): a node in
	// each on-demand group. They come and become Ready: nothing is starting
	// any more.
	for _, g := range w.Groups {
		if !g.Spot {
			w.addNode(g)
		}
	}
	runMinutes(t, w, sched, 10)
	if h, d := w.PDBHealth(app); app.evictedStarting != 0 || h < d {
		t.Errorf("%d replacements starting, %d healthy of %d desired, after ten minutes; want none starting, none below", app.evictedStarting, h, d)

	}
	if res := w.m.result("test", 1); res.PDBBelowBudgetVoluntaryPodMinutes != w.m.belowBudgetVoluntarySeconds/60 {
		t.Errorf("result %v, recorder %v", res.PDBBelowBudgetVoluntaryPodMinutes, w.m.belowBudgetVoluntarySeconds/60)
	}
}

// A voluntary eviction whose replacement a scale-down made unnecessary
// causes nothing afterwards: a preemption of the same workload later is not
// counted as voluntary (week-200 counted one: the shortfall came from a
// preemption half an hour after the eviction, whose replacement never came).
func TestPDBBelowBudgetVoluntaryEndsWithAScaleDown(t *testing.T) {
	w, _ := startedWorld(t, 10)
	var app *App
	for _, a := range w.Apps {
		if a.PDB != nil && a.Kind != scenario.StatefulSet {
			if healthy, desired := w.PDBHealth(a); desired >= 1 && healthy == desired+1 && healthy == a.desired {
				app = a
				break
			}
		}
	}
	if app == nil {
		t.Fatal("no healthy Deployment whose budget allows exactly one disruption")
	}
	healthy := func() *Pod {
		for _, p := range app.pods {
			if p.Healthy(w.Now()) {
				return p
			}
		}
		t.Fatal("no healthy pod")
		return nil
	}
	if err := w.Evict(healthy(), "rescheduler"); err != nil {
		t.Fatal(err)
	}
	// The workload scales down by one before its controller replaces the
	// evicted pod: no replacement is created.
	app.Low, app.Peak = int32(app.desired-1), int32(app.desired-1)
	before := len(app.pods)
	w.reconcile(app)
	if len(app.pods) != before {
		t.Fatalf("%d pods after the scale-down, want %d: no replacement", len(app.pods), before)
	}
	w.m.observe(time.Minute)
	if app.evictedStarting != 0 {
		t.Fatalf("%d replacements starting after a scale-down took the evicted pod's place, want 0", app.evictedStarting)
	}
	w.DeletePod(healthy()) // a preemption
	w.DeletePod(healthy())
	start, startVoluntary := w.m.belowBudgetSeconds, w.m.belowBudgetVoluntarySeconds
	w.m.observe(time.Minute)
	if got := (w.m.belowBudgetSeconds - start) / 60; got < 1 {
		t.Fatalf("%v pod-minutes below budget after two preemptions, want at least 1", got)
	}
	if got := (w.m.belowBudgetVoluntarySeconds - startVoluntary) / 60; got != 0 {
		t.Errorf("%v voluntary pod-minutes below budget, want 0: the eviction's place was taken by the scale-down", got)
	}
}

// startedWorld is the default scenario's world after minutes of its
// scheduler (no autoscaler, no strategy), with that scheduler.
func startedWorld(t *testing.T, minutes int) (*World, *Scheduler) {
	t.Helper()
	w, err := New(scenario.DefaultScenario(), 1, false)
	if err != nil {
		t.Fatal(err)
	}
	sched := mustScheduler(t, w)
	runMinutes(t, w, sched, minutes)
	return w, sched
}

// runMinutes runs the world's scheduler for minutes, one a step.
func runMinutes(t *testing.T, w *World, sched *Scheduler, minutes int) {
	t.Helper()
	for range minutes {
		w.Advance()
		if err := sched.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		w.Clock.Step(time.Minute)
	}
	w.Advance()
}

// "Zone spread short" counts, minute by minute, the zones missing from where
// the pods of a workload that must spread over zones run: of the zones where
// a node group takes them, or as many as its pods when fewer. A workload
// without the constraint is not measured.
func TestZoneSpreadShortZoneMinutes(t *testing.T) {
	sc := &scenario.Scenario{Name: "zones", Duration: metav1.Duration{Duration: time.Hour}}
	for _, z := range []string{"a", "b", "c"} {
		sc.Zones = append(sc.Zones, scenario.Zone{Name: z, SpotCapacity: scenario.CapacitySource{Nodes: ptr.To[int32](0)}})
		sc.NodeGroups = append(sc.NodeGroups, scenario.NodeGroup{Name: "od-" + z, Zone: z, CapacityType: scenario.OnDemand,
			CPU: resource.MustParse("4"), Memory: resource.MustParse("16Gi"), PricePerHour: 0.2, Max: 5, Initial: ptr.To[int32](1)})
	}
	sc.NodeGroups = append(sc.NodeGroups, scenario.NodeGroup{Name: "pinned", Zone: "a", CapacityType: scenario.OnDemand,
		CPU: resource.MustParse("4"), Memory: resource.MustParse("16Gi"), PricePerHour: 0.2, Max: 5, Initial: ptr.To[int32](1)})
	sc.Workloads = []scenario.Workload{
		{Name: "spread", Replicas: 3, CPU: resource.MustParse("100m"), Memory: resource.MustParse("64Mi"), ZoneSpread: true},
		{Name: "plain", Replicas: 3, CPU: resource.MustParse("100m"), Memory: resource.MustParse("64Mi")},
	}
	scenario.SetScenarioDefaults(sc)
	if errs := scenario.ValidateScenario(sc, ""); len(errs) > 0 {
		t.Fatal(errs)
	}
	w, err := New(sc, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.m.watchSpread(context.Background(), NewStaticFit(w, mustEngine(t, w)).Fits); err != nil {
		t.Fatal(err)
	}
	if len(w.m.spread) != 1 || w.m.spread[0].a.Name != "spread" || len(w.m.spread[0].zones) != 3 {
		t.Fatalf("measured %+v, want the spread workload over three zones", w.m.spread)
	}
	var spread, plain *App
	for _, a := range w.Apps {
		switch a.Name {
		case "spread":
			spread = a
		case "plain":
			plain = a
		}
	}
	node := map[string]*Node{}
	for _, n := range w.nodes {
		node[n.Group.Name] = n
	}
	var pods []*Pod
	for k := range 3 {
		pods = append(pods, w.createPod(spread, k))
		w.bind(w.createPod(plain, k), node["od-a"]) // not measured
	}
	minutes := func() float64 {
		start := w.m.spreadShortSeconds
		w.m.observe(time.Minute)
		return (w.m.spreadShortSeconds - start) / 60
	}
	if got := minutes(); got != 0 {
		t.Errorf("no pod running: %v zone-minutes short, want 0", got)
	}
	w.bind(pods[0], node["od-a"])
	w.bind(pods[1], node["pinned"]) // zone a too
	if got := minutes(); got != 1 {
		t.Errorf("two pods in zone a: %v zone-minutes short, want 1 (two pods could be in two zones)", got)
	}
	w.bind(pods[2], node["od-a"])
	if got := minutes(); got != 2 {
		t.Errorf("three pods in zone a: %v zone-minutes short, want 2", got)
	}
	w.startTermination(pods[1])
	w.removePod(pods[1])
	p := w.createPod(spread, 1)
	w.bind(p, node["od-b"])
	if got := minutes(); got != 1 {
		t.Errorf("pods in zones a, a, b: %v zone-minutes short, want 1", got)
	}
	w.startTermination(pods[2])
	if got := minutes(); got != 0 {
		t.Errorf("pods in zones a and b, the third terminating: %v zone-minutes short, want 0", got)
	}
	w.bind(w.createPod(spread, 2), node["od-c"])
	if got, res := minutes(), w.m.result("test", 1); got != 0 || res.ZoneSpreadShortZoneMinutes != 4 {
		t.Errorf("pods in zones a, b and c: %v zone-minutes short, want 0; in all %v, want 4", got, res.ZoneSpreadShortZoneMinutes)
	}
}

// The Eviction API refuses what the budget does not allow, and a forced
// eviction below the budget is a violation.
func TestPDBViolationsCounted(t *testing.T) {
	w, _ := startedWorld(t, 5)
	var app *App
	for _, a := range w.Apps {
		if a.PDB != nil && a.PDB.Spec.MinAvailable != nil {
			app = a
			break
		}
	}
	healthy, desired := w.PDBHealth(app)
	if healthy-desired < 0 {
		t.Fatalf("%s not healthy yet: %d < %d", app.Name, healthy, desired)
	}
	evicted := 0
	for _, p := range app.pods {
		if err := w.Evict(p, "test"); err == nil {
			evicted++
		}
	}
	if evicted != healthy-desired || w.m.violations != 0 {
		t.Errorf("Eviction API let %d through (budget %d), %d violations", evicted, healthy-desired, w.m.violations)
	}
	for _, p := range app.pods {
		if !p.Terminating {
			w.forceEvict(p, "test")
			break
		}
	}
	if w.m.violations != 1 {
		t.Errorf("a forced eviction below the budget: %d violations seen, want 1", w.m.violations)
	}
}
