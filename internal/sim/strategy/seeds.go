package strategy

import (
	"context"
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"

	"spotter.dev/spotter/internal/plan"
	"spotter.dev/spotter/internal/sim/world"
	"spotter.dev/spotter/internal/snapshot"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// reschedulerSeed is k8s-spot-rescheduler (pusher/k8s-spot-rescheduler) as
// its code (rescheduler.go, nodes/nodes.go, scaler/scaler.go at its last
// commit, 2c20e24) runs with its default flags. Where its README and its code
// differ, the code is followed.
//
//   - On-demand nodes carry a PreferNoSchedule taint (its README asks for one).
//   - Its loop acts every --housekeeping-interval (10s), counted from the end
//     of the previous round, the first 10s after the start. A round does
//     nothing while --node-drain-delay (10m) since the end of the last drain
//     has not passed, nor while any pod is unschedulable (Pending with the
//     scheduler's Unschedulable condition: here, a pod the scheduler could not
//     place at its last run and still unbound).
//   - Otherwise on-demand nodes are taken least requested CPU first. For each,
//     its pods, largest CPU request first, are fitted one by one on the spot
//     nodes, taken in one order fixed at the start of the round: most
//     requested CPU first (the fullest node first; its README says the
//     opposite, its code sorts this way). Each pod goes to the first spot node
//     that passes the predicates (here the planner's fit engine, the real
//     filter plugins), and counts there for the next pods.
//   - The first on-demand node whose pods all fit is drained, and the loop
//     waits for the drain (it is synchronous): ToBeDeleted taint; every pod
//     evicted through the Eviction API at once, each retried every 10s while
//     --pod-eviction-timeout (2m) since the drain began has not passed. If one
//     is still refused then, the drain fails: the taint is removed and the
//     pods already evicted stay evicted (wasted evictions). If all are
//     evicted, it checks every 5s until 5s after that timeout that none of
//     them is on the node any more, and then removes the taint (the empty
//     node is left to the autoscaler); pods still there then fail the drain.
//     Success or failure, the drain delay starts when the drain ends.
//
// It does not know about preemption notices; the termination handler of its
// era drains a noticed node (runTerminationHandler). PodDisruptionBudgets do not enter its plan (its drain filter reads them only
// for kube-system pods, and only with a flag it leaves off); the Eviction API
// still enforces them, so a budget shows up as refused evictions and failed
// drains, not as violations.
//
// Time: the world moves once per step (one minute by default); the loop's own
// times (rounds, eviction retries, checks, delays) are kept exactly, so one
// step runs every round, retry and check whose time falls in it, each against
// the world as the step has it (its own evictions of the step included; a pod
// evicted leaves the node when its grace period ends, seen from the first
// step after that).
type reschedulerSeed struct {
	// own answers the seed's scheduling questions.
	own *plan.Engine
	// sched tells which pods the scheduler could not place.
	sched *world.Scheduler
	// static skips the fit of nodes whose pods cannot all fit (mayFit),
	// unless exhaustive.
	static     *world.StaticFit
	exhaustive bool
	// wake is the loop's next action; nextDrain the end of the drain delay.
	wake, nextDrain time.Time
	// lastVersion is the world's version when a whole round last found no
	// node to drain (looked): a round on the same world finds the same.
	lastVersion uint64
	looked      bool
	drain       *reschedulerDrain
	// drains counts the drains started (for tests).
	drains int
}

// reschedulerDrain is a drain of k8s-spot-rescheduler's scaler.DrainNode.
type reschedulerDrain struct {
	node    *world.Node
	pods    []*world.Pod
	evicted map[*world.Pod]bool
	// retryUntil is the start plus --pod-eviction-timeout; waiting is set
	// once every pod is evicted (the check for pods gone).
	retryUntil time.Time
	waiting    bool
}

// k8s-spot-rescheduler's defaults and constants.
const (
	seedTaint              = "node-role.kubernetes.io/worker"
	seedHousekeeping       = 10 * time.Second // --housekeeping-interval
	seedDrainDelay         = 10 * time.Minute // --node-drain-delay
	seedEvictionTimeout    = 2 * time.Minute  // --pod-eviction-timeout
	seedEvictionRetry      = 10 * time.Second // scaler.EvictionRetryTime
	seedGonePoll           = 5 * time.Second  // DrainNode's check for pods gone
	seedGoneGrace          = 5 * time.Second  // ... until this after retryUntil
	seedDrainingTaintValue = "rescheduler"
)

func (s *reschedulerSeed) Setup(w *world.World, _ *plan.Engine) error {
	// The seed's questions on an engine of its own (see world.NewAutoscaler).
	own, err := plan.NewEngine(context.Background(), &snapshot.Snapshot{Namespaces: w.Namespaces()})
	if err != nil {
		return err
	}
	s.own, s.static = own, world.NewStaticFit(w, own)
	s.wake, s.nextDrain = w.Now().Add(seedHousekeeping), w.Now()
	w.SetOnDemandTaint(&corev1.Taint{Key: seedTaint, Value: "true", Effect: corev1.TaintEffectPreferNoSchedule})
	runTerminationHandler(w)
	return nil
}

// UseScheduler lets the rounds see which pods the scheduler could not place;
// exhaustive turns the shortcuts off (sim.Options.exhaustive).
func (s *reschedulerSeed) UseScheduler(sched *world.Scheduler, exhaustive bool) {
	s.sched, s.exhaustive = sched, exhaustive
}

// Step runs every action of the loop whose time falls in the step.
func (s *reschedulerSeed) Step(ctx context.Context, w *world.World) error {
	end := w.Now().Add(w.Scenario().Step.Duration)
	for s.wake.Before(end) {
		next, err := s.act(ctx, w, s.wake)
		if err != nil {
			return err
		}
		s.wake = next
	}
	return nil
}

// act runs the loop's action due at time at and returns the time of the next.
func (s *reschedulerSeed) act(ctx context.Context, w *world.World, at time.Time) (time.Time, error) {
	if s.drain != nil {
		return s.drainAt(w, at), nil
	}
	return s.round(ctx, w, at)
}

// unschedulable reports whether a pod is Pending as unschedulable.
func (s *reschedulerSeed) unschedulable() bool {
	if s.sched == nil {
		return false
	}
	for _, p := range s.sched.Unschedulable {
		if p.Node == nil && !p.Terminating && !p.Lost() {
			return true
		}
	}
	return false
}

// round is one housekeeping round at time at.
func (s *reschedulerSeed) round(ctx context.Context, w *world.World, at time.Time) (time.Time, error) {
	next := at.Add(seedHousekeeping)
	if at.Before(s.nextDrain) || s.unschedulable() {
		return next, nil
	}
	if s.looked && w.Version() == s.lastVersion {
		return next, nil
	}
	od, err := s.drainable(ctx, w)
	if err != nil || od == nil {
		s.looked, s.lastVersion = err == nil, w.Version()
		return next, err
	}
	pods := world.Movable(od)
	sortByCPU(pods)
	w.SetDraining(od, seedDrainingTaintValue)
	s.drain = &reschedulerDrain{node: od, pods: pods, evicted: map[*world.Pod]bool{}, retryUntil: at.Add(seedEvictionTimeout)}
	s.drains++
	return s.drainAt(w, at), nil
}

// drainable is the first on-demand node, least requested CPU first, whose
// pods all fit on the spot nodes as the seed fits them; nil when none.
func (s *reschedulerSeed) drainable(ctx context.Context, w *world.World) (*world.Node, error) {
	ods := onDemandNodes(w)
	sort.SliceStable(ods, func(i, j int) bool { return requestedCPU(ods[i]) < requestedCPU(ods[j]) })
	nodes, isSpot := spotFirst(w)
	room := spotRoom(w)
	for _, od := range ods {
		pods := world.Movable(od)
		if len(pods) == 0 {
			continue
		}
		if !s.exhaustive {
			may, err := s.mayFit(ctx, pods, room)
			if err != nil {
				return nil, err
			}
			if !may {
				continue
			}
		}
		placed, err := s.fit(ctx, w, od, pods, nodes, isSpot)
		if err != nil {
			return nil, err
		}
		if !slices.ContainsFunc(placed, func(pl plan.Placement) bool { return pl.Node == "" }) {
			return od, nil
		}
	}
	return nil, nil
}

// spotFirst orders the Ready nodes as a round sees them: the spot nodes,
// most requested CPU first (the order stays for the whole round), then the
// others, which count for spread and affinity but receive nothing.
func spotFirst(w *world.World) ([]*corev1.Node, map[string]bool) {
	var spot, other []*world.Node
	for _, n := range w.ReadyNodes() {
		if n.Spot() {
			spot = append(spot, n)
		} else {
			other = append(other, n)
		}
	}
	sort.SliceStable(spot, func(i, j int) bool { return requestedCPU(spot[i]) > requestedCPU(spot[j]) })
	isSpot := make(map[string]bool, len(spot))
	for _, n := range spot {
		isSpot[n.Name] = true
	}
	return world.NodeObjs(append(spot, other...)), isSpot
}

// fit places the pods of on-demand node od, largest CPU request first, each
// on the first spot node of nodes' order that passes the filter plugins (the
// seed's canDrainNode and findSpotNodeForPod); it sorts pods.
func (s *reschedulerSeed) fit(ctx context.Context, w *world.World, od *world.Node, pods []*world.Pod, nodes []*corev1.Node, isSpot map[string]bool) ([]plan.Placement, error) {
	sortByCPU(pods)
	// The pods of the spot nodes (the destinations); of the others, unless
	// exhaustive, only those that can constrain the pods to place (as in the
	// autoscaler: elsewhere, pods count for spread and affinity only).
	var others, elsewhere []*corev1.Pod
	for _, p := range w.AllPods() {
		switch {
		case p.Node == nil || p.Node == od:
		case isSpot[p.Node.Name]:
			others = append(others, p.Obj)
		default:
			elsewhere = append(elsewhere, p.Obj)
		}
	}
	if !s.exhaustive {
		elsewhere = world.Constraining(elsewhere, pods)
	}
	others = append(others, elsewhere...)
	pending := make([]*corev1.Pod, len(pods))
	for i, p := range pods {
		pending[i] = p.Unbound()
	}
	// Pick nil: the first node that passes, in the order of Nodes.
	return s.own.Schedule(ctx, plan.ScheduleRequest{Nodes: nodes, Pods: others, Pending: pending,
		Eligible: func(n *corev1.Node) bool { return isSpot[n.Name] }})
}

// room is what a node has left: CPU, memory and pod slots.
type room struct {
	cpu, mem int64
	slots    int
}

// spotRoom is what each Ready spot node has left, as the filter plugins count
// it (every pod bound to it, terminating ones included).
func spotRoom(w *world.World) []room {
	var out []room
	for _, n := range w.ReadyNodes() {
		if !n.Spot() {
			continue
		}
		r := room{cpu: n.Group.MilliCPU(), mem: n.Group.MemoryBytes(), slots: int(n.Group.Pods) - len(n.Pods())}
		for _, p := range n.Pods() {
			r.cpu -= p.App.MilliCPU()
			r.mem -= p.App.MemoryBytes()
		}
		out = append(out, r)
	}
	return out
}

// mayFit is a necessary condition for fit to place every one of pods on the
// spot nodes, whose room is given: each pod's app may run on some spot group
// (world.StaticFit), fits the room of some spot node on its own, and all of them
// fit the spot nodes' room added up. When it is false fit would leave a pod
// unplaced, so the round need not ask.
func (s *reschedulerSeed) mayFit(ctx context.Context, pods []*world.Pod, rooms []room) (bool, error) {
	var total room
	for _, r := range rooms {
		total.cpu, total.mem, total.slots = total.cpu+max(r.cpu, 0), total.mem+max(r.mem, 0), total.slots+max(r.slots, 0)
	}
	for _, p := range pods {
		total.cpu, total.mem, total.slots = total.cpu-p.App.MilliCPU(), total.mem-p.App.MemoryBytes(), total.slots-1
		if total.cpu < 0 || total.mem < 0 || total.slots < 0 {
			return false, nil
		}
		alone := false
		for _, r := range rooms {
			if r.cpu >= p.App.MilliCPU() && r.mem >= p.App.MemoryBytes() && r.slots >= 1 {
				alone = true
				break
			}
		}
		if !alone {
			return false, nil
		}
		ok, err := s.static.FitsAny(ctx, p.App, func(g *world.Group) bool { return g.Spot })
		if !ok || err != nil {
			return false, err
		}
	}
	return true, nil
}

// sortByCPU orders pods largest CPU request first, as the seed orders each
// node's pods (stable: equal requests keep their order).
func sortByCPU(pods []*world.Pod) {
	sort.SliceStable(pods, func(i, j int) bool { return pods[i].App.MilliCPU() > pods[j].App.MilliCPU() })
}

// drainAt advances the drain at time at (an eviction attempt or a check for
// pods gone) and returns the time of the loop's next action.
func (s *reschedulerSeed) drainAt(w *world.World, at time.Time) time.Time {
	d := s.drain
	if !world.Alive(w, d.node) {
		// The pods are gone with the node: the check succeeds.
		return s.endDrain(w, at)
	}
	if !d.waiting {
		left := 0
		for _, p := range d.pods {
			if d.evicted[p] {
				continue
			}
			if err := w.Evict(p, Rescheduler); err != nil {
				left++
				continue
			}
			d.evicted[p] = true
		}
		if left > 0 {
			// Each refused pod is tried again after the retry time if the
			// timeout has not passed by then; else its eviction fails then.
			retry := at.Add(seedEvictionRetry)
			if retry.Before(d.retryUntil) {
				return retry
			}
			w.RecordWastedEvictions(len(d.evicted))
			return s.endDrain(w, retry)
		}
		d.waiting = true
	}
	gone := true
	for _, p := range d.pods {
		if p.Node == d.node {
			gone = false
			break
		}
	}
	if gone {
		return s.endDrain(w, at)
	}
	if check := at.Add(seedGonePoll); check.Before(d.retryUntil.Add(seedGoneGrace)) {
		return check
	}
	return s.endDrain(w, at.Add(seedGonePoll))
}

// endDrain ends the drain at time at: the taint goes, the drain delay starts,
// and the next round comes one housekeeping interval later.
func (s *reschedulerSeed) endDrain(w *world.World, at time.Time) time.Time {
	if world.Alive(w, s.drain.node) {
		w.SetDraining(s.drain.node, "")
	}
	s.drain, s.looked = nil, false
	s.nextDrain = at.Add(seedDrainDelay)
	return at.Add(seedHousekeeping)
}

// migratorSeed is cost-manager's spot-migrator (hsbc/cost-manager) as its
// documentation and code describe it:
//
//   - hourly, on the hour, a migration run starts;
//   - a run drains on-demand nodes one at a time: unschedulable ones first,
//     then the oldest; a drain cordons the node and evicts every pod through
//     the Eviction API (PodDisruptionBudgets respected, refusals retried), with
//     a 1h timeout, then deletes the instance; the evicted pods go Pending and
//     the autoscaler (price expander) adds the cheapest node group that fits:
//     spot when the market has capacity, on-demand otherwise;
//   - after each node, if any on-demand node appeared meanwhile, the run
//     assumes spot is unavailable and stops until the next hour; otherwise it
//     goes on until no on-demand node is left.
//
// It drains every on-demand node, including those whose pods must stay on
// on-demand: their pods then make the autoscaler add an on-demand node, which
// ends the run. A noticed spot node is drained by the termination handler of
// its era (runTerminationHandler).
type migratorSeed struct {
	schedule interface{ Next(time.Time) time.Time }
	next     time.Time
	running  bool
	before   map[*world.Node]bool
	drain    *migratorDrain
	started  time.Time
}

// migratorDrain is the node a migration run drains.
type migratorDrain struct {
	node    *world.Node
	evicted map[*world.Pod]bool
}

func (s *migratorSeed) Setup(w *world.World, _ *plan.Engine) error {
	sched, err := v1alpha1.ParseSchedule("@hourly")
	if err != nil {
		return err
	}
	s.schedule = sched
	s.next = sched.Next(w.Now())
	runTerminationHandler(w)
	return nil
}

func (s *migratorSeed) Step(_ context.Context, w *world.World) error {
	now := w.Now()
	if !s.running {
		if now.Before(s.next) {
			return nil
		}
		s.running, s.next = true, s.schedule.Next(now)
	}
	if d := s.drain; d != nil {
		if !world.Alive(w, d.node) {
			s.drain = nil
			return s.afterNode(w)
		}
		for _, p := range world.Movable(d.node) {
			if err := w.Evict(p, Migrator); err == nil {
				d.evicted[p] = true
			}
		}
		if len(d.node.Pods()) == 0 {
			w.DeleteNode(d.node)
			s.drain = nil
			return s.afterNode(w)
		}
		if now.Sub(s.started) >= time.Hour {
			// kubectl drain timed out: the run fails; the node stays cordoned.
			s.drain, s.running = nil, false
		}
		return nil
	}
	ods := onDemandNodes(w)
	if len(ods) == 0 {
		s.running = false
		return nil
	}
	sort.SliceStable(ods, func(i, j int) bool {
		if ods[i].Cordoned != ods[j].Cordoned {
			return ods[i].Cordoned
		}
		return ods[i].Created.Before(ods[j].Created)
	})
	s.before = map[*world.Node]bool{}
	for _, n := range w.Nodes() {
		if !n.Group.Spot {
			s.before[n] = true
		}
	}
	target := ods[0]
	w.Cordon(target, true)
	s.drain = &migratorDrain{node: target, evicted: map[*world.Pod]bool{}}
	s.started = now
	return s.Step(context.Background(), w)
}

// afterNode ends the run if an on-demand node appeared during the last drain.
func (s *migratorSeed) afterNode(w *world.World) error {
	for _, n := range w.Nodes() {
		if !n.Group.Spot && !s.before[n] {
			s.running = false
			return nil
		}
	}
	return nil
}
