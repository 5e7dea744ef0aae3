// Package worldtest builds simulated worlds for the tests of what runs in
// them: the strategies, the hindsight rows and the simulation.
package worldtest

import (
	"testing"

	"spotter.dev/spotter/internal/plan"
	"spotter.dev/spotter/internal/sim/simtest"
	"spotter.dev/spotter/internal/sim/world"
	"spotter.dev/spotter/internal/snapshot"
)

// ConstructedWorld is the world of simtest.ConstructedScenario with the
// workloads' pods bound where they say, Ready: a minute has passed.
func ConstructedWorld(t testing.TB, apps ...simtest.PlacedApp) *world.World {
	t.Helper()
	nodes := make([]string, len(apps))
	for i, a := range apps {
		nodes[i] = a.Node
	}
	w, err := world.NewPopulated(simtest.ConstructedScenario(t, apps...), nodes)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// MustScheduler builds the world's scheduler.
func MustScheduler(t testing.TB, w *world.World) *world.Scheduler {
	t.Helper()
	s, err := world.NewScheduler(t.Context(), w)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// MustEngine is a fit engine of the world's namespaces.
func MustEngine(t testing.TB, w *world.World) *plan.Engine {
	t.Helper()
	e, err := plan.NewEngine(t.Context(), &snapshot.Snapshot{Namespaces: w.Namespaces()})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// MustAutoscaler builds the world's autoscaler.
func MustAutoscaler(t testing.TB, w *world.World) *world.Autoscaler {
	t.Helper()
	a, err := world.NewAutoscaler(t.Context(), w, false)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
