package gencluster

import (
	"flag"
	"fmt"
)

// Options select the cluster. Equal Options give equal output.
type Options struct {
	// Nodes is the number of nodes, at least 1.
	Nodes int
	// PodsPerNode is the target mean of pods per node: at most
	// Nodes × PodsPerNode pods are placed. In [0, 110].
	PodsPerNode int
	// OnDemandFrac is the fraction of nodes that are on-demand; the rest are
	// spot. In [0, 1].
	OnDemandFrac float64
	// SpotOnlyFrac is the fraction of on-demand nodes that receive only pods
	// tolerating the spot taint. In [0, 1].
	SpotOnlyFrac float64
	// SpotFill is the mean utilisation spot nodes are filled to, each node
	// within ± 0.05. Raising it makes spot capacity, not only tolerations,
	// decide what can move.
	SpotFill float64
	// Seed seeds the random source.
	Seed uint64
}

// DefaultOptions returns the defaults of the command's flags: 1,000 nodes,
// 30 pods per node, 60% on-demand, 35% of those spot-only, spot nodes half
// full, seed 1.
func DefaultOptions() Options {
	return Options{Nodes: 1000, PodsPerNode: 30, OnDemandFrac: 0.6, SpotOnlyFrac: 0.35, SpotFill: 0.5, Seed: 1}
}

// BindFlags defines the flags -nodes, -pods-per-node, -ondemand-frac,
// -spot-only-frac, -spot-fill and -seed on fs, each defaulting to the value
// o holds and parsed into o.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.IntVar(&o.Nodes, "nodes", o.Nodes, "how many nodes the cluster has")
	fs.IntVar(&o.PodsPerNode, "pods-per-node", o.PodsPerNode, "mean pods per node aimed at; at most nodes × pods-per-node pods are placed")
	fs.Float64Var(&o.OnDemandFrac, "ondemand-frac", o.OnDemandFrac, "share of the nodes that are on-demand; the others are spot")
	fs.Float64Var(&o.SpotOnlyFrac, "spot-only-frac", o.SpotOnlyFrac, "share of the on-demand nodes that get only pods tolerating the spot taint")
	fs.Float64Var(&o.SpotFill, "spot-fill", o.SpotFill, "utilisation spot nodes are filled to, each within ± 0.05; raise it to make spot capacity, not only tolerations, limit what can move")
	fs.Uint64Var(&o.Seed, "seed", o.Seed, "seed of the random source; the same flags always give the same bytes")
}

// Validate reports the first option out of its range, named as its flag.
func (o Options) Validate() error {
	switch {
	case o.Nodes < 1:
		return fmt.Errorf("-nodes must be at least 1, got %d", o.Nodes)
	case o.PodsPerNode < 0 || o.PodsPerNode > nodeMaxPods:
		return fmt.Errorf("-pods-per-node must be in [0,%d], got %d", nodeMaxPods, o.PodsPerNode)
	case o.OnDemandFrac < 0 || o.OnDemandFrac > 1:
		return fmt.Errorf("-ondemand-frac must be in [0,1], got %g", o.OnDemandFrac)
	case o.SpotOnlyFrac < 0 || o.SpotOnlyFrac > 1:
		return fmt.Errorf("-spot-only-frac must be in [0,1], got %g", o.SpotOnlyFrac)
	case !(o.SpotFill > spotFillSpread && o.SpotFill <= 1-spotFillSpread):
		// Each spot node aims at SpotFill ± spotFillSpread: every target must
		// be above zero (fill divides by it) and at most the allocatable.
		return fmt.Errorf("-spot-fill must be in (%g,%g], got %g", spotFillSpread, 1-spotFillSpread, o.SpotFill)
	}
	return nil
}
