package world

import (
	"context"
	"testing"
	"time"

	"spotter.dev/spotter/internal/sim/simtest"
)

// A pod the scheduler rejected is tried again as soon as something happened
// that may let it fit (here a bound pod went, freeing room), not only after
// the queue's 5 minutes.
func TestRejectedPodTriedOnNews(t *testing.T) {
	w := constructedWorld(t,
		simtest.App("od-filler", 1, "2", "od-0001"),
		simtest.App("filler-a", 1, "2", "spot-0002"),
		simtest.App("filler-b", 1, "2", "spot-0003"),
		simtest.App("filler-c", 1, "2", "spot-0004"),
		simtest.App("big", 1, "3", ""),
	)
	ctx := context.Background()
	sched := mustScheduler(t, w)
	if err := sched.Run(ctx); err != nil {
		t.Fatal(err)
	}
	big := w.Apps[4].pods[0]
	if big.Node != nil || len(sched.Unschedulable) != 1 {
		t.Fatalf("the 3-CPU pod was placed on %v with 2 CPUs free at most", big.Node)
	}
	w.Clock.Step(time.Minute)
	w.removePod(w.Apps[1].pods[0]) // spot-0002 empties
	if err := sched.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if big.Node == nil || big.Node.Name != "spot-0002" {
		t.Errorf("a minute after room was freed on spot-0002, the pod is on %v", big.Node)
	}
}
