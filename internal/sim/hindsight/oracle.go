// Package hindsight computes the report's rows no strategy could run: the
// packing heuristic (every pod the workloads want, packed at each step on
// the cheapest capacity that exists then) and the lower bound no run can pay
// less than, from the scenario and its market, without a strategy.
package hindsight

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"

	"spotter.dev/spotter/internal/sim/market"
	"spotter.dev/spotter/internal/sim/report"
	"spotter.dev/spotter/internal/sim/scenario"
	"spotter.dev/spotter/internal/sim/world"
)

// The oracle is the yardstick of the report: what the scenario's workloads
// would cost on the same market if, at every step, every pod they want at
// that moment ran on the cheapest capacity that exists at that moment, with
// migrations free and instant and no node provisioning, starting or idling.
// It is computed from the scenario and the market, not run as a strategy:
//
//   - demand: at each step, each workload's replicas as the load cycle wants
//     them then (the replicas the workload controllers create at that step);
//   - capacity: every node group, up to its max, at its price of the moment
//     (spot prices follow the trace where it has them), min nodes always paid;
//     a zone's spot groups within what its market allows: new spot nodes only
//     while the zone holds fewer than its capacity of the moment, and, as in
//     the world (capacity limits launches, not running nodes), the spot nodes
//     the oracle ran the step before may stay beyond it, less those the
//     preemption trace (or rate) takes back;
//   - constraints: which groups a workload's pod may run on is decided once
//     by the real filter plugins on an empty node of each group (node
//     selectors and affinity, taints, resources: on-demand-only pods land on
//     on-demand groups only); zone spread (DoNotSchedule on the zone) splits a
//     workload evenly over the zones where it may run; CPU, memory and pods
//     per node are packed exactly. Pod (anti-)affinity and spread on other
//     keys are not honoured: a scenario with them gets a warning.
//
// The packing is a heuristic (oracle.pack: the most constrained workloads
// first, then largest pods first; each fills the nodes already open, then
// opens nodes of the group with the lowest price per pod it takes), not an
// optimum: every packing it makes respects the constraints above (a test
// places the pods of its packings, one step in 37 over two days, with the
// kube-scheduler's filter plugins), so its cost is an achievable upper bound
// on the true hindsight optimum, which can be lower.
type oracle struct {
	w      *world.World
	groups []oracleGroup
	apps   []oracleApp
	// orders are the packing orders of apps tried at each step.
	orders [][]int
	// notes are what the oracle does not honour, for the report's warnings.
	notes []string
}

type oracleGroup struct {
	g    *world.Group
	zone int // index in w.Zones(), -1 when none
	spot bool
}

type oracleApp struct {
	a        *world.App
	cpu, mem int64
	// eligible[g] reports whether the app's pod fits an empty node of group
	// g (the filter plugins).
	eligible []bool
	// spreadZones, when set, are the zones the app spreads over evenly.
	spreadZones []int
}

// oracleNode is one node of a packing and what it holds.
type oracleNode struct {
	group         int
	cpu, mem      int64 // free
	slots         int   // free pod slots
	apps, counts  []int // app index and pod count, in placement order
	kept, minimum bool  // a spot node kept from the step before; a min node
}

// packing is where the oracle puts every pod at one step.
type packing struct {
	nodes    []oracleNode
	opened   []int // nodes per group
	unplaced int
}

// newOracle builds the oracle of a scenario: its groups and workloads as
// world.New makes them (then changed by initial, when set: --from-cluster's
// initial state), and for each workload the groups its pod may run on.
func newOracle(ctx context.Context, sc *scenario.Scenario, initial func(*world.World)) (*oracle, error) {
	w, err := world.New(sc, int64(sc.Seed), false)
	if err != nil {
		return nil, err
	}
	if initial != nil {
		initial(w)
	}
	// Which groups each workload's pod may run on is the kube-scheduler's
	// answer (its filter plugins on an empty node of each group), not the
	// planner's.
	k, err := world.NewScheduler(ctx, w)
	if err != nil {
		return nil, err
	}
	o := &oracle{w: w}
	templates := make([]*corev1.Node, len(w.Groups))
	index := map[string]int{}
	for i, g := range w.Groups {
		og := oracleGroup{g: g, zone: -1, spot: g.Spot}
		for zi, z := range w.Zones() {
			if z.Name == g.Zone {
				og.zone = zi
			}
		}
		o.groups = append(o.groups, og)
		templates[i] = w.Template(g, i)
		index[templates[i].Name] = i
	}
	if err := k.Kube().Sync(templates, nil); err != nil {
		return nil, err
	}
	var unhonoured []string
	for _, a := range w.Apps {
		oa := oracleApp{a: a, cpu: a.MilliCPU(), mem: a.MemoryBytes(), eligible: make([]bool, len(w.Groups))}
		probe := a.Template.DeepCopy()
		probe.Name, probe.Spec.NodeName = a.Name+"-oracle-probe", ""
		feasible, err := k.Kube().Feasible(ctx, probe)
		if err != nil {
			return nil, err
		}
		for _, name := range feasible {
			oa.eligible[index[name]] = true
		}
		zoneSpread, other := world.SpreadOf(a.Template)
		if other {
			unhonoured = append(unhonoured, a.Namespace+"/"+a.Name)
		}
		if zoneSpread {
			for zi := range w.Zones() {
				for gi, og := range o.groups {
					if og.zone == zi && oa.eligible[gi] {
						oa.spreadZones = append(oa.spreadZones, zi)
						break
					}
				}
			}
		}
		o.apps = append(o.apps, oa)
	}
	if len(unhonoured) > 0 {
		o.notes = append(o.notes, fmt.Sprintf("the oracle does not honour the pod (anti-)affinity or spread constraints other than zone spread of %s: "+
			"its cost may be below what is achievable", strings.Join(unhonoured, ", ")))
	}
	o.orders = o.packingOrders()
	return o, nil
}

// packingOrders are the orders the apps are packed in, the most constrained
// first: those that may not run on spot and those spread over zones (in one
// order, then in the other: the on-demand nodes of the first can hold some of
// the second in their zones), then the rest; within each, larger pods first
// (the larger share of CPU or memory of the largest group).
func (o *oracle) packingOrders() [][]int {
	var refCPU, refMem int64 = 1, 1
	for _, og := range o.groups {
		refCPU, refMem = max(refCPU, og.g.MilliCPU()), max(refMem, og.g.MemoryBytes())
	}
	class := func(a *oracleApp, spreadFirst bool) int {
		spot := false
		for gi, ok := range a.eligible {
			spot = spot || (ok && o.groups[gi].spot)
		}
		switch {
		case !spot:
			if spreadFirst {
				return 1
			}
			return 0
		case a.spreadZones != nil:
			if spreadFirst {
				return 0
			}
			return 1
		}
		return 2
	}
	size := func(a *oracleApp) float64 {
		return math.Max(float64(a.cpu)/float64(refCPU), float64(a.mem)/float64(refMem))
	}
	var orders [][]int
	for _, spreadFirst := range []bool{false, true} {
		order := make([]int, len(o.apps))
		for i := range order {
			order[i] = i
		}
		sort.SliceStable(order, func(i, j int) bool {
			a, b := &o.apps[order[i]], &o.apps[order[j]]
			if ca, cb := class(a, spreadFirst), class(b, spreadFirst); ca != cb {
				return ca < cb
			}
			return size(a) > size(b)
		})
		orders = append(orders, order)
	}
	return orders
}

// limits are what the spot markets allow at one step: each zone's capacity
// and each group's spot nodes kept from the step before.
type limits struct {
	capacity []int // by zone
	kept     []int // by group
}

// pack places every wanted pod (desired, by app) at prices price (by group)
// in each of the packing orders, and returns the cheapest packing.
func (o *oracle) pack(desired []int, m limits, price []float64) packing {
	var best packing
	bestCost := math.Inf(1)
	for _, order := range o.orders {
		pk := o.packIn(order, desired, m, price)
		cost := 0.0
		for gi, n := range pk.opened {
			cost += float64(n) * price[gi]
		}
		// Unplaced pods first: a packing that places more wins.
		if pk.unplaced < best.unplaced || bestCost == math.Inf(1) || (pk.unplaced == best.unplaced && cost < bestCost) {
			best, bestCost = pk, cost
		}
	}
	return best
}

// packIn places every wanted pod, apps in the order given.
func (o *oracle) packIn(order, desired []int, m limits, price []float64) packing {
	// What a zone's spot nodes are: kept ones (K) and new ones (N).
	zoneKept, zoneNew := make([]int, len(m.capacity)), make([]int, len(m.capacity))
	pk := packing{opened: make([]int, len(o.groups))}
	canOpen := func(gi int) (ok, kept bool) {
		og := &o.groups[gi]
		if pk.opened[gi] >= int(og.g.Max) {
			return false, false
		}
		if !og.spot || og.zone < 0 {
			return true, false
		}
		z, capNow := og.zone, m.capacity[og.zone]
		if pk.opened[gi] < m.kept[gi] {
			// Keeping one more: fine unless new ones then exceed capacity.
			return zoneNew[z] == 0 || zoneKept[z]+1+zoneNew[z] <= capNow, true
		}
		return zoneKept[z]+zoneNew[z]+1 <= capNow, false
	}
	open := func(gi int, kept, minimum bool) int {
		g := o.groups[gi].g
		pk.nodes = append(pk.nodes, oracleNode{group: gi, cpu: g.MilliCPU(), mem: g.MemoryBytes(), slots: int(g.Pods), kept: kept, minimum: minimum})
		pk.opened[gi]++
		if z := o.groups[gi].zone; o.groups[gi].spot && z >= 0 {
			if kept {
				zoneKept[z]++
			} else {
				zoneNew[z]++
			}
		}
		return len(pk.nodes) - 1
	}
	for gi, og := range o.groups {
		for range og.g.Min {
			open(gi, false, true)
		}
	}
	for _, ai := range order {
		a := &o.apps[ai]
		want := desired[ai]
		if want == 0 {
			continue
		}
		if a.spreadZones == nil {
			pk.unplaced += o.place(&pk, ai, -1, want, price, canOpen, open)
			continue
		}
		n := len(a.spreadZones)
		if n == 0 {
			pk.unplaced += want
			continue
		}
		for k, z := range a.spreadZones {
			share := want / n
			if k < want%n {
				share++
			}
			pk.unplaced += o.place(&pk, ai, z, share, price, canOpen, open)
		}
	}
	return pk
}

// place puts count pods of app ai (in zone z, or anywhere when z is -1) on
// the open nodes first, first fit, then on new nodes of the group with the
// lowest price per pod placed; it returns the pods it could not place.
func (o *oracle) place(pk *packing, ai, z, count int, price []float64, canOpen func(int) (bool, bool), open func(int, bool, bool) int) int {
	a := &o.apps[ai]
	allowed := func(gi int) bool { return a.eligible[gi] && (z < 0 || o.groups[gi].zone == z) }
	put := func(ni, n int) {
		nd := &pk.nodes[ni]
		nd.cpu -= int64(n) * a.cpu
		nd.mem -= int64(n) * a.mem
		nd.slots -= n
		if k := len(nd.apps); k > 0 && nd.apps[k-1] == ai {
			nd.counts[k-1] += n
		} else {
			nd.apps, nd.counts = append(nd.apps, ai), append(nd.counts, n)
		}
	}
	for ni := range pk.nodes {
		if count == 0 {
			return 0
		}
		if !allowed(pk.nodes[ni].group) {
			continue
		}
		nd := &pk.nodes[ni]
		if n := min(count, fits(nd.cpu, nd.mem, nd.slots, a)); n > 0 {
			put(ni, n)
			count -= n
		}
	}
	for count > 0 {
		best, bestKept, bestCost := -1, false, math.Inf(1)
		for gi, og := range o.groups {
			if !allowed(gi) {
				continue
			}
			ok, kept := canOpen(gi)
			if !ok {
				continue
			}
			per := min(count, fits(og.g.MilliCPU(), og.g.MemoryBytes(), int(og.g.Pods), a))
			if per == 0 {
				continue
			}
			if cost := price[gi] / float64(per); cost < bestCost {
				best, bestKept, bestCost = gi, kept, cost
			}
		}
		if best < 0 {
			return count
		}
		ni := open(best, bestKept, false)
		n := min(count, fits(pk.nodes[ni].cpu, pk.nodes[ni].mem, pk.nodes[ni].slots, a))
		put(ni, n)
		count -= n
	}
	return 0
}

// fits is how many pods of a fit in the room given.
func fits(cpu, mem int64, slots int, a *oracleApp) int {
	n := int64(slots)
	if a.cpu > 0 {
		n = min(n, cpu/a.cpu)
	}
	if a.mem > 0 {
		n = min(n, mem/a.mem)
	}
	return int(max(n, 0))
}

// at sets the oracle's world to step i (elapsed e) and reads the demand, the
// prices and the capacity of that moment into desired, price and capacity.
func (o *oracle) at(e time.Duration, desired []int, price []float64, capacity []int) {
	w := o.w
	w.Clock.SetTime(w.Start().Add(e))
	for ai := range o.apps {
		desired[ai] = w.DesiredReplicas(o.apps[ai].a)
	}
	for gi, og := range o.groups {
		price[gi] = w.PricePerHour(og.g)
	}
	for zi, z := range w.Zones() {
		capacity[zi] = z.Capacity(e)
	}
}

// run computes the oracle's row over the scenario, step by step.
func (o *oracle) run(ctx context.Context, progress *atomic.Int64) (report.Result, report.Result, error) {
	w, sc := o.w, o.w.Scenario()
	step := sc.Step.Duration
	steps := int(sc.Duration.Duration / step)
	res, bnd := report.Result{Strategy: report.Packing}, report.Result{Strategy: report.Bound}
	rng := rand.New(rand.NewPCG(uint64(sc.Seed), 0x0ac1e))
	m := limits{capacity: make([]int, len(w.Zones())), kept: make([]int, len(o.groups))}
	desired := make([]int, len(o.apps))
	price := make([]float64, len(o.groups))
	lb := o.newBound()
	var podSeconds, spotPodSeconds, unplacedSeconds float64
	var nextSample time.Duration
	for i := range steps {
		if i%256 == 0 {
			if err := ctx.Err(); err != nil {
				return report.Result{}, report.Result{}, err
			}
			if progress != nil {
				progress.Store(int64(i))
			}
		}
		e := time.Duration(i) * step
		o.at(e, desired, price, m.capacity)
		for zi, z := range w.Zones() {
			o.preempt(zi, z, e-step, e, m.kept, rng)
		}
		perHour, short, err := lb.at(desired, price, m.capacity)
		if err != nil {
			return report.Result{}, report.Result{}, fmt.Errorf("the bound at %s: %w", e, err)
		}
		bnd.Cost += perHour * step.Hours()
		bnd.PendingPodMinutes += short * step.Minutes()
		pk := o.pack(desired, m, price)
		odPrice := math.Inf(1)
		for gi, og := range o.groups {
			if !og.spot {
				odPrice = math.Min(odPrice, price[gi])
			}
		}
		spotNodes, odNodes, placed, onSpot := 0, 0, 0, 0
		cost := 0.0
		for _, nd := range pk.nodes {
			og := &o.groups[nd.group]
			cost += price[nd.group] * step.Hours()
			pods := 0
			for _, c := range nd.counts {
				pods += c
			}
			placed += pods
			if og.spot {
				spotNodes++
				onSpot += pods
			} else {
				odNodes++
			}
		}
		for gi, og := range o.groups {
			if og.spot {
				m.kept[gi] = pk.opened[gi]
			}
		}
		res.Cost += cost
		sec := step.Seconds()
		podSeconds += float64(placed) * sec
		spotPodSeconds += float64(onSpot) * sec
		unplacedSeconds += float64(pk.unplaced) * sec
		if e >= nextSample {
			nextSample += report.SampleEvery
			s := report.Sample{Hours: e.Hours(), Cost: res.Cost, Pending: pk.unplaced, SpotNodes: spotNodes, OnDemandNodes: odNodes,
				Capacity: slices.Clone(m.capacity)}
			if placed > 0 {
				s.SpotShare = float64(onSpot) / float64(placed)
			}
			res.Series = append(res.Series, s)
			bnd.Series = append(bnd.Series, report.Sample{Hours: e.Hours(), Cost: bnd.Cost})
		}
	}
	if podSeconds > 0 {
		res.SpotShare = spotPodSeconds / podSeconds
	}
	res.PendingPodMinutes = unplacedSeconds / 60
	if progress != nil {
		progress.Store(int64(steps))
	}
	return res, bnd, nil
}

// preempt takes back the zone's kept spot nodes the market preempts between
// elapsed times from and to: the preemption trace's drops, or each node with
// the synthetic rate's probability (a trace read as a hazard is one); from
// the zone's spot groups in order.
func (o *oracle) preempt(zi int, z *market.Zone, from, to time.Duration, kept []int, rng *rand.Rand) {
	held := 0
	for gi, og := range o.groups {
		if og.spot && og.zone == zi {
			held += kept[gi]
		}
	}
	if held == 0 || from < 0 {
		return
	}
	take := 0
	switch {
	case z.HasDropTrace():
		for _, d := range z.Drops(from, to) {
			take += d.Lost
		}
		take = min(take, held)
	case z.PreRate > 0:
		p := 1 - math.Exp(-z.PreRate*(to-from).Hours())
		for range held {
			if rng.Float64() < p {
				take++
			}
		}
	}
	for gi, og := range o.groups {
		if take == 0 {
			break
		}
		if og.spot && og.zone == zi {
			n := min(take, kept[gi])
			kept[gi] -= n
			take -= n
		}
	}
}

// Run computes the packing's and the bound's rows of a scenario, and what
// the packing does not honour. initial, when set, changes the world the
// workloads are read from, as it changes the strategies' worlds.
func Run(ctx context.Context, sc *scenario.Scenario, initial func(*world.World), progress *atomic.Int64) (report.Result, report.Result, []string, error) {
	o, err := newOracle(ctx, sc, initial)
	if err != nil {
		return report.Result{}, report.Result{}, nil, err
	}
	res, bnd, err := o.run(ctx, progress)
	return res, bnd, o.notes, err
}
