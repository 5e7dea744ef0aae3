package world

import (
	"testing"

	"spotter.dev/spotter/internal/plan"
	"spotter.dev/spotter/internal/sim/simtest"
	"spotter.dev/spotter/internal/snapshot"
)

// The world's tests cannot import worldtest (it imports the world): these
// are its helpers, on the same exported constructors.

func constructedWorld(t testing.TB, apps ...simtest.PlacedApp) *World {
	t.Helper()
	nodes := make([]string, len(apps))
	for i, a := range apps {
		nodes[i] = a.Node
	}
	w, err := NewPopulated(simtest.ConstructedScenario(t, apps...), nodes)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func mustScheduler(t testing.TB, w *World) *Scheduler {
	t.Helper()
	s, err := NewScheduler(t.Context(), w)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustEngine(t testing.TB, w *World) *plan.Engine {
	t.Helper()
	e, err := plan.NewEngine(t.Context(), &snapshot.Snapshot{Namespaces: w.nsObjs})
	if err != nil {
		t.Fatal(err)
	}
	return e
}
