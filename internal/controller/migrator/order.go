package migrator

import (
	"cmp"
	"slices"
	"time"

	"spotter.dev/spotter/internal/cloud"
)

// weighed is a spot node group as the migrator weighs it before growing it.
type weighed struct {
	group  cloud.NodeGroup
	market Market
	// price per hour, when known
	price float64
	known bool
	// stats of the group's market over the interruption window
	stats MarketStats
	// expected is the price with the cost of the observed interruptions:
	// price × (1 + rate × interruptionCost in hours).
	expected float64
	// over is set when the market holds more than the allowed share of the
	// cluster's spot nodes.
	over bool
}

// Weigh is how the migrator ranks spot node groups: by risk and spread,
// not only by price.
type Weigh struct {
	// InterruptionCost: each observed interruption counts as this much of a
	// node's running time; 0 ranks by price alone.
	InterruptionCost time.Duration
	// MaxShare, between 0 and 1, is the share of the cluster's spot nodes a
	// market may hold before its groups go after the others; 1 or more turns
	// the cap off.
	MaxShare float64
}

// expectedPrice is price × (1 + rate × cost): the price per hour of a node
// whose interruptions, at rate per node-hour, each cost cost of its running
// time.
func expectedPrice(price, rate float64, cost time.Duration) float64 {
	return price * (1 + rate*cost.Hours())
}

// order sorts groups in the order the migrator tries them:
//
//  1. groups whose market holds at most the allowed share of the cluster's
//     spot nodes (total spot nodes alive and not interrupted) before the
//     others, so that spot capacity spreads over instance types and zones;
//  2. groups of known price before those of unknown price;
//  3. lowest expected price first (price × (1 + observed interruptions per
//     node-hour × the interruption cost in hours));
//  4. fewest spot nodes in the market first (of groups equal so far);
//  5. lowest observed interruption rate first (for unknown prices);
//  6. the provider's order.
func (w Weigh) order(gs []weighed, total int) {
	for i := range gs {
		g := &gs[i]
		g.expected = expectedPrice(g.price, g.stats.Rate(), w.InterruptionCost)
		g.over = total > 0 && w.MaxShare < 1 && float64(g.stats.Nodes) > w.MaxShare*float64(total)
	}
	slices.SortStableFunc(gs, func(a, b weighed) int {
		if a.over != b.over {
			return boolFirst(!a.over)
		}
		if a.known != b.known {
			return boolFirst(a.known)
		}
		if a.known {
			if d := cmp.Compare(a.expected, b.expected); d != 0 {
				return d
			}
		}
		if d := cmp.Compare(a.stats.Nodes, b.stats.Nodes); d != 0 {
			return d
		}
		return cmp.Compare(a.stats.Rate(), b.stats.Rate())
	})
}

// boolFirst orders a before b when first is set, after b otherwise.
func boolFirst(first bool) int {
	if first {
		return -1
	}
	return 1
}
