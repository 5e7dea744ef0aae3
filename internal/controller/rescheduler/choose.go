package rescheduler

import (
	"spotter.dev/spotter/internal/classify"
	"spotter.dev/spotter/internal/plan"
)

// Choose picks the drainable node to empty from a plan: the first of Order, or
// nil when no node qualifies. coolingDown may be nil.
//
// It is a pure function of its arguments, so that the controller and the
// simulator (`spotter simulate`) make the same choice.
func Choose(p *plan.Plan, coolingDown func(node string) bool, ownNode string, holdConsolidations bool) *plan.NodePlan {
	if order := Order(p, coolingDown, ownNode, holdConsolidations); len(order) > 0 {
		return order[0]
	}
	return nil
}

// Order lists the nodes of a plan the rescheduler would drain, in the order
// it would drain them: plan order (emptiest first; the plan already counts
// the spot capacity each earlier node's pods take) of the nodes that are
// drainable, on-demand, have pods to move (a node with nothing to move needs
// no drain: the autoscaler removes it) and are not cooling down, those that
// drain onto spot alone before consolidations (as the plan planned them);
// ownNode, the node Spotter runs on, last; consolidations not at all with
// holdConsolidations. coolingDown may be nil.
func Order(p *plan.Plan, coolingDown func(node string) bool, ownNode string, holdConsolidations bool) []*plan.NodePlan {
	var order, consolidations []*plan.NodePlan
	var own *plan.NodePlan
	for i := range p.Nodes {
		n := &p.Nodes[i]
		if !n.Drainable || n.Class != classify.OnDemand || n.Evictions() == 0 {
			continue
		}
		if coolingDown != nil && coolingDown(n.Name) {
			continue
		}
		switch {
		case n.Name == ownNode:
			own = n
		case n.Consolidated:
			if !holdConsolidations {
				consolidations = append(consolidations, n)
			}
		default:
			order = append(order, n)
		}
	}
	order = append(order, consolidations...)
	if own != nil {
		order = append(order, own)
	}
	return order
}
