package world

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"spotter.dev/spotter/internal/cloud"
	"spotter.dev/spotter/internal/sim/scenario"
	"spotter.dev/spotter/internal/sim/simtest"
)

// A cloud that reports stock-outs late accepts a request the market cannot
// hold: the nodes the market holds launch (partial delivery), the rest are
// listed as requests not yet fulfilled, unbilled, which carry a capacity
// error once the delay has passed; the provider cancels those first, and the
// autoscaler cancels failed requests of any group and backs the group off.
func TestLateStockOut(t *testing.T) {
	ctx := context.Background()
	sc := simtest.ConstructedScenario(t, simtest.App("web", 1, "500m", "spot-0002"))
	sc.Zones[0].SpotCapacity.Nodes = ptr.To[int32](4) // three spot nodes run: room for one
	sc.Zones[0].SpotCapacity.StockOutDelay.Duration = 3 * time.Minute
	w, err := New(sc, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	var spot *Group
	for _, g := range w.Groups {
		if g.Spot {
			spot = g
		}
	}
	g := group{w, spot}
	before, err := g.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.IncreaseSize(ctx, 2); err != nil {
		t.Fatalf("IncreaseSize(2) with room for one: %v; want the request accepted, its stock-out reported later", err)
	}
	if size, _ := g.TargetSize(ctx); size != 5 {
		t.Errorf("target size %d, want 5", size)
	}
	fresh := func() []cloud.Instance {
		insts, err := g.Nodes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return insts[len(before):]
	}
	for _, inst := range fresh() {
		if inst.State != cloud.InstanceCreating || inst.ID == "" || inst.Err != nil {
			t.Errorf("at once: %+v; want a request in flight, no error yet", inst)
		}
	}
	if got := w.spotNodes(spot.zone); got != 4 {
		t.Errorf("%d spot nodes hold capacity, want 4: the unfulfilled request holds none", got)
	}
	w.m.observe(time.Hour)
	if want := 0.2 + 4*0.07; w.m.r.Cost < want-1e-9 || w.m.r.Cost > want+1e-9 {
		t.Errorf("an hour costs %.3f, want %.3f: one on-demand and four spot nodes, the request the market could not hold unbilled", w.m.r.Cost, want)
	}
	w.Clock.Step(3*time.Minute - time.Second)
	for _, inst := range fresh() {
		if inst.Err != nil {
			t.Errorf("before the delay: %+v carries an error", inst)
		}
	}
	w.Clock.Step(time.Second)
	var failed, launched int
	for _, inst := range fresh() {
		switch {
		case inst.Err != nil && cloud.IsCapacityUnavailable(inst.Err) && inst.State == cloud.InstanceCreating:
			failed++
		case inst.Err == nil:
			launched++
		default:
			t.Errorf("after the delay: %+v", inst)
		}
	}
	if failed != 1 || launched != 1 {
		t.Fatalf("after the delay: %d failed, %d launched; want 1 and 1 (partial delivery)", failed, launched)
	}
	if err := g.DecreaseTargetSize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	left := fresh()
	if len(left) != 1 || left[0].Err != nil {
		t.Fatalf("after cancelling one: %+v; want the launched node left, the failed request gone", left)
	}

	// The autoscaler cancels a failed request whoever asked for it, and
	// backs its group off.
	if err := g.IncreaseSize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	as := &Autoscaler{w: w}
	as.cancelFailed()
	if len(fresh()) != 2 || spot.backoff.Active(w.Now()) {
		t.Fatalf("a request not yet failed was cancelled, or backed its group off")
	}
	w.Clock.Step(3 * time.Minute)
	as.cancelFailed()
	if len(fresh()) != 1 || !spot.backoff.Active(w.Now()) {
		t.Errorf("after the failure: %d new instances, backoff %+v; want the failed request cancelled and the group backed off", len(fresh()), spot.backoff)
	}
	if r := w.m.result("late", 1); r.SpotStockOuts != 2 {
		t.Errorf("%d stock-outs counted, want 2", r.SpotStockOuts)
	}
}

// marketScenario is one zone of 40 running spot nodes whose preemptions
// follow a trace of 4 instances that loses one at 90 s (then 3 run for
// ever), or a rate.
func marketScenario(t *testing.T, preemptions string) *World {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "drop.json"), []byte(`{"metadata": {"gap_seconds": 90}, "data": [4, 3, 3, 3, 3, 3, 3, 3]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	body := `apiVersion: spotter.dev/v1alpha1
kind: SimulationScenario
duration: 1h
zones:
- {name: a, spotCapacity: {nodes: 100}, preemptions: ` + preemptions + `}
nodeGroups:
- {name: od, zone: a, capacityType: on-demand, cpu: "2", memory: 8Gi, pricePerHour: 0.1}
- {name: sp, zone: a, capacityType: spot, cpu: "2", memory: 8Gi, pricePerHour: 0.03, initial: 40}
workloads:
- {name: web, replicas: 1, cpu: 500m, memory: 1Gi}
`
	sc, err := scenario.ParseScenario([]byte(body), dir)
	if err != nil {
		t.Fatal(err)
	}
	w, err := New(sc, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// noticed is when each notice came, since the start, as the report marks it.
func noticed(w *World) []time.Duration {
	var out []time.Duration
	for _, m := range w.m.r.Preemptions {
		out = append(out, (time.Duration(m.Hours*float64(time.Hour)) + time.Millisecond/2).Truncate(time.Millisecond))
	}
	return out
}

// A trace's drop comes at its tick, within the step, and takes as many nodes
// as the trace lost. Read as a hazard, the trace is a rate per node-hour (1
// drop over 25 ticks of 90 s of instances: 1.6), so it takes about ten of 40
// nodes in ten minutes: preemptions scale with the fleet. A rate's notices
// come at times drawn within the step.
func TestPreemptionsWithinTheStepAndAsAHazard(t *testing.T) {
	run := func(w *World, steps int) []time.Duration {
		for range steps {
			w.Advance()
			w.Clock.Step(time.Minute)
		}
		return noticed(w)
	}
	t.Run("drops", func(t *testing.T) {
		got := run(marketScenario(t, "{trace: drop.json}"), 10)
		if len(got) != 1 || got[0] != 90*time.Second {
			t.Errorf("notices at %v, want one at the trace's drop, 1m30s", got)
		}
	})
	withinSteps := func(t *testing.T, got []time.Duration, lo, hi int) {
		t.Helper()
		within := 0
		for _, at := range got {
			if at%time.Second != 0 {
				within++
			}
		}
		if len(got) < lo || len(got) > hi || within == 0 {
			t.Errorf("notices at %v: want %d to %d, at times within the steps", got, lo, hi)
		}
	}
	t.Run("hazard", func(t *testing.T) {
		w := marketScenario(t, "{trace: drop.json, hazard: true}")
		if r := w.zones[0].PreRate; r < 1.5999 || r > 1.6001 {
			t.Fatalf("hazard %.4f per node-hour, want 1.6", r)
		}
		withinSteps(t, run(w, 10), 4, 20)
	})
	t.Run("rate", func(t *testing.T) {
		withinSteps(t, run(marketScenario(t, "{ratePerNodeHour: 1}"), 10), 1, 20)
	})
}
