package sim

import (
	"context"
	"testing"
	"time"

	"spotter.dev/spotter/internal/classify"
	"spotter.dev/spotter/internal/controller/spotfirst"
	"spotter.dev/spotter/internal/sim/scenario"
	"spotter.dev/spotter/internal/sim/simtest"
	"spotter.dev/spotter/internal/sim/strategy"
	"spotter.dev/spotter/internal/sim/world"
)

// With spotFirst, the world gates every new pod as the chart's admission
// policy does, and the product's spot-first controller admits them through
// the world's API: pods that can run on spot wait for it (the autoscaler adds
// spot nodes for them) and never land on on-demand nodes while steered; the
// others go at once. Without it, no pod is gated.
func TestSpotFirstInTheWorld(t *testing.T) {
	sc := simtest.Short(t, 24*time.Hour)
	for _, enabled := range []bool{false, true} {
		cfg := config(t, "migrator: {enabled: true}\n")
		cfg.SpotFirst.Enabled = &enabled
		var w *world.World
		if _, err := Run(context.Background(), sc, Options{Strategies: []string{strategy.Spotter}, Config: cfg,
			tap: func(world *world.World, _ *world.API) { w = world }}); err != nil {
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
