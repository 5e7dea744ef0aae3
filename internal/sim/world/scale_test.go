package world

import (
	"context"
	"testing"

	"spotter.dev/spotter/internal/sim/simtest"
)

// The autoscaler's templates grow until one is left empty: pods that take a
// node each (2.1 CPUs on 4) need more templates than their requests suggest,
// and get as many as with a template per pod.
func TestAutoscalerTemplatesGrow(t *testing.T) {
	sc := simtest.ConstructedScenario(t, simtest.App("wide", 9, "2100m", ""))
	sc.NodeGroups[0].Max = 20
	w, err := New(sc, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	var waiting []*Pod
	for k := range 9 {
		waiting = append(waiting, w.createPod(w.Apps[0], k))
	}
	ctx := context.Background()
	existing := NodeObjs(w.ReadyNodes())
	var got [2]option
	for i, exhaustive := range []bool{true, false} {
		a, err := NewAutoscaler(ctx, w, exhaustive)
		if err != nil {
			t.Fatal(err)
		}
		o, err := a.tryGroup(ctx, w.Groups[0], int(w.Groups[0].Max)-w.Groups[0].count, waiting, existing, w.boundObjs())
		if err != nil {
			t.Fatal(err)
		}
		got[i] = *o
	}
	if got[0] != got[1] || got[1].nodes != 9 || got[1].helped != 9 {
		t.Errorf("exhaustive %+v, with shortcuts %+v; want 9 nodes for 9 pods", got[0], got[1])
	}
}
