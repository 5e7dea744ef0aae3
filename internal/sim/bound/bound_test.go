package bound

import (
	"math"
	"testing"
)

const gi = 1 << 30

// Hand-solved programs: the bound is the cheapest capacity and no less.
func TestSolveByHand(t *testing.T) {
	od := Group{Zone: 0, CPU: 4000, Mem: 16 * gi, Pods: 110, Max: 10}
	spot := Group{Zone: 0, Spot: true, CPU: 4000, Mem: 16 * gi, Pods: 110, Max: 10}
	both, odOnly := []bool{true, true}, []bool{true, false}
	for _, tc := range []struct {
		name    string
		groups  []Group
		st      Step
		perHour float64
		short   float64
	}{{
		// Spot-eligible pods 10 CPUs, on-demand-only 3 CPUs; at most 2 spot
		// nodes: 2 spot nodes, and on-demand for 3.25 - 2 = 1.25 nodes.
		name:   "spot limited",
		groups: []Group{od, spot},
		st: Step{Price: []float64{1, 0.3}, Spot: []float64{2}, Demand: []Demand{
			{Eligible: both, CPU: 10000, Mem: gi, Pods: 20},
			{Eligible: odOnly, CPU: 3000, Mem: gi, Pods: 6},
		}},
		perHour: 2*0.3 + 1.25,
	}, {
		// Spot plentiful: the on-demand-only pods need 0.75 on-demand
		// nodes; the rest, 2.5 nodes, on spot.
		name:   "spot plentiful",
		groups: []Group{od, spot},
		st: Step{Price: []float64{1, 0.3}, Spot: []float64{100}, Demand: []Demand{
			{Eligible: both, CPU: 10000, Mem: gi, Pods: 20},
			{Eligible: odOnly, CPU: 3000, Mem: gi, Pods: 6},
		}},
		perHour: 0.75 + 2.5*0.3,
	}, {
		// Memory binds: 40 GiB of spot-eligible pods is 2.5 nodes.
		name:    "memory",
		groups:  []Group{od, spot},
		st:      Step{Price: []float64{1, 0.3}, Spot: []float64{100}, Demand: []Demand{{Eligible: both, CPU: 100, Mem: 40 * gi, Pods: 4}}},
		perHour: 2.5 * 0.3,
	}, {
		// Min nodes are paid even when idle.
		name:    "min",
		groups:  []Group{{Zone: 0, CPU: 4000, Mem: 16 * gi, Pods: 110, Min: 2, Max: 10}, spot},
		st:      Step{Price: []float64{1, 0.3}, Spot: []float64{100}, Demand: []Demand{{Eligible: both, CPU: 1000, Mem: gi, Pods: 2}}},
		perHour: 2,
	}, {
		// Pods that request no memory (a column of zeros otherwise).
		name:    "no memory",
		groups:  []Group{od, spot},
		st:      Step{Price: []float64{1, 0.3}, Spot: []float64{100}, Demand: []Demand{{Eligible: both, CPU: 6000, Pods: 6}}},
		perHour: 1.5 * 0.3,
	}, {
		// More than the groups hold: all of it, 12 CPUs of 16 short (the
		// largest share over the resources).
		name:    "short",
		groups:  []Group{{Zone: 0, CPU: 4000, Mem: 16 * gi, Pods: 110, Max: 1}},
		st:      Step{Price: []float64{1}, Spot: []float64{0}, Demand: []Demand{{Eligible: []bool{true}, CPU: 16000, Mem: gi, Pods: 2}}},
		perHour: 1,
		short:   0.75,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Solve(tc.groups, tc.st)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(res.PerHour-tc.perHour) > 1e-6 || math.Abs(res.Short-tc.short) > 1e-6 {
				t.Errorf("bound %.4f per hour, short %.4f; want %.4f, %.4f (nodes %v)", res.PerHour, res.Short, tc.perHour, tc.short, res.Nodes)
			}
		})
	}
}
