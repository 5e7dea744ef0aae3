package gencluster

import "fmt"

// Stats counts what a generated cluster holds.
type Stats struct {
	Seed          uint64
	Nodes         int
	OnDemandNodes int
	// SpotOnlyNodes are the on-demand nodes that hold only pods tolerating
	// the spot taint.
	SpotOnlyNodes int
	SpotNodes     int

	Workloads             int
	SpotTolerating        int // workloads
	AntiAffinityWorkloads int
	ZoneSpreadWorkloads   int

	Pods int
	PDBs int

	// Utilisation, max(CPU, memory) requests over allocatable, by capacity
	// type; the zero Range when there are no such nodes.
	OnDemandUtilisation Range
	SpotUtilisation     Range
}

// Range is the minimum, mean and maximum of some values.
type Range struct {
	Min, Mean, Max float64
	N              int
	sum            float64
}

func (r *Range) add(v float64) {
	if r.N == 0 {
		r.Min, r.Max = v, v
	}
	r.Min, r.Max = min(r.Min, v), max(r.Max, v)
	r.N++
	r.sum += v
	r.Mean = r.sum / float64(r.N)
}

// String prints the range in percent, min/mean/max, or "-" if it is empty.
func (r Range) String() string {
	if r.N == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f/%.0f/%.0f%%", 100*r.Min, 100*r.Mean, 100*r.Max)
}

// Stats counts the cluster's nodes, workloads, pods and budgets.
func (c *Cluster) Stats() Stats {
	s := Stats{Seed: c.opts.Seed, Nodes: len(c.nodes), Workloads: len(c.workloads)}
	for i := range c.nodes {
		n := &c.nodes[i]
		s.Pods += n.pods
		if n.spot {
			s.SpotNodes++
			s.SpotUtilisation.add(n.utilisation())
			continue
		}
		s.OnDemandNodes++
		s.OnDemandUtilisation.add(n.utilisation())
		if n.spotOnly {
			s.SpotOnlyNodes++
		}
	}
	for i := range c.workloads {
		w := &c.workloads[i]
		s.SpotTolerating += count(w.tolerates)
		s.AntiAffinityWorkloads += count(w.antiAffinity)
		s.ZoneSpreadWorkloads += count(w.zoneSpread)
		s.PDBs += count(w.hasPDB)
	}
	return s
}

func count(b bool) int {
	if b {
		return 1
	}
	return 0
}

// String is the one-line summary the command prints on stderr.
func (s Stats) String() string {
	return fmt.Sprintf("gencluster seed=%d: nodes=%d (on-demand=%d spot-only-on-demand=%d spot=%d)"+
		" workloads=%d (spot-tolerating=%d anti-affinity=%d zone-spread=%d) pods=%d (%.1f/node) pdbs=%d"+
		" util min/mean/max on-demand=%s spot=%s",
		s.Seed, s.Nodes, s.OnDemandNodes, s.SpotOnlyNodes, s.SpotNodes,
		s.Workloads, s.SpotTolerating, s.AntiAffinityWorkloads, s.ZoneSpreadWorkloads,
		s.Pods, float64(s.Pods)/float64(s.Nodes), s.PDBs, s.OnDemandUtilisation, s.SpotUtilisation)
}
