package rescheduler

import (
	"maps"
	"testing"
	"time"

	"spotter.dev/spotter/internal/backoff"
	"spotter.dev/spotter/internal/classify"
	"spotter.dev/spotter/internal/disruption"
	"spotter.dev/spotter/internal/plan"
)

func TestChoose(t *testing.T) {
	move := []plan.PodPlan{{Name: "p", Action: "move"}}
	node := func(name string, drainable bool, pods []plan.PodPlan) plan.NodePlan {
		return plan.NodePlan{Name: name, Class: classify.OnDemand, Drainable: drainable, Pods: pods}
	}
	consolidated := func(name string) plan.NodePlan {
		n := node(name, true, []plan.PodPlan{{Name: "p", Action: "move", Destination: "od", OnDemand: true}})
		n.Consolidated = true
		return n
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name    string
		nodes   []plan.NodePlan
		own     string
		cooling map[string]time.Time
		// emptied are the nodes the rescheduler emptied, and when.
		emptied map[string]time.Time
		want    string
	}{
		{"first drainable in plan order", []plan.NodePlan{node("a", false, move), node("b", true, move), node("c", true, move)}, "", nil, nil, "b"},
		{"nothing to move", []plan.NodePlan{node("a", true, nil), node("b", true, move)}, "", nil, nil, "b"},
		{"own node last", []plan.NodePlan{node("self", true, move), node("b", true, move)}, "self", nil, nil, "b"},
		{"own node when alone", []plan.NodePlan{node("self", true, move), node("b", false, move)}, "self", nil, nil, "self"},
		{"cooling down", []plan.NodePlan{node("a", true, move), node("b", true, move)}, "", map[string]time.Time{"a": now.Add(time.Minute)}, nil, "b"},
		{"cooldown over", []plan.NodePlan{node("a", true, move)}, "", map[string]time.Time{"a": now.Add(-time.Second)}, nil, "a"},
		{"onto spot alone before consolidations", []plan.NodePlan{consolidated("a"), node("b", true, move)}, "", nil, nil, "b"},
		{"a consolidation when alone", []plan.NodePlan{consolidated("a"), node("b", false, move)}, "", nil, nil, "a"},
		{"spot never chosen", []plan.NodePlan{{Name: "s", Class: classify.Spot, Drainable: true, Pods: move}}, "", nil, nil, ""},
		// A node the rescheduler emptied, still there with nothing to move,
		// holds consolidations back for an hour: the scheduler would send the
		// pods there.
		{"consolidations wait for an emptied node to go", []plan.NodePlan{consolidated("a"), node("e", true, nil)}, "", nil,
			map[string]time.Time{"e": now.Add(-59 * time.Minute)}, ""},
		{"drains onto spot do not wait", []plan.NodePlan{consolidated("a"), node("b", true, move), node("e", true, nil)}, "", nil,
			map[string]time.Time{"e": now.Add(-time.Minute)}, "b"},
		{"not after an hour", []plan.NodePlan{consolidated("a"), node("e", true, nil)}, "", nil,
			map[string]time.Time{"e": now.Add(-time.Hour)}, "a"},
		{"not once the node has pods again", []plan.NodePlan{consolidated("a"), node("e", false, move)}, "", nil,
			map[string]time.Time{"e": now.Add(-time.Minute)}, "a"},
		{"not for an empty node it did not empty", []plan.NodePlan{consolidated("a"), node("e", true, nil)}, "", nil, nil, "a"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &Controller{opts: Options{OwnNode: tc.own}, failures: map[string]backoff.Cooldown{}, emptied: map[string]time.Time{},
				budget: disruption.NewWithWindows(1)}
			maps.Copy(c.emptied, tc.emptied)
			for n, until := range tc.cooling {
				c.failures[n] = backoff.Cooldown{Failures: 1, Until: until}
			}
			got := c.choose(&plan.Plan{Nodes: tc.nodes}, now)
			name := ""
			if got != nil {
				name = got.Name
			}
			if name != tc.want {
				t.Errorf("chose %q, want %q", name, tc.want)
			}
		})
	}
}

// A node that a consolidation (of this controller or the migrator) sent pods
// to is not consolidated itself for disruption.ConsolidationHold; emptying it
// onto spot alone is still allowed.
func TestChooseHoldsConsolidationsOfReceivers(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	onto := func(name, dest string, onDemand bool) plan.NodePlan {
		return plan.NodePlan{Name: name, Class: classify.OnDemand, Drainable: true,
			Pods: []plan.PodPlan{{Name: "p", Action: "move", Destination: dest, OnDemand: onDemand}}}
	}
	budget := disruption.NewWithWindows(1)
	budget.Received("od-1", now.Add(-time.Minute))
	c := &Controller{failures: map[string]backoff.Cooldown{}, emptied: map[string]time.Time{}, budget: budget}
	if got := c.choose(&plan.Plan{Nodes: []plan.NodePlan{onto("od-1", "od-2", true)}}, now); got != nil {
		t.Errorf("consolidated %s, which just received pods", got.Name)
	}
	if got := c.choose(&plan.Plan{Nodes: []plan.NodePlan{onto("od-1", "spot-1", false)}}, now); got == nil {
		t.Error("a receiver whose pods all fit on spot was not drained")
	}
	if got := c.choose(&plan.Plan{Nodes: []plan.NodePlan{onto("od-1", "od-2", true)}}, now.Add(disruption.ConsolidationHold)); got == nil {
		t.Error("still held once the hold ended")
	}
}
