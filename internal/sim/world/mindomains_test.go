package world

import (
	"context"
	"strings"
	"testing"

	"spotter.dev/spotter/internal/sim/simtest"
)

// A zone with no node: without minDomains the scheduler spreads a workload
// over the zones that have nodes, and puts both pods in zone a; with
// minDomains 2 it counts zone b as empty, so the second pod waits and the
// autoscaler launches a node in zone b for it.
func TestMinDomainsBringsAZoneBack(t *testing.T) {
	for _, tc := range []struct {
		minDomains      string
		pending, launch int
	}{
		{"", 0, 0},
		{", minDomains: 2", 1, 1},
	} {
		body := strings.Replace(simtest.Tiny, "{name: web, replicas: 3, cpu: 500m, memory: 1Gi, pdb: {maxUnavailable: 1}}",
			"{name: cache, replicas: 2, cpu: 100m, memory: 128Mi, zoneSpread: true"+tc.minDomains+"}", 1)
		sc, err := simtest.Parse(t, body)
		if err != nil {
			t.Fatal(err)
		}
		w, sched, as := scheduledOnce(t, sc)
		if len(sched.Unschedulable) != tc.pending {
			t.Errorf("minDomains %q: %d pods wait, want %d", tc.minDomains, len(sched.Unschedulable), tc.pending)
		}
		for _, p := range w.AllPods() {
			if p.Node != nil && p.Node.Group.Zone != "a" {
				t.Errorf("minDomains %q: pod %s placed in zone %s", tc.minDomains, p.Obj.Name, p.Node.Group.Zone)
			}
		}
		if err := as.scaleUp(context.Background(), sched.Unschedulable); err != nil {
			t.Fatal(err)
		}
		launched := 0
		for _, n := range w.Nodes() {
			if n.Group.Zone == "b" {
				launched++
			}
		}
		if launched != tc.launch {
			t.Errorf("minDomains %q: %d nodes launched in zone b, want %d", tc.minDomains, launched, tc.launch)
		}
	}
}
