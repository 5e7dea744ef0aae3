package hindsight

import (
	"math"
	"slices"

	"spotter.dev/spotter/internal/sim/bound"
)

// lowerBound computes the report's bound row step by step (package bound):
// the cheapest fractional capacity that holds every pod the workloads want
// at that moment, where each workload's pods may run (the kube-scheduler's
// filter plugins on an empty node of each group), at the prices of the
// moment, each group at most its max, and a zone's spot groups
// within the most spot nodes any run can hold then.
//
// That most is the highest capacity the zone's market has had so far (and
// the spot nodes the scenario starts with): the world refuses a spot launch
// while the zone holds its capacity of the moment, and only launches add
// spot nodes, so no run ever holds more. It is looser than what runs can hold
// after a long shortage (preemptions take nodes back), which keeps the bound
// a bound.
type lowerBound struct {
	o      *oracle
	groups []bound.Group
	spot   []float64
	// last are the inputs and answer of the last step: steps alike are
	// answered from them.
	lastDesired []int
	lastPrice   []float64
	lastSpot    []float64
	perHour     float64
	short       float64
	solved      bool
}

func (o *oracle) newBound() *lowerBound {
	lb := &lowerBound{o: o, spot: make([]float64, len(o.w.Zones()))}
	for _, og := range o.groups {
		g := og.g
		// No min: nothing brings a group back up to it (a preempted node
		// is not replaced, a strategy may delete nodes), so a run can hold
		// fewer.
		lb.groups = append(lb.groups, bound.Group{Zone: og.zone, Spot: og.spot, CPU: float64(g.MilliCPU()), Mem: float64(g.MemoryBytes()),
			Pods: float64(g.Pods), Max: float64(g.Max)})
		if og.spot && og.zone >= 0 && g.Initial != nil {
			lb.spot[og.zone] += float64(*g.Initial)
		}
	}
	return lb
}

// at returns the bound's cost per hour at a step, and the share of the pods'
// requests no capacity could hold (0 when it holds them all).
func (lb *lowerBound) at(desired []int, price []float64, capacity []int) (float64, float64, error) {
	for z, c := range capacity {
		lb.spot[z] = math.Max(lb.spot[z], float64(c))
	}
	if lb.solved && slices.Equal(desired, lb.lastDesired) && slices.Equal(price, lb.lastPrice) && slices.Equal(lb.spot, lb.lastSpot) {
		return lb.perHour, lb.short, nil
	}
	st := bound.Step{Price: price, Spot: lb.spot}
	for ai, n := range desired {
		if n == 0 {
			continue
		}
		a := &lb.o.apps[ai]
		st.Demand = append(st.Demand, bound.Demand{Eligible: a.eligible, CPU: float64(n) * float64(a.cpu),
			Mem: float64(n) * float64(a.mem), Pods: float64(n)})
	}
	res, err := bound.Solve(lb.groups, st)
	if err != nil {
		return 0, 0, err
	}
	pods := 0
	for _, n := range desired {
		pods += n
	}
	lb.lastDesired, lb.lastPrice, lb.lastSpot = slices.Clone(desired), slices.Clone(price), slices.Clone(lb.spot)
	lb.perHour, lb.short, lb.solved = res.PerHour, res.Short*float64(pods), true
	return lb.perHour, lb.short, nil
}
