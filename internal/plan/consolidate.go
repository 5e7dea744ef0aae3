package plan

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"math"
	"slices"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"spotter.dev/spotter/internal/classify"
	"spotter.dev/spotter/internal/snapshot"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// Consolidation configures plans that empty an on-demand node whose pods do
// not all fit on spot: each pod goes to a spot node if one fits it, else, if
// no spot node would take it however empty (run.bound), to an on-demand node
// that stays, so that pods that must stay on on-demand capacity are packed
// onto fewer on-demand nodes.
type Consolidation struct {
	// Enabled turns such plans on.
	Enabled bool
	// MinHourlySavingPerEviction is the least hourly saving (the emptied
	// node's price, in the prices' currency) per evicted pod that justifies
	// a consolidation: a node whose price is unknown, or too low for the
	// evictions it takes, is not consolidated.
	MinHourlySavingPerEviction float64
}

// consolidation is the state of the consolidation pass of a plan.
type consolidation struct {
	// pinned memoizes pinned by pod index: 0 not asked yet, 1 no, 2 yes.
	pinned []int8
	// receivers are the on-demand nodes that got pods (each with the first
	// node that sent it some): they stay.
	receivers map[string]string
	// emptied are the nodes the plan empties: they receive nothing.
	emptied map[string]bool
	// onDemand are the on-demand nodes, by name, infos their NodeInfos in
	// the snapshot (nil: not there), room their room (deferred pods
	// counted; the fitter's change hook keeps it in step), at the index of
	// each in them, and podsOn their pods.
	onDemand []string
	infos    []fwk.NodeInfo
	room     []room
	at       map[string]int
	rooms    *roomIndex
	podsOn   map[string][]int32
	// displaced marks the pods of nodes that stay that the plan moves to
	// spot to make room (makeRoom).
	displaced map[int32]bool
	// movable is, by index in onDemand, what makeRoom found of the node's
	// pods that may move to spot.
	movable []movableOn
	// mayDisplace is how many pods the plan of the node at hand may
	// displace: what the saving per eviction leaves after its own pods.
	mayDisplace int
}

// consolidate is the last pass of a plan: each candidate that is not
// drainable onto spot alone, emptiest first, is planned again with on-demand
// nodes that stay as further destinations (see Consolidation). A node that
// received pods is never emptied, and an emptied node receives none. A node
// that cannot be consolidated keeps the verdict and reason of the spot-only
// passes, and gets a ConsolidationReason when consolidation had more to say.
// Consolidation needs another on-demand node and a spot node.
func (r *run) consolidate(ctx context.Context, candidates []*NodePlan, podsOf map[*NodePlan][]int32) error {
	c := &consolidation{receivers: map[string]string{}, emptied: map[string]bool{}, pinned: make([]int8, len(r.pods)),
		podsOn: make(map[string][]int32, len(candidates)), displaced: map[int32]bool{}}
	var leftover []*NodePlan
	for _, np := range candidates {
		c.onDemand = append(c.onDemand, np.Name)
		c.podsOn[np.Name] = podsOf[np]
		if np.Drainable {
			c.emptied[np.Name] = true
		} else {
			leftover = append(leftover, np)
		}
	}
	if len(leftover) == 0 || len(r.spot) == 0 {
		return nil
	}
	if len(c.onDemand) < 2 {
		for _, np := range leftover {
			np.ConsolidationReason = "no other on-demand node to send pods to"
		}
		return nil
	}
	slices.Sort(c.onDemand)
	r.destinations(c)
	r.consolidating = c
	defer func() { r.consolidating = nil }()
	for _, np := range leftover {
		if err := ctx.Err(); err != nil {
			return err
		}
		if from := c.receivers[np.Name]; from != "" {
			np.ConsolidationReason = fmt.Sprintf("receives pods from the consolidation of %s", from)
			continue
		}
		var why string
		if c.mayDisplace, why = r.worthConsolidating(ctx, np, podsOf[np]); c.mayDisplace < 0 {
			np.ConsolidationReason = why
			continue
		}
		before := *np
		before.Pods = slices.Clone(np.Pods)
		if _, err := r.planNode(ctx, np, podsOf[np]); err != nil {
			return err
		}
		if !np.Drainable {
			why := np.Reason
			*np = before
			np.ConsolidationReason = why
			continue
		}
		// The node is emptied either way; when everything fitted on spot
		// after all (rare), it is a plain drain, not a consolidation.
		c.emptied[np.Name] = true
		for i := range np.Pods {
			if np.Pods[i].OnDemand {
				if dest := np.Pods[i].Destination; c.receivers[dest] == "" {
					c.receivers[dest] = np.Name
				}
				np.Consolidated = true
			}
		}
	}
	return nil
}

// worthConsolidating reports whether a node's price justifies the evictions
// that empty it, that none of its pods blocks it, and that one of them may be
// bound to on-demand capacity (mayBeBound): it returns how many pods of other
// nodes its plan may displace on top of its own evictions (makeRoom), or -1
// when the node is not worth consolidating, with why when the spot-only
// passes did not say it all (a blocking pod, a spent budget, nothing bound to
// on-demand capacity: they did). An unknown price or a saving per eviction
// below the threshold is said before mayBeBound is asked, so also of a node
// with nothing bound to on-demand capacity: asking it of every node of a
// cluster without prices (the default configuration) would make each plan
// about half as slow again (1,000-node file: 92 – 99 ms → 151 – 161 ms).
func (r *run) worthConsolidating(ctx context.Context, np *NodePlan, idx []int32) (int, string) {
	moves := 0
	for _, j := range idx {
		switch r.facts[j].verdict.Action {
		case Move:
			moves++
			// A budget that allows nothing more refuses the node before
			// any pod is placed (budgets.take), consolidation or not.
			for _, bud := range r.facts[j].covers {
				if bud.allowed-bud.used <= 0 {
					return -1, ""
				}
			}
		case Block:
			return -1, ""
		}
	}
	least := r.opts.Consolidation.MinHourlySavingPerEviction
	switch {
	case moves == 0:
		return -1, ""
	case np.HourlyPrice <= 0:
		return -1, "the node's on-demand price is unknown (pricing.instanceTypes, or the cloud provider's prices)"
	case np.HourlyPrice/float64(moves) < least:
		return -1, fmt.Sprintf("%g per hour over %d evictions is less than planner.consolidation.minHourlySavingPerEviction (%g) each",
			np.HourlyPrice, moves, least)
	}
	for _, j := range idx {
		if r.facts[j].verdict.Action == Move && r.mayBeBound(ctx, j) {
			if least <= 0 {
				return len(r.pods), ""
			}
			// The float division may land a hair under a whole number.
			return int(math.Floor(np.HourlyPrice/least+1e-9)) - moves, ""
		}
	}
	return -1, ""
}

// pinned reports whether no spot node would ever take pod: the static
// plugins (the nodes' labels, taints and cordons against the pod's node
// selector, affinity and tolerations) reject every one. Only such pods go to
// on-demand nodes in a consolidation; a pod that could run on spot and finds
// no room there keeps its node where it is.
func (r *run) pinned(ctx context.Context, pod *corev1.Pod) bool {
	if !r.exhaustive {
		return len(r.staticFit(ctx, pod, r.templates.of(pod)).feasible) == 0
	}
	replacement := *pod
	replacement.Spec.NodeName = ""
	state := framework.NewCycleState()
	result, status, _ := r.fit.static.RunPreFilterPlugins(ctx, state, &replacement)
	if !status.IsSuccess() && !status.IsSkip() {
		return true
	}
	for i, name := range r.spot {
		if result != nil && result.NodeNames != nil && !result.NodeNames.Has(name) {
			continue
		}
		if r.fit.static.RunFilterPlugins(ctx, state, &replacement, r.spotInfo[i]).IsSuccess() {
			return false
		}
	}
	return true
}

// interPod reports whether pod has a required constraint on other pods: pod
// affinity or anti-affinity, or a DoNotSchedule spread constraint. Whether a
// spot node takes such a pod depends on the pods around, not on the node
// alone.
func interPod(pod *corev1.Pod) bool {
	if a := pod.Spec.Affinity; a != nil {
		if a.PodAffinity != nil && len(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 ||
			a.PodAntiAffinity != nil && len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
			return true
		}
	}
	for _, c := range pod.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable == corev1.DoNotSchedule {
			return true
		}
	}
	return false
}

// mayBeBound is what a consolidation asks of a pod before planning: whether
// it may turn out bound (see bound) once placed.
func (r *run) mayBeBound(ctx context.Context, j int32) bool {
	return r.pinnedAt(ctx, j) || interPod(r.pods[j])
}

// bound reports whether pod (spec.nodeName empty, its original taken off its
// node in the snapshot; orig is the original, of index j) may go to an
// on-demand node that stays: it is pinned, or it has a required constraint
// on other pods (interPod) and, as the snapshot stands, the plugins that say
// where a pod may run (constraintPlugins) reject every spot node: no spot
// node would take it however empty, as a zone spread constraint when the
// pod's zone has no spot node. A pod kept off spot by room alone is never
// bound: when spot is full, moving such pods between on-demand nodes only
// moved them back and forth.
func (r *run) bound(ctx context.Context, pod, orig *corev1.Pod, j int32) bool {
	if r.pinnedAt(ctx, j) {
		return true
	}
	if !interPod(pod) {
		return false
	}
	cyc, status := r.fit.cycleFor(ctx, pod, r.templates.of(orig))
	if status != nil {
		// PreFilter rejects the pod on every node.
		return true
	}
	for _, ni := range r.spotInfo {
		ok, err := r.fit.admits(ctx, cyc, pod, ni)
		if err != nil {
			// Without the plugins' answer the pod is not known to be
			// bound: it stays where it is.
			return false
		}
		if ok {
			return false
		}
	}
	return true
}

// pinnedAt is pinned for the pod of index j, asked once per plan.
func (r *run) pinnedAt(ctx context.Context, j int32) bool {
	memo := r.consolidating.pinned
	if memo[j] == 0 {
		memo[j] = 1
		if r.pinned(ctx, r.pods[j]) {
			memo[j] = 2
		}
	}
	return memo[j] == 2
}

// onlyClass is the one class of a consolidation's room index: every
// on-demand node.
var onlyClass = []int{0}

// destinations sets the NodeInfos, rooms and indexes of c's on-demand nodes
// (c.onDemand, sorted).
func (r *run) destinations(c *consolidation) {
	c.infos = r.fit.nodeInfos(c.onDemand)
	c.room = make([]room, len(c.onDemand))
	c.movable = make([]movableOn, len(c.onDemand))
	c.at = make(map[string]int, len(c.onDemand))
	var members []int
	for i, ni := range c.infos {
		if ni != nil {
			c.room[i] = r.fit.room(ni)
			c.at[c.onDemand[i]] = i
			members = append(members, i)
		}
	}
	c.rooms = newRoomIndex(&c.room, [][]int{members})
}

// placeOnDemand finds the best-fitting on-demand node for pod (spec.nodeName
// empty) among those that stay: not from, not emptied by the plan. It
// commits a copy bound to it and returns the node and the copy, or "" and why
// none fits, as place does for spot nodes.
func (r *run) placeOnDemand(ctx context.Context, pod, orig *corev1.Pod, res fwk.PodResource, from string) (string, string, *corev1.Pod, error) {
	c := r.consolidating
	cpu, mem := res.Resource.GetMilliCPU(), res.Resource.GetMemory()
	var cyc *cycle
	var rejected map[string]int
	tried := 0
	reject := func(why string) {
		if rejected == nil {
			rejected = map[string]int{}
		}
		rejected[why]++
	}
	// Best fit first: most pods take the first.
	for next := r.onDemandCandidates(from, cpu, mem); ; {
		cand, ok := next()
		if !ok {
			break
		}
		name := c.onDemand[cand.i]
		if cyc == nil {
			var status *fwk.Status
			if cyc, status = r.fit.cycleFor(ctx, pod, r.templates.of(orig)); status != nil {
				return "", describe(status), nil, nil
			}
		}
		tried++
		// Deferred pods join the snapshot when their node is asked.
		if err := r.fit.materializeNode(name); err != nil {
			return "", "", nil, err
		}
		if st := r.fit.filterOn(ctx, cyc, pod, c.infos[cand.i]); !st.IsSuccess() {
			reject(describe(st))
			continue
		}
		dest, why, placed := r.commit(pod, name, res)
		return dest, why, placed, nil
	}
	// Why none fits: the plugins' reasons, and the arithmetic's.
	total := tried
	for _, n := range r.staying(from) {
		if reason := n.fits(cpu, mem); reason != "" {
			reject(reason)
			total++
		}
	}
	if total == 0 {
		return "", "no other on-demand node stays", nil, nil
	}
	return "", summarize(rejected, total, "other on-demand nodes"), nil, nil
}

// onDemandCandidates returns the on-demand nodes that stay, but from, with
// room for cpu and mem, one at a time, best fit first (see better): from the
// room index, or, in exhaustive mode, by scoring every one and sorting them.
func (r *run) onDemandCandidates(from string, cpu, mem int64) func() (candidate, bool) {
	c := r.consolidating
	if r.exhaustive {
		var all []candidate
		for i, n := range r.staying(from) {
			if n.fits(cpu, mem) == "" {
				all = append(all, candidate{i, n.score(cpu, mem)})
			}
		}
		return sortedBestFirst(all)
	}
	it := c.rooms.bestFirst(onlyClass, cpu, mem)
	return func() (candidate, bool) {
		for {
			cand, ok := it.pop()
			if !ok {
				return candidate{}, false
			}
			if name := c.onDemand[cand.i]; name != from && !c.emptied[name] {
				return cand, true
			}
		}
	}
}

// staying yields the on-demand nodes that stay, but from (not emptied by the
// plan), in name order: each one's index in consolidation.onDemand and room.
func (r *run) staying(from string) iter.Seq2[int, room] {
	c := r.consolidating
	return func(yield func(int, room) bool) {
		for i, name := range c.onDemand {
			if name == from || c.emptied[name] || c.infos[i] == nil {
				continue
			}
			if !yield(i, c.room[i]) {
				return
			}
		}
	}
}

// undoAll runs undo steps, last first, and stops at the first error.
func undoAll(undo []func() error) error {
	for i := len(undo) - 1; i >= 0; i-- {
		if err := undo[i](); err != nil {
			return err
		}
	}
	return nil
}

// displacement is a pod of an on-demand node that stays (from) that a
// consolidation moves to a spot node (to), to make room there.
type displacement struct {
	j        int32
	from, to string
}

// roomMade is what makeRoom did: the node the pod went to and its copy bound
// there, the pods it displaced, and how to undo it all.
type roomMade struct {
	dest      string
	moved     *corev1.Pod
	displaced []displacement
	undo      []func() error
}

// movableOn is what makeRoom needs of the pods of an on-demand node that may
// move to spot (see makeRoom): their sizes and their total, while valid (a
// displacement from the node or its undoing makes it invalid).
type movableOn struct {
	valid    bool
	keys     []sortKey
	cpu, mem int64
}

// movableOf returns what makeRoom needs of the pods of the on-demand node of
// index i that may move to spot.
func (r *run) movableOf(ctx context.Context, i int) *movableOn {
	c := r.consolidating
	m := &c.movable[i]
	if m.valid {
		return m
	}
	m.valid, m.keys, m.cpu, m.mem = true, m.keys[:0], 0, 0
	for _, j := range c.podsOn[c.onDemand[i]] {
		if r.facts[j].verdict.Action == Move && !c.displaced[j] && !r.pinnedAt(ctx, j) && !interPod(r.pods[j]) {
			k := r.sizeKey(j)
			m.keys = append(m.keys, k)
			m.cpu, m.mem = m.cpu+k.cpu, m.mem+k.mem
		}
	}
	return m
}

// maxRoomTries bounds the on-demand nodes makeRoom tries for one pod.
const maxRoomTries = 8

// makeRoom places pod (spec.nodeName empty; it fits on no on-demand node that
// stays as they are) on an on-demand node that stays, once some of that
// node's own pods, which may run on spot, have moved to spot nodes. It tries
// the nodes that need the fewest such moves first (then the best fit, then
// the name); on each it moves the fewest pods it can (the smallest that makes
// the room, else the largest, again), each to its best-fitting spot node. The
// pods to move must have the Move verdict, not be pinned, not be moved
// already by the plan, and have no required constraint on other pods
// (interPod): the plan places a displaced pod with the drained node's pods
// taken off, but the drain evicts it, and re-checks it first, while they are
// still there; already is how many the node at hand displaced so far
// (the plan's allowance is consolidation.mayDisplace). It returns nil and why
// when no node would do.
func (r *run) makeRoom(ctx context.Context, pod, orig *corev1.Pod, res fwk.PodResource, from string, already int) (*roomMade, string, error) {
	c := r.consolidating
	most := c.mayDisplace - already
	if most <= 0 {
		return nil, "", nil
	}
	cpu, mem := res.Resource.GetMilliCPU(), res.Resource.GetMemory()
	type option struct {
		name  string
		pods  []int32
		score float64
	}
	var options []option
	var buf []sortKey
	for i, n := range r.staying(from) {
		name := c.onDemand[i]
		if n.fits(cpu, mem) == "" {
			// Room enough: the Filter plugins refused the pod there.
			continue
		}
		m := r.movableOf(ctx, i)
		// The node without every pod that may move.
		all := n
		all.usedCPU, all.usedMem, all.pods = all.usedCPU-m.cpu, all.usedMem-m.mem, all.pods-int64(len(m.keys))
		if all.fits(cpu, mem) != "" {
			continue // no choice of them makes the room
		}
		free := append(buf[:0], m.keys...)
		buf = free
		var take []int32
		for n.fits(cpu, mem) != "" && len(take) < most && len(free) > 0 {
			// The smallest pod that makes the room, else the largest (in
			// the order of sortIndexesBySize).
			k, largest := -1, 0
			for i := range free {
				f := &free[i]
				if m := n.minus(f.cpu, f.mem); m.fits(cpu, mem) == "" && (k < 0 || compareSizes(*f, free[k]) > 0) {
					k = i
				}
				if compareSizes(*f, free[largest]) < 0 {
					largest = i
				}
			}
			if k < 0 {
				k = largest
			}
			n = n.minus(free[k].cpu, free[k].mem)
			take = append(take, free[k].j)
			free = slices.Delete(free, k, k+1)
		}
		if n.fits(cpu, mem) == "" {
			options = append(options, option{name, take, n.score(cpu, mem)})
		}
	}
	if len(options) == 0 {
		return nil, "moving pods that may run on spot off the other on-demand nodes makes no room", nil
	}
	slices.SortFunc(options, func(a, b option) int {
		return cmp.Or(cmp.Compare(len(a.pods), len(b.pods)), cmp.Compare(b.score, a.score), cmp.Compare(a.name, b.name))
	})
	why := ""
	for _, o := range options[:min(len(options), maxRoomTries)] {
		made, reason, err := r.tryRoom(ctx, pod, orig, res, o.name, o.pods)
		if made != nil || err != nil {
			return made, "", err
		}
		if why == "" {
			why = fmt.Sprintf("moving %d pod(s) off %s to spot: %s", len(o.pods), o.name, reason)
		}
	}
	return nil, why, nil
}

// tryRoom moves the pods take off the on-demand node name to spot nodes and
// places pod there; it undoes what it did and says why when a pod finds no
// spot node or the pod does not fit after all.
func (r *run) tryRoom(ctx context.Context, pod, orig *corev1.Pod, res fwk.PodResource, name string, take []int32) (*roomMade, string, error) {
	c := r.consolidating
	made := &roomMade{}
	rollback := func() error { return undoAll(made.undo) }
	moved := &c.movable[c.at[name]] // what makeRoom knows of name's pods
	for _, j := range take {
		p, pres := r.pods[j], r.fit.resOf[j]
		if err := r.fit.remove(p, name); err != nil {
			return nil, "", fmt.Errorf("removing %s/%s from %s in the snapshot: %w", p.Namespace, p.Name, name, err)
		}
		c.displaced[j] = true
		moved.valid = false
		made.undo = append(made.undo, func() error {
			delete(c.displaced, j)
			moved.valid = false
			return r.fit.add(p, name, pres)
		})
	}
	for _, j := range take {
		p := r.pods[j]
		moved := *p
		moved.Spec.NodeName = ""
		to, reason, placed := r.place(ctx, &moved, p, r.fit.resOf[j])
		if to == "" {
			return nil, fmt.Sprintf("pod %s/%s: %s", p.Namespace, p.Name, reason), rollback()
		}
		made.undo = append(made.undo, func() error { return r.fit.remove(placed, to) })
		made.displaced = append(made.displaced, displacement{j: j, from: name, to: to})
	}
	if err := r.fit.materializeNode(name); err != nil {
		return nil, "", errors.Join(err, rollback())
	}
	ni := r.fit.nodeInfo(name)
	cyc, status := r.fit.cycleFor(ctx, pod, r.templates.of(orig))
	if status == nil {
		status = r.fit.filterOn(ctx, cyc, pod, ni)
	}
	if !status.IsSuccess() {
		return nil, describe(status), rollback()
	}
	dest, reason, placed := r.commit(pod, name, res)
	if dest == "" {
		return nil, reason, rollback()
	}
	made.dest, made.moved = dest, placed
	return made, "", nil
}

// FitsOnDemand reports whether pod, taken off its node, would fit on another
// on-demand node of s now: the node a consolidation would choose, or "" and
// why none fits. The drains of consolidations re-check the pods their plans
// sent to on-demand nodes with it.
func (p *Planner) FitsOnDemand(ctx context.Context, s *snapshot.Snapshot, pod *corev1.Pod) (string, string, error) {
	return p.NewResident(func(context.Context) (*snapshot.Snapshot, error) { return s, nil }).FitsOnDemand(ctx, pod)
}

// ConfigOptions are the planner options a configuration sets: the
// movability rules, the prices and consolidation. `spotter plan` and the
// controllers plan with them.
func ConfigOptions(cfg *v1alpha1.SpotterConfiguration, classifier *classify.Classifier) Options {
	o := Options{
		Rules:      Rules{AllowUnreplicated: cfg.Planner.AllowUnreplicatedPods, AllowLocalStorage: cfg.Planner.AllowLocalStorage},
		Classifier: classifier,
		Pricing:    cfg.Pricing,
	}
	c := cfg.Planner.Consolidation
	o.Consolidation.Enabled = c.Enabled != nil && *c.Enabled
	if c.MinHourlySavingPerEviction != nil {
		o.Consolidation.MinHourlySavingPerEviction = *c.MinHourlySavingPerEviction
	}
	return o
}
