package sim

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"spotter.dev/spotter/internal/classify"
	"spotter.dev/spotter/internal/controller/spotfirst"
	"spotter.dev/spotter/internal/sim/scenario"
)

// With spotFirst, the world gates every new pod as the chart's admission
// policy does, and the product's spot-first controller admits them through
// the world's API: pods that can run on spot wait for it (the autoscaler adds
// spot nodes for them) and never land on on-demand nodes while steered; the
// others go at once. Without it, no pod is gated.
func TestSpotFirstInTheWorld(t *testing.T) {
	sc := short(t, 24*time.Hour)
	for _, enabled := range []bool{false, true} {
		cfg := config(t, "migrator: {enabled: true}\n")
		cfg.SpotFirst.Enabled = &enabled
		var w *World
		if _, err := Run(context.Background(), sc, Options{Strategies: []string{StrategySpotter}, Config: cfg,
			tap: func(world *World, _ *api) { w = world }}); err != nil {
			t.Fatal(err)
		}
		steered, steeredOnSpot, released, gated := 0, 0, 0, 0
		for _, p := range w.AllPods() {
			if spotfirst.Gated(p.Obj) {
				gated++
			}
			if p.Obj.Annotations[spotfirst.SteeredAnnotation] == "" {
				if p.Node != nil {
					released++
				}
				continue
			}
			steered++
			if p.Obj.Spec.NodeSelector[classify.KarpenterCapacityLabel] != scenario.Spot {
				t.Errorf("pod %s steered without the spot label: node selector %v", p.Obj.Name, p.Obj.Spec.NodeSelector)
			}
			if p.Node != nil && !p.Node.Spot() {
				t.Errorf("steered pod %s runs on on-demand node %s", p.Obj.Name, p.Node.Name)
			}
			if p.Node != nil {
				steeredOnSpot++
			}
		}
		switch {
		case !enabled && (steered > 0 || gated > 0):
			t.Errorf("spot-first off, yet %d pods steered and %d gated", steered, gated)
		case enabled && (steeredOnSpot == 0 || released == 0):
			t.Errorf("spot-first on: %d steered pods run on spot, %d released pods run; want both", steeredOnSpot, released)
		case enabled && gated > 0:
			t.Errorf("spot-first on: %d pods still gated at the end", gated)
		}
	}
}

// The world's API lets a client change what the real apiserver lets it
// change of a pending pod: its scheduling gates, and its node selector only
// while it is gated; any other change of its spec is refused, and a stale
// resourceVersion is a Conflict.
func TestPodUpdatesAsTheAPIAllows(t *testing.T) {
	sc := short(t, time.Hour)
	w, err := newWorld(sc, int64(sc.Seed), false)
	if err != nil {
		t.Fatal(err)
	}
	w.spotFirstGate = true
	a := newAPI(w)
	p := w.createPod(w.Apps[0], 0)
	if got := w.pending(); len(got) != 0 {
		t.Errorf("a gated pod is pending for the scheduler: %v", got)
	}
	pods := a.kube.CoreV1().Pods(p.Obj.Namespace)
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
