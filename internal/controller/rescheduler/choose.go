package rescheduler

import (
	"spotter.dev/spotter/internal/classify"
	"spotter.dev/spotter/internal/plan"
)

// Choose picks the drainable node to empty from a plan: the first in plan order
// (emptiest first) that is on-demand, has pods to move (a node with nothing to
// move needs no drain: the autoscaler removes it) and is not cooling down;
// ownNode, the node Spotter runs on, only when nothing else qualifies. It
// returns nil when no node qualifies. coolingDown may be nil.
//
// It is a pure function of its arguments, so that the controller and the
// simulator (`spotter simulate`) make the same choice.
func Choose(p *plan.Plan, coolingDown func(node string) bool, ownNode string) *plan.NodePlan {
	var own *plan.NodePlan
	for i := range p.Nodes {
		n := &p.Nodes[i]
		if !n.Drainable || n.Class != classify.OnDemand || countMoves(n) == 0 {
			continue
		}
		if coolingDown != nil && coolingDown(n.Name) {
			continue
		}
		if n.Name == ownNode {
			own = n
			continue
		}
		return n
	}
	return own
}
