package world

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"spotter.dev/spotter/internal/classify"
	"spotter.dev/spotter/internal/controller/spotfirst"
	"spotter.dev/spotter/internal/sim/scenario"
	"spotter.dev/spotter/internal/sim/simtest"
)

// The world's API lets a client change what the real apiserver lets it
// change of a pending pod: its scheduling gates, and its node selector only
// while it is gated; any other change of its spec is refused, and a stale
// resourceVersion is a Conflict.
func TestPodUpdatesAsTheAPIAllows(t *testing.T) {
	sc := simtest.Short(t, time.Hour)
	w, err := New(sc, int64(sc.Seed), false)
	if err != nil {
		t.Fatal(err)
	}
	w.SpotFirstGate = true
	a := NewAPI(w)
	p := w.createPod(w.Apps[0], 0)
	if got := w.pending(); len(got) != 0 {
		t.Errorf("a gated pod is pending for the scheduler: %v", got)
	}
	pods := a.Kube.CoreV1().Pods(p.Obj.Namespace)
	ctx := context.Background()

	changed := p.Obj.DeepCopy()
	changed.Spec.Containers[0].Image = "other"
	if _, err := pods.Update(ctx, changed, metav1.UpdateOptions{}); err == nil {
		t.Error("an update of the containers was accepted")
	}
	stale := spotfirst.Steer(p.Obj, classify.KarpenterCapacityLabel, scenario.Spot, "now")
	stale.ResourceVersion = "0"
	if _, err := pods.Update(ctx, stale, metav1.UpdateOptions{}); err == nil {
		t.Error("an update with a stale resourceVersion was accepted")
	}
	var steered *corev1.Pod
	steered, err = pods.Update(ctx, spotfirst.Steer(p.Obj, classify.KarpenterCapacityLabel, scenario.Spot, "now"), metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("steering a gated pod: %v", err)
	}
	if spotfirst.Gated(p.Obj) || p.Obj.Spec.NodeSelector[classify.KarpenterCapacityLabel] != scenario.Spot || steered.ResourceVersion != p.Obj.ResourceVersion {
		t.Errorf("the world's pod after the update: gates %v, node selector %v", p.Obj.Spec.SchedulingGates, p.Obj.Spec.NodeSelector)
	}
	// No longer gated: its node selector is fixed.
	again := p.Obj.DeepCopy()
	again.Spec.NodeSelector = map[string]string{}
	if _, err := pods.Update(ctx, again, metav1.UpdateOptions{}); err == nil {
		t.Error("the node selector of an ungated pod was changed")
	}
	if got := w.pending(); len(got) != 1 || got[0] != p {
		t.Errorf("pending after the gate came off: %v", got)
	}
}
