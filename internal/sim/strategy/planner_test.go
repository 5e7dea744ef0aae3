package strategy

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"spotter.dev/spotter/internal/plan"
	"spotter.dev/spotter/internal/sim/simtest"
	"spotter.dev/spotter/internal/sim/worldtest"
)

// The world's scheduler is the kube-scheduler's default profile, not the
// planner's model of it. On this constructed case they disagree: the pod to
// move fits two spot nodes, one nearly full and balanced, the other nearly
// empty of CPU but short of memory. The planner sends it to the full one (best
// fit), and plan.ScorePick, the planner's reckoning of the scheduler's scores,
// agrees; the kube-scheduler weighs balanced allocation half as much (the
// standard deviation of the two shares, not their difference) and binds the
// pod to the other. Spotter's drain of the on-demand node then meets the
// world as it is: the pod's replacement lands where the kube-scheduler put it,
// the drain ends, and the on-demand node is left empty.
func TestWorldSchedulerIsNotThePlanner(t *testing.T) {
	mem := func(a simtest.PlacedApp, m string) simtest.PlacedApp { a.Memory = resource.MustParse(m); return a }
	w := worldtest.ConstructedWorld(t,
		mem(simtest.App("memory-heavy", 1, "100m", "spot-0002"), "12Gi"), // CPU 15 %, memory 77 % with the pod
		mem(simtest.App("balanced", 1, "3100m", "spot-0003"), "14200Mi"), // 90 % of both with the pod
		simtest.App("full", 1, "4", "spot-0004"),                         // no room
		simtest.App("mover", 1, "500m", "od-0001"),                       // 256Mi
	)
	ctx := context.Background()
	mover := w.Apps[3].Pods()[0]

	planner := plan.New(plan.Options{})
	p, err := planner.Plan(ctx, w.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	predicted := ""
	for _, n := range p.Nodes {
		for _, pp := range n.Pods {
			if pp.Name == mover.Obj.Name {
				predicted = pp.Destination
			}
		}
	}
	if predicted != "spot-0003" {
		t.Fatalf("the planner sends the pod to %q; the case wants spot-0003 (best fit)", predicted)
	}
	var feasible []fwk.NodeInfo
	for _, name := range []string{"spot-0002", "spot-0003"} {
		n := w.NodeByName(name)
		ni := framework.NewNodeInfo()
		ni.SetNode(n.Obj)
		for _, pod := range n.Pods() {
			ni.AddPod(pod.Obj)
		}
		feasible = append(feasible, ni)
	}
	if got := feasible[plan.ScorePick(mover.Unbound(), feasible)].Node().Name; got != "spot-0003" {
		t.Fatalf("plan.ScorePick picks %s; the case wants spot-0003", got)
	}

	// Spotter's rescheduler drains the on-demand node; the world binds the
	// replacement.
	e := worldtest.MustEngine(t, w)
	s, err := New(Spotter, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Setup(w, e); err != nil {
		t.Fatal(err)
	}
	defer s.(interface{ Stop() }).Stop()
	sched, as := worldtest.MustScheduler(t, w), worldtest.MustAutoscaler(t, w)
	for range 15 {
		w.Advance()
		for _, step := range []func(context.Context) error{
			func(ctx context.Context) error { return s.Step(ctx, w) }, sched.Run,
			func(ctx context.Context) error { return as.Run(ctx, sched.Unschedulable) },
		} {
			if err := step(ctx); err != nil {
				t.Fatal(err)
			}
		}
		w.Clock.Step(time.Minute)
	}
	app := w.Apps[3]
	if len(app.Pods()) != 1 || app.Pods()[0] == mover || app.Pods()[0].Node == nil {
		t.Fatalf("the pod was not moved: %d pods, first on %v", len(app.Pods()), app.Pods()[0].Node)
	}
	if got := app.Pods()[0].Node.Name; got != "spot-0002" {
		t.Errorf("the replacement runs on %s; the kube-scheduler's default profile puts it on spot-0002", got)
	}
	if od := w.NodeByName("od-0001"); od != nil && len(od.Pods()) > 0 {
		t.Errorf("the drained on-demand node still holds %d pods", len(od.Pods()))
	}
	if r := w.Result(Spotter, 1); r.Evictions != 1 || r.WastedEvictions != 0 || r.LostPodMinutes != 0 {
		t.Errorf("%d voluntary evictions, %d wasted, %.0f lost pod-minutes; want 1, 0 and 0", r.Evictions, r.WastedEvictions, r.LostPodMinutes)
	}
}
