package sim

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"spotter.dev/spotter/internal/agent/interrupt"
	"spotter.dev/spotter/internal/drain"
	"spotter.dev/spotter/internal/sim/report"
	"spotter.dev/spotter/internal/sim/scenario"
)

// staleBudgets counts the PodDisruptionBudgets whose status in the world's
// snapshot differs from what the disruption controller would compute now.
func staleBudgets(w *World) int {
	byName := map[string]int{}
	for i, pdb := range w.Snapshot().PDBs {
		byName[pdb.Namespace+"/"+pdb.Name] = i
	}
	stale := 0
	for _, a := range w.Apps {
		if a.PDB == nil {
			continue
		}
		healthy, desired := w.pdbHealth(a)
		st := w.Snapshot().PDBs[byName[a.Namespace+"/"+a.Name]].Status
		if int(st.CurrentHealthy) != healthy || int(st.DesiredHealthy) != desired || int(st.DisruptionsAllowed) != max(healthy-desired, 0) {
			stale++
		}
	}
	return stale
}

// The snapshot the planner reads is the world as it is: a pod that becomes
// Ready (podStartup after its binding, with no other event) refreshes it, so
// the budgets' status and the pods' Ready condition are never stale.
func TestSnapshotFollowsPodReadiness(t *testing.T) {
	sc := short(t, 24*time.Hour)
	sc.Cluster.PodStartup.Duration = 3 * time.Minute
	w, err := newWorld(sc, int64(sc.Seed), false)
	if err != nil {
		t.Fatal(err)
	}
	e := mustEngine(t, w)
	strategyImpl, err := newStrategy(StrategySpotter, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := strategyImpl.setup(w, e); err != nil {
		t.Fatal(err)
	}
	sched, as := mustScheduler(t, w), &autoscaler{w: w, e: e}
	ctx := context.Background()
	staleSteps, notReadyObjs := 0, 0
	steps := int(sc.Duration.Duration / sc.Step.Duration)
	for range steps {
		w.advance()
		// What the strategy reads now.
		if staleBudgets(w) > 0 {
			staleSteps++
		}
		for _, p := range w.Snapshot().Pods {
			if wp := w.PodByName(p.Namespace, p.Name); wp != nil && wp.Healthy(w.Now()) != podReady(p) && !wp.Terminating {
				notReadyObjs++
				break
			}
		}
		if err := strategyImpl.step(ctx, w); err != nil {
			t.Fatal(err)
		}
		if err := sched.run(ctx); err != nil {
			t.Fatal(err)
		}
		if err := as.run(ctx, sched.unschedulable); err != nil {
			t.Fatal(err)
		}
		w.Clock.Step(sc.Step.Duration)
	}
	if staleSteps > 0 {
		t.Errorf("PodDisruptionBudget status stale in the snapshot in %d of %d steps", staleSteps, steps)
	}
	if notReadyObjs > 0 {
		t.Errorf("a pod's Ready condition in the snapshot differs from the world in %d of %d steps", notReadyObjs, steps)
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// The simulated nodes carry the taints the product puts: the agent's on a
// notice (interrupt.TaintKey, the notice's kind, NoSchedule), the drain
// engine's while draining (drain.DrainingTaintKey, the component).
func TestTaintsAreTheProducts(t *testing.T) {
	w, err := newWorld(scenario.DefaultScenario(), 1, false)
	if err != nil {
		t.Fatal(err)
	}
	n := w.Nodes()[0]
	w.TaintNotice(n)
	w.SetDraining(n, report.ComponentAgent)
	want := []corev1.Taint{
		{Key: drain.DrainingTaintKey, Value: report.ComponentAgent, Effect: corev1.TaintEffectNoSchedule},
		{Key: interrupt.TaintKey, Value: "termination", Effect: corev1.TaintEffectNoSchedule},
	}
	for _, taint := range want {
		found := false
		for _, got := range n.Obj.Spec.Taints {
			found = found || got == taint
		}
		if !found {
			t.Errorf("node %s lacks the taint %v: %v", n.Name, taint, n.Obj.Spec.Taints)
		}
	}
	if !n.Obj.Spec.Unschedulable {
		t.Errorf("a noticed node is cordoned, as the agent does")
	}
}

// A preempted node terminates when its notice ends, on the clock: a 30 s
// notice lasts 30 s, not until the next step. A node still provisioning can
// be preempted too: it never registers, and no handler hears of it.
func TestNoticesEndOnTime(t *testing.T) {
	w := constructedWorld(t, app("web", 2, "500m", "spot-0002"))
	n := w.NodeByName("spot-0002")
	z := n.Group.zone
	z.Notice = 30 * time.Second
	var heard []string
	w.onNotice = func(n *Node) { heard = append(heard, n.Name) }
	w.notice(n, z)
	w.Clock.Step(29 * time.Second)
	if !alive(w, n) {
		t.Fatalf("the node ended %s before its notice did", time.Second)
	}
	w.Clock.Step(time.Second)
	if alive(w, n) {
		t.Errorf("the node outlived its 30 s notice")
	}
	fresh, err := w.Launch(n.Group)
	if err != nil {
		t.Fatal(err)
	}
	w.notice(fresh, z)
	w.Clock.Step(time.Hour)
	w.advance()
	if alive(w, fresh) || fresh.Ready() {
		t.Errorf("the node preempted while provisioning is %v", fresh.state)
	}
	if len(heard) != 1 || heard[0] != "spot-0002" {
		t.Errorf("handlers heard of %v; want spot-0002 only", heard)
	}
}
