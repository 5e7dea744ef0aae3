// Package bound computes a lower bound on what any strategy pays to run a
// cluster's pods at one moment: the cheapest fractional capacity (a linear
// program) that holds them.
//
// The program relaxes every constraint a strategy meets, so that no strategy
// can pay less for the same pods:
//   - nodes are fractional, and a group's count lies between its min and max;
//   - a zone's spot groups together hold at most the spot nodes the market
//     lets them hold (the caller's limit);
//   - pods are fluid: for every set of groups that some pods may only run on
//     (the union of the eligible groups of one or more kinds of pods), the
//     CPU, memory and pod slots of those groups' nodes cover what those pods
//     request (Hall's condition, one resource at a time: necessary for a
//     placement, not sufficient);
//   - nothing is paid for provisioning, idling, migrations or spread.
//
// Where the groups cannot hold all the pods, the program holds as many as it
// can (each unit of request left out costs more than any capacity), and the
// bound is the cost of that capacity.
package bound

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/optimize/convex/lp"
)

// Group is a node group.
type Group struct {
	// Zone is the index of the group's zone in Step.Spot, or -1.
	Zone int
	Spot bool
	// CPU (millicores), Mem (bytes) and Pods are one node's allocatable.
	CPU, Mem, Pods float64
	Min, Max       float64
}

// Demand is what the pods that may run on the same groups request together.
type Demand struct {
	// Eligible holds, by group, whether these pods may run there.
	Eligible []bool
	// CPU (millicores), Mem (bytes) and Pods are summed over the pods.
	CPU, Mem, Pods float64
}

// Step is one moment.
type Step struct {
	// Price is each group's price per node-hour now.
	Price []float64
	// Spot is, by zone, the most spot nodes the zone's spot groups may hold
	// now.
	Spot   []float64
	Demand []Demand
}

// Result is a step's bound.
type Result struct {
	// PerHour is the capacity's cost per hour.
	PerHour float64
	// Nodes is the capacity, by group.
	Nodes []float64
	// Short is the share of the pods' requests the groups cannot hold (0
	// when they hold them all): the largest over CPU, memory and pods.
	Short float64
}

// maxUnions caps the kinds of pods whose every union of eligible groups is a
// constraint (2^n of them); beyond it, each kind's groups and all of them
// together are: fewer constraints, so still a lower bound, a looser one.
const maxUnions = 10

// Solve computes the bound of one step.
func Solve(groups []Group, st Step) (Result, error) {
	g := len(groups)
	if len(st.Price) != g {
		return Result{}, fmt.Errorf("%d prices for %d groups", len(st.Price), g)
	}
	for i, gr := range groups {
		if gr.Min > gr.Max || gr.Min < 0 {
			return Result{}, fmt.Errorf("group %d: min %g, max %g", i, gr.Min, gr.Max)
		}
		if gr.Zone >= len(st.Spot) {
			return Result{}, fmt.Errorf("group %d: zone %d of %d", i, gr.Zone, len(st.Spot))
		}
	}
	sets := unions(st.Demand, g)
	// Variables: each group's nodes above its min (g), then for each set and
	// resource the request left out (u), then the slack of every row.
	type row struct {
		coef []float64 // over the g + u structural variables
		rhs  float64
		ge   bool // >= (else <=)
	}
	var rows []row
	nu := 3 * len(sets)
	nv := g + nu
	for i, gr := range groups {
		c := make([]float64, nv)
		c[i] = 1
		rows = append(rows, row{coef: c, rhs: gr.Max - gr.Min})
	}
	for z := range st.Spot {
		c := make([]float64, nv)
		used, any := 0.0, false
		for i, gr := range groups {
			if gr.Spot && gr.Zone == z {
				c[i], used, any = 1, used+gr.Min, true
			}
		}
		if any {
			rows = append(rows, row{coef: c, rhs: math.Max(st.Spot[z]-used, 0)})
		}
	}
	var totals [3]float64
	for _, d := range st.Demand {
		totals[0], totals[1], totals[2] = totals[0]+d.CPU, totals[1]+d.Mem, totals[2]+d.Pods
	}
	// Each resource's rows in units of its largest figure, so that bytes and
	// millicores meet in one well-conditioned matrix.
	var scale [3]float64
	for r := range 3 {
		scale[r] = math.Max(totals[r], 1)
		for _, gr := range groups {
			scale[r] = math.Max(scale[r], [3]float64{gr.CPU, gr.Mem, gr.Pods}[r])
		}
	}
	for si, set := range sets {
		var need [3]float64
		for _, d := range st.Demand {
			if within(d.Eligible, set) {
				need[0], need[1], need[2] = need[0]+d.CPU, need[1]+d.Mem, need[2]+d.Pods
			}
		}
		for r := range 3 {
			c := make([]float64, nv)
			held := 0.0
			for i, gr := range groups {
				if set[i] {
					per := [3]float64{gr.CPU, gr.Mem, gr.Pods}[r] / scale[r]
					c[i] = per
					held += per * gr.Min
				}
			}
			// A unit of u is a share of the total request (of nothing, when
			// no pod requests the resource: a column of zeros is refused).
			c[g+3*si+r] = 1
			if totals[r] > 0 {
				c[g+3*si+r] = totals[r] / scale[r]
			}
			rows = append(rows, row{coef: c, rhs: need[r]/scale[r] - held, ge: true})
		}
	}
	// Costs: nodes at their price; a share of a request left out at more
	// than all the capacity there is.
	cost := make([]float64, nv+len(rows))
	penalty := 1.0
	for i, gr := range groups {
		cost[i] = st.Price[i]
		penalty += st.Price[i] * gr.Max
	}
	for j := g; j < nv; j++ {
		cost[j] = 1e3 * penalty
	}
	a := mat.NewDense(len(rows), nv+len(rows), nil)
	b := make([]float64, len(rows))
	for ri, r := range rows {
		for j, v := range r.coef {
			a.Set(ri, j, v)
		}
		if r.ge {
			a.Set(ri, nv+ri, -1)
		} else {
			a.Set(ri, nv+ri, 1)
		}
		b[ri] = r.rhs
	}
	_, x, err := lp.Simplex(cost, a, b, 1e-9, nil)
	if err != nil {
		if errors.Is(err, lp.ErrInfeasible) {
			return Result{}, fmt.Errorf("the bound's program has no solution: %w", err)
		}
		return Result{}, err
	}
	res := Result{Nodes: make([]float64, g)}
	for i, gr := range groups {
		res.Nodes[i] = gr.Min + math.Max(x[i], 0)
		res.PerHour += st.Price[i] * res.Nodes[i]
	}
	for j := g; j < nv; j++ {
		res.Short = math.Max(res.Short, x[j])
	}
	return res, nil
}

// within reports whether every group eligible holds is in set.
func within(eligible, set []bool) bool {
	for i, ok := range eligible {
		if ok && !set[i] {
			return false
		}
	}
	return true
}

// unions are the sets of groups whose capacity must cover the pods that may
// only run there: every union of the demands' distinct eligible sets (or,
// past maxUnions kinds, each set and all of them together).
func unions(demand []Demand, g int) [][]bool {
	var kinds [][]bool
	for _, d := range demand {
		if len(d.Eligible) != g || (d.CPU == 0 && d.Mem == 0 && d.Pods == 0) {
			continue
		}
		if !slices.ContainsFunc(kinds, func(k []bool) bool { return slices.Equal(k, d.Eligible) }) {
			kinds = append(kinds, d.Eligible)
		}
	}
	var out [][]bool
	add := func(set []bool) {
		if !slices.ContainsFunc(out, func(k []bool) bool { return slices.Equal(k, set) }) {
			out = append(out, set)
		}
	}
	if len(kinds) > maxUnions {
		all := make([]bool, g)
		for _, k := range kinds {
			add(k)
			for i, ok := range k {
				all[i] = all[i] || ok
			}
		}
		add(all)
		return out
	}
	for mask := 1; mask < 1<<len(kinds); mask++ {
		set := make([]bool, g)
		for k, kind := range kinds {
			if mask&(1<<k) != 0 {
				for i, ok := range kind {
					set[i] = set[i] || ok
				}
			}
		}
		add(set)
	}
	return out
}
