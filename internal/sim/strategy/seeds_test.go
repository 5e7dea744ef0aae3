package strategy

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"spotter.dev/spotter/internal/sim/report"
	"spotter.dev/spotter/internal/sim/scenario"
	"spotter.dev/spotter/internal/sim/simtest"
	"spotter.dev/spotter/internal/sim/world"
	"spotter.dev/spotter/internal/sim/worldtest"
)

// k8s-spot-rescheduler fits pods onto the fullest spot node first (its code
// sorts spot nodes by requested CPU, most first; its README says the
// opposite), largest pod first, each on the first node that passes.
func TestReschedulerSeedFillsTheFullestSpotNodeFirst(t *testing.T) {
	w := worldtest.ConstructedWorld(t,
		simtest.App("fill-a", 2, "500m", "spot-0002"), // 1000m used
		simtest.App("fill-b", 6, "500m", "spot-0003"), // 3000m used: the fullest
		simtest.App("small", 1, "500m", "od-0001"),
		simtest.App("big", 1, "1500m", "od-0001"),
	)
	s := &reschedulerSeed{}
	if err := s.Setup(w, worldtest.MustEngine(t, w)); err != nil {
		t.Fatal(err)
	}
	od := w.NodeByName("od-0001")
	nodes, isSpot := spotFirst(w)
	if got := []string{nodes[0].Name, nodes[1].Name, nodes[2].Name}; !equal(got, "spot-0003", "spot-0002", "spot-0004") {
		t.Errorf("spot order %v, want fullest first: spot-0003, spot-0002, spot-0004", got)
	}
	placed, err := s.fit(context.Background(), w, od, world.Movable(od), nodes, isSpot)
	if err != nil {
		t.Fatal(err)
	}
	// big (1500m) first: spot-0003 has 1000m left, so spot-0002; then small
	// (500m) on spot-0003, the fullest. Most free CPU first would have put
	// both on the empty spot-0004.
	want := map[string]string{"big": "spot-0002", "small": "spot-0003"}
	if len(placed) != 2 || placed[0].Pod.Labels[world.AppLabel] != "big" {
		t.Fatalf("placements %v: want big first", placed)
	}
	for _, pl := range placed {
		if app := pl.Pod.Labels[world.AppLabel]; pl.Node != want[app] {
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
	w := worldtest.ConstructedWorld(t,
		simtest.App("small", 2, "500m", "od-0001"),
		simtest.App("huge", 1, "8", ""), // fits no node: Pending, unschedulable
	)
	ctx := context.Background()
	e := worldtest.MustEngine(t, w)
	sched := worldtest.MustScheduler(t, w)
	if err := sched.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if len(sched.Unschedulable) != 1 {
		t.Fatalf("%d unschedulable pods, want the huge one", len(sched.Unschedulable))
	}
	s := &reschedulerSeed{}
	if err := s.Setup(w, e); err != nil {
		t.Fatal(err)
	}
	s.UseScheduler(sched, false)
	for range 3 {
		if err := s.Step(ctx, w); err != nil {
			t.Fatal(err)
		}
		w.Clock.Step(time.Minute)
	}
	if s.drains != 0 || w.Result("test", 1).Evictions != 0 {
		t.Fatalf("%d drains, %d evictions while a pod was unschedulable", s.drains, w.Result("test", 1).Evictions)
	}
	for _, p := range w.AllPods() {
		if p.App.Name == "huge" {
			w.DeletePod(p)
		}
	}
	if err := s.Step(ctx, w); err != nil {
		t.Fatal(err)
	}
	if s.drains != 1 || w.Result("test", 1).Evictions != 2 {
		t.Errorf("no pod unschedulable: %d drains, %d evictions, want 1 and 2", s.drains, w.Result("test", 1).Evictions)
	}
}

// The loop keeps its 10 s times in one-minute steps: its first round 10 s
// after the start; a refused eviction retried every 10 s while the 2 min
// eviction timeout has not passed (12 tries); the drain failing when the
// timeout has passed, the drain delay counted from then, the next round 10 s
// later.
func TestReschedulerSeedKeepsItsTenSecondLoop(t *testing.T) {
	guarded := simtest.App("guarded", 2, "500m", "od-0001")
	guarded.PDB = &scenario.PDBSpec{MinAvailable: ptr.To[int32](2)} // no disruption allowed
	w := worldtest.ConstructedWorld(t, guarded)
	ctx := context.Background()
	s := &reschedulerSeed{}
	if err := s.Setup(w, worldtest.MustEngine(t, w)); err != nil {
		t.Fatal(err)
	}
	t0 := w.Now()
	for range 4 {
		if err := s.Step(ctx, w); err != nil {
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
	if w.Result("test", 1).EvictionsRefused != 2*12 || w.Result("test", 1).Evictions != 0 || w.Result("test", 1).WastedEvictions != 0 {
		t.Errorf("refused %d, evicted %d, wasted %d: want 24 refusals (2 pods, 12 tries each), nothing evicted", w.Result("test", 1).EvictionsRefused, w.Result("test", 1).Evictions, w.Result("test", 1).WastedEvictions)
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
	guarded := simtest.App("guarded", 2, "500m", "spot-0002")
	guarded.PDB = &scenario.PDBSpec{MinAvailable: ptr.To[int32](2)}
	w := worldtest.ConstructedWorld(t, simtest.App("web", 2, "500m", "spot-0002"), guarded)
	s := &migratorSeed{}
	if err := s.Setup(w, nil); err != nil {
		t.Fatal(err)
	}
	n := w.NodeByName("spot-0002")
	w.Preempt(n)
	if !n.Cordoned {
		t.Errorf("the noticed node is not cordoned")
	}
	w.Clock.Step(time.Second)
	for _, p := range w.Apps[0].Pods() {
		if p.Node == n && !p.Terminating {
			t.Errorf("pod %s still runs on the noticed node", p.Obj.Name)
		}
	}
	if got := w.Result("test", 1).EvictionsBy[report.ComponentHandler]; got != 2 || w.Result("test", 1).Evictions != 0 {
		t.Errorf("%d evictions by the handler, %d voluntary; want 2 and 0", got, w.Result("test", 1).Evictions)
	}
	before := w.Result("test", 1).EvictionsRefusedBy[report.ComponentHandler]
	w.Clock.Step(11 * time.Second)
	if got := w.Result("test", 1).EvictionsRefusedBy[report.ComponentHandler] - before; got != 4 {
		t.Errorf("%d refusals of the budget's pods in 11 s, want 4 (two pods, every 5 s)", got)
	}
}

// mayFit is a necessary condition: in every round of a day of the default
// scenario, on every on-demand node, when the rescheduler seed's fit places
// every pod, mayFit said it might; and it spares most fits.
func TestReschedulerSeedMayFitIsNecessary(t *testing.T) {
	sc := simtest.Short(t, 24*time.Hour)
	w, err := world.New(sc, int64(sc.Seed), false)
	if err != nil {
		t.Fatal(err)
	}
	e := worldtest.MustEngine(t, w)
	s := &reschedulerSeed{}
	if err := s.Setup(w, e); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sched := worldtest.MustScheduler(t, w)
	as, err := world.NewAutoscaler(ctx, w, false)
	if err != nil {
		t.Fatal(err)
	}
	s.UseScheduler(sched, false)
	fits, spared, asked := 0, 0, 0
	for i := range 24 * 60 {
		w.Advance()
		if i%5 == 0 {
			nodes, isSpot := spotFirst(w)
			rooms := spotRoom(w)
			for _, od := range onDemandNodes(w) {
				pods := world.Movable(od)
				if len(pods) == 0 {
					continue
				}
				may, err := s.mayFit(ctx, pods, rooms)
				if err != nil {
					t.Fatal(err)
				}
				placed, err := s.fit(ctx, w, od, pods, nodes, isSpot)
				if err != nil {
					t.Fatal(err)
				}
				all := true
				for _, pl := range placed {
					all = all && pl.Node != ""
				}
				asked++
				if all {
					fits++
					if !may {
						t.Fatalf("%s at %s: every pod fits, mayFit said no", od.Name, w.Elapsed())
					}
				}
				if !may {
					spared++
				}
			}
		}
		for _, step := range []func(context.Context) error{
			func(ctx context.Context) error { return s.Step(ctx, w) }, sched.Run,
			func(ctx context.Context) error { return as.Run(ctx, sched.Unschedulable) },
		} {
			if err := step(ctx); err != nil {
				t.Fatal(err)
			}
		}
		w.Observe(time.Minute)
		w.Clock.Step(time.Minute)
	}
	if fits == 0 || spared < asked/2 {
		t.Errorf("%d of %d nodes fit, %d spared: the check proves little", fits, asked, spared)
	}
	t.Logf("%d of %d on-demand nodes fit; mayFit spared %d fits", fits, asked, spared)
}

// The migrator seed drains only at the top of the hour and churns; the
// rescheduler seed waits its drain delay between drains.
func TestSeedsTiming(t *testing.T) {
	sc := simtest.Short(t, 24*time.Hour)
	for _, name := range []string{Migrator, Rescheduler} {
		w, err := world.New(sc, int64(sc.Seed), false)
		if err != nil {
			t.Fatal(err)
		}
		e := worldtest.MustEngine(t, w)
		strategyImpl, _ := New(name, nil)
		if err := strategyImpl.Setup(w, e); err != nil {
			t.Fatal(err)
		}
		sched, as := worldtest.MustScheduler(t, w), worldtest.MustAutoscaler(t, w)
		var drainStarts []time.Duration
		prevEvictions := 0
		for range 24 * 60 {
			w.Advance()
			if err := strategyImpl.Step(context.Background(), w); err != nil {
				t.Fatal(err)
			}
			if w.Result("test", 1).Evictions > prevEvictions {
				drainStarts = append(drainStarts, w.Elapsed())
			}
			prevEvictions = w.Result("test", 1).Evictions
			_ = sched.Run(context.Background())
			_ = as.Run(context.Background(), sched.Unschedulable)
			w.Clock.Step(time.Minute)
		}
		if len(drainStarts) == 0 {
			t.Errorf("%s: no eviction in a day", name)
			continue
		}
		switch name {
		case Migrator:
			if first := drainStarts[0]; first%time.Hour != 0 {
				t.Errorf("migrator: first eviction at %s, not at the top of an hour", first)
			}
		case Rescheduler:
			s := strategyImpl.(*reschedulerSeed)
			_ = s
			last := -time.Hour
			for _, d := range drainStarts {
				if gap := d - last; gap > 2*time.Minute && gap < seedDrainDelay {
					t.Errorf("rescheduler: evictions at %s and %s, less than the drain delay apart", last, d)
				}
				last = d
			}
		}
	}
}

func TestParse(t *testing.T) {
	got, err := Parse("spotter, none,spotter")
	if err != nil || strings.Join(got, ",") != "spotter,none" {
		t.Errorf("got %v, %v", got, err)
	}
	if _, err := Parse("karpenter"); err == nil || !strings.Contains(err.Error(), "unknown strategy \"karpenter\"") {
		t.Errorf("unknown: %v", err)
	}
}
