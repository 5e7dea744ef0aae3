package world

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"spotter.dev/spotter/internal/sim/report"
	"spotter.dev/spotter/internal/sim/scenario"
	"spotter.dev/spotter/internal/sim/simtest"
)

// A spot group that never gets capacity is backed off (internal/backoff's
// Cooldown) for ever longer, and the rest always ends in the future: with a
// 24h first rest and no cap, a doubling shifted past 17 failures would
// overflow and end it in the past.
// scheduledOnce builds the world of sc (seed 1) with its scheduler and
// autoscaler, and runs the scheduler once at the start.
func scheduledOnce(t *testing.T, sc *scenario.Scenario) (*World, *Scheduler, *Autoscaler) {
	t.Helper()
	w, err := New(sc, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	e := mustEngine(t, w)
	sched, as := mustScheduler(t, w), &Autoscaler{w: w, e: e}
	w.Advance()
	if err := sched.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	return w, sched, as
}

func TestAutoscalerBackoffNeverEndsInThePast(t *testing.T) {
	body := strings.Replace(simtest.Tiny, "{name: b, spotCapacity: {nodes: 3}}", "{name: b, spotCapacity: {nodes: 0}}", 1)
	body = strings.Replace(body, "pricePerHour: 0.1, initial: 1}", "pricePerHour: 0.1, initial: 0, max: 0}", 1)
	sc, err := simtest.Parse(t, body)
	if err != nil {
		t.Fatal(err)
	}
	// Beyond what a scenario file allows (24h at most): built in Go.
	sc.Cluster.ScaleUpBackoff.Duration, sc.Cluster.MaxScaleUpBackoff.Duration = 24*time.Hour, 0
	w, sched, as := scheduledOnce(t, sc)
	ctx := context.Background()
	if len(sched.Unschedulable) == 0 {
		t.Fatal("no pod waits for a node")
	}
	var spot *Group
	for _, g := range w.Groups {
		if g.Spot {
			spot = g
		}
	}
	rest := time.Duration(0)
	for failures := 1; failures <= 40; failures++ {
		if err := as.scaleUp(ctx, sched.Unschedulable); err != nil {
			t.Fatal(err)
		}
		now := w.Now()
		if spot.backoff.Failures != failures || !spot.backoff.Until.After(now) {
			t.Fatalf("after %d failed launches: %d failures recorded, rest until %s (now %s)", failures, spot.backoff.Failures, spot.backoff.Until, now)
		}
		if d := spot.backoff.Until.Sub(now); d < rest {
			t.Fatalf("failure %d: rest %s, shorter than the one before (%s)", failures, d, rest)
		} else {
			rest = d
		}
		w.Clock.SetTime(spot.backoff.Until)
	}
}

// The autoscaler removes an under-used node whose pods fit elsewhere, as the
// cluster autoscaler does: after ScaleDownUnneededTime below half its CPU
// and memory, it taints the node ToBeDeletedByClusterAutoscaler, evicts its
// pods (not counted as the strategy's) and deletes it once empty. A node
// whose pods a PodDisruptionBudget holds stays.
func TestScaleDownOfUnderusedNodes(t *testing.T) {
	for _, guarded := range []bool{false, true} {
		small := simtest.App("small", 1, "500m", "od-0001")
		if guarded {
			small.PDB = &scenario.PDBSpec{MinAvailable: ptr.To[int32](1)}
		}
		// spot-0002 is used enough to stay; the other spot nodes, empty, go.
		w := constructedWorld(t, small, simtest.App("busy", 1, "2500m", "spot-0002"))
		ctx := context.Background()
		e := mustEngine(t, w)
		sched, as := mustScheduler(t, w), &Autoscaler{w: w, e: e}
		od := w.NodeByName("od-0001")
		tainted := false
		for range 20 {
			w.Advance()
			if err := sched.Run(ctx); err != nil {
				t.Fatal(err)
			}
			if err := as.Run(ctx, sched.Unschedulable); err != nil {
				t.Fatal(err)
			}
			for _, taint := range od.Obj.Spec.Taints {
				tainted = tainted || taint.Key == toBeDeletedTaint
			}
			w.Clock.Step(time.Minute)
		}
		gone := w.NodeByName("od-0001") == nil
		pod := w.Apps[0].pods[0]
		switch {
		case !guarded && (!gone || !tainted || pod.Node == nil || !pod.Node.Spot()):
			t.Errorf("under-used node: gone %v, tainted %v, pod on %v; want it tainted, gone, the pod on spot", gone, tainted, pod.Node)
		case !guarded && (w.m.evictBy[report.ComponentAutoscaler] != 1 || w.m.evict != 0):
			t.Errorf("%d evictions by the autoscaler, %d voluntary; want 1 and 0", w.m.evictBy[report.ComponentAutoscaler], w.m.evict)
		case guarded && (gone || tainted):
			t.Errorf("a node whose only pod its budget holds was removed (gone %v, tainted %v)", gone, tainted)
		}
	}
}

// A client's write of a node the autoscaler is removing does not make the
// autoscaler's taint the client's: when the autoscaler gives the node up,
// the taint goes.
func TestAutoscalerTaintStaysTheAutoscalers(t *testing.T) {
	w := constructedWorld(t)
	n := w.NodeByName("od-0001")
	n.toBeDeleted = w.Now()
	w.refresh(n)
	NewAPI(w).writeNode(n, n.Obj.DeepCopy())
	n.toBeDeleted = time.Time{}
	w.refresh(n)
	for _, taint := range n.Obj.Spec.Taints {
		if taint.Key == toBeDeletedTaint {
			t.Errorf("the node keeps %s after the autoscaler gave it up", toBeDeletedTaint)
		}
	}
}

// A scale-up the cloud refused starts no scale-down delay, and nodes
// preempted while provisioning are no longer counted as on their way: the
// pods that waited for them get new ones.
func TestScaleUpAfterRefusalsAndPreemptions(t *testing.T) {
	body := strings.Replace(simtest.Tiny, "replicas: 3,", "replicas: 12,", 1)
	refused := strings.Replace(strings.Replace(body, "{nodes: 3}", "{nodes: 0}", 1), "pricePerHour: 0.1, initial: 1}", "pricePerHour: 0.1, initial: 1, max: 1}", 1)
	ctx := context.Background()
	sc, err := simtest.Parse(t, refused)
	if err != nil {
		t.Fatal(err)
	}
	_, sched, as := scheduledOnce(t, sc)
	if len(sched.Unschedulable) == 0 {
		t.Fatal("no pod waits for a node")
	}
	if err := as.scaleUp(ctx, sched.Unschedulable); err != nil {
		t.Fatal(err)
	}
	if !as.lastScaleUp.IsZero() {
		t.Errorf("a refused scale-up started the scale-down delay at %s", as.lastScaleUp)
	}

	if sc, err = simtest.Parse(t, body); err != nil {
		t.Fatal(err)
	}
	w, sched, as := scheduledOnce(t, sc)
	onTheirWay := func() (fresh, noticed int) {
		for _, n := range w.nodes {
			if n.state == provisioning {
				if n.Noticed() {
					noticed++
				} else {
					fresh++
				}
			}
		}
		return fresh, noticed
	}
	if err := as.scaleUp(ctx, sched.Unschedulable); err != nil {
		t.Fatal(err)
	}
	launched, _ := onTheirWay()
	if launched == 0 || as.lastScaleUp.IsZero() {
		t.Fatalf("%d nodes launched, scale-down delay from %s: want a scale-up", launched, as.lastScaleUp)
	}
	for _, n := range slices.Clone(w.nodes) {
		if n.state == provisioning {
			w.notice(n, n.Group.zone)
		}
	}
	if err := as.scaleUp(ctx, sched.Unschedulable); err != nil {
		t.Fatal(err)
	}
	if fresh, noticed := onTheirWay(); fresh == 0 || noticed != launched {
		t.Errorf("after the %d provisioning nodes were preempted: %d new nodes on their way; want the pods to get new ones", noticed, fresh)
	}
}
