package strategy

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"spotter.dev/spotter/internal/sim/simtest"
	"spotter.dev/spotter/internal/sim/world"
	"spotter.dev/spotter/internal/sim/worldtest"
)

// staleBudgets counts the PodDisruptionBudgets whose status in the world's
// snapshot differs from what the disruption controller would compute now.
func staleBudgets(w *world.World) int {
	byName := map[string]int{}
	for i, pdb := range w.Snapshot().PDBs {
		byName[pdb.Namespace+"/"+pdb.Name] = i
	}
	stale := 0
	for _, a := range w.Apps {
		if a.PDB == nil {
			continue
		}
		healthy, desired := w.PDBHealth(a)
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
	sc := simtest.Short(t, 24*time.Hour)
	sc.Cluster.PodStartup.Duration = 3 * time.Minute
	w, err := world.New(sc, int64(sc.Seed), false)
	if err != nil {
		t.Fatal(err)
	}
	e := worldtest.MustEngine(t, w)
	strategyImpl, err := New(Spotter, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := strategyImpl.Setup(w, e); err != nil {
		t.Fatal(err)
	}
	sched, as := worldtest.MustScheduler(t, w), worldtest.MustAutoscaler(t, w)
	ctx := context.Background()
	staleSteps, notReadyObjs := 0, 0
	steps := int(sc.Duration.Duration / sc.Step.Duration)
	for range steps {
		w.Advance()
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
		if err := strategyImpl.Step(ctx, w); err != nil {
			t.Fatal(err)
		}
		if err := sched.Run(ctx); err != nil {
			t.Fatal(err)
		}
		if err := as.Run(ctx, sched.Unschedulable); err != nil {
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
