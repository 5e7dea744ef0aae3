// Package plan decides which on-demand nodes can be emptied onto spot nodes
// now, where each of their pods would go, and, for every node that cannot, why.
//
// A plan is a pure function of a cluster snapshot. The fit check runs the
// kube-scheduler's own PreFilter and Filter plugins (FilterPlugins) with the
// default profile's arguments, so "fits" means what the scheduler means.
//
// The algorithm:
//
//  1. Classify every node (package classify). Only spot nodes are destinations;
//     only on-demand nodes are candidates; control-plane and excluded nodes are
//     neither.
//  2. Reserve spot capacity for Pending pods: each is placed on a spot node it
//     fits, largest first, before any candidate is considered.
//  3. Take candidates emptiest first: lowest requested share of the scarcer of
//     CPU and memory.
//  4. For each candidate, the cheap checks first: every pod's movability
//     (Rules.Check), then the PodDisruptionBudgets (budgets are shared across
//     the whole plan), then whether each movable pod passes the static plugins
//     on some spot node with room for it now. Then its movable pods are placed
//     largest first. Destinations are chosen by best fit: the spot node that
//     would be the most requested, in its scarcer resource, after the
//     placement, among those the Filter plugins accept (ties by name). Each
//     placement is committed to the snapshot, so later pods and later nodes see
//     the used capacity and the new affinity and spread state. A node stops at
//     its first pod that cannot move, and its placements are undone.
//
// The shortcuts that make this fast (templates, kept PreFilter states, views,
// classes of spot nodes) never change an answer; docs/planner.md describes
// them, and TestShortcutsChangeNoAnswer compares the planner with the
// exhaustive one on random clusters.
package plan

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"spotter.dev/spotter/internal/classify"
	"spotter.dev/spotter/internal/cloud"
	"spotter.dev/spotter/internal/snapshot"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// InstanceTypeLabel names a node's instance type, used for prices.
const InstanceTypeLabel = "node.kubernetes.io/instance-type"

// Options configure a Planner.
type Options struct {
	// Rules are the movability rules.
	Rules Rules
	// Classifier sorts nodes; nil uses the built-in rules only.
	Classifier *classify.Classifier
	// Pricing, when it has prices, lets the plan estimate the hourly saving.
	Pricing v1alpha1.PricingConfig
	// Instances, when set, is the cloud provider's answer for the nodes, by
	// name: each node's group, and its instance type and price where the
	// provider knows them (they win over the node's label and Pricing).
	Instances map[string]cloud.Instance
	// Consolidation, when enabled, plans on-demand nodes whose pods do not all
	// fit on spot: those that do not go to on-demand nodes that stay.
	Consolidation Consolidation
}

// Plan is the planner's answer. Its JSON form is a contract (`spotter plan -o
// json`): the fields named in the issue keep their names.
type Plan struct {
	Nodes   []NodePlan `json:"nodes"`
	Summary Summary    `json:"summary"`
}

// Summary totals a plan.
type Summary struct {
	Nodes          int `json:"nodes"`
	SpotNodes      int `json:"spotNodes"`
	OnDemandNodes  int `json:"onDemandNodes"`
	DrainableNodes int `json:"drainableNodes"`
	// ConsolidatedNodes counts the drainable nodes whose plan sends some pods
	// to on-demand nodes that stay (Consolidation).
	ConsolidatedNodes int `json:"consolidatedNodes,omitempty"`
	// PodsToMove is the number of evictions the drainable nodes need, the
	// pods their consolidations displace included.
	PodsToMove int `json:"podsToMove"`
	// PendingReserved counts Pending pods for which spot capacity was set aside.
	PendingReserved int `json:"pendingReserved"`
	// HourlySaving is the on-demand price of the drainable nodes, when prices are
	// configured for their instance types.
	HourlySaving float64 `json:"hourlySaving,omitempty"`
	Currency     string  `json:"currency,omitempty"`
	// Warnings lists inconsistencies found, such as a control plane on spot
	// (and, from spotter plan, SpreadWarnings).
	Warnings []string `json:"warnings,omitempty"`
}

// NodePlan is the verdict on one node.
type NodePlan struct {
	Name        string         `json:"name"`
	Class       classify.Class `json:"class"`
	ClassReason string         `json:"classReason"`
	Warning     string         `json:"warning,omitempty"`
	// Drainable is true for an on-demand node whose pods can all move to spot,
	// or, when Consolidated, to spot and to on-demand nodes that stay.
	Drainable bool `json:"drainable"`
	// Consolidated is true for a drainable node whose plan sends some pods to
	// on-demand nodes that stay (see Consolidation).
	Consolidated bool `json:"consolidated,omitempty"`
	// Reason says why a candidate is not drainable, or why a node is no
	// candidate at all.
	Reason string `json:"reason"`
	// ConsolidationReason says, of a candidate drainable neither onto spot
	// nor by a consolidation, why consolidation did not empty it, when
	// Reason does not say it all: its attempt's own reason (a pinned pod no
	// on-demand node that stays takes, say), a saving per eviction below the
	// threshold, an unknown price, or that the node receives another
	// consolidation's pods.
	ConsolidationReason string `json:"consolidationReason,omitempty"`
	// PodCount is the number of pods bound to the node (any class).
	PodCount int `json:"podCount"`
	// Pods lists the pods of candidate nodes with their destination or reason.
	Pods []PodPlan `json:"pods"`
	// Displaced lists the pods of other on-demand nodes, which stay, that a
	// consolidation moves to spot to make room there for this node's pods
	// that must stay on on-demand capacity (each with its node in From). They
	// are evicted in this node's drain, in waves before the pods that need
	// their room.
	Displaced []PodPlan `json:"displaced,omitempty"`
	// Waves is the number of waves the drain of a drainable node takes (see
	// PodPlan.Wave): 1 unless a PodDisruptionBudget spreads its pods.
	Waves             int    `json:"waves,omitempty"`
	CPURequested      int64  `json:"cpuRequestedMilli"`
	CPUAllocatable    int64  `json:"cpuAllocatableMilli"`
	MemoryRequested   int64  `json:"memoryRequestedBytes"`
	MemoryAllocatable int64  `json:"memoryAllocatableBytes"`
	InstanceType      string `json:"instanceType,omitempty"`
	// NodeGroup is the node group of the node's instance, when the
	// configuration names a cloud provider that knows it.
	NodeGroup   string  `json:"nodeGroup,omitempty"`
	HourlyPrice float64 `json:"hourlyPrice,omitempty"`
}

// OnDemandPods returns the pods a consolidation sends to on-demand nodes that
// stay, by namespace/name.
func (n *NodePlan) OnDemandPods() map[string]bool {
	out := map[string]bool{}
	for _, p := range n.Pods {
		if p.OnDemand {
			out[p.Namespace+"/"+p.Name] = true
		}
	}
	return out
}

// OnDemandDestinations returns the on-demand nodes that stay to which the
// node's consolidation sends pods, in the order of its pods.
func (n *NodePlan) OnDemandDestinations() []string {
	var out []string
	for _, p := range n.Pods {
		if p.OnDemand && p.Destination != "" && !slices.Contains(out, p.Destination) {
			out = append(out, p.Destination)
		}
	}
	return out
}

// PodWaves returns the wave of each pod the node's drain evicts, its own and
// those it displaces, by namespace/name (drain.Request.Waves).
func (n *NodePlan) PodWaves() map[string]int {
	out := map[string]int{}
	for _, p := range append(n.Pods[:len(n.Pods):len(n.Pods)], n.Displaced...) {
		if p.Action == actionNames[Move] && p.Wave > 0 {
			out[p.Namespace+"/"+p.Name] = p.Wave
		}
	}
	return out
}

// DisplacedPods returns the node of each pod the node's drain displaces
// (Displaced), by namespace/name (drain.Request.Displaced).
func (n *NodePlan) DisplacedPods() map[string]string {
	if len(n.Displaced) == 0 {
		return nil
	}
	out := make(map[string]string, len(n.Displaced))
	for _, p := range n.Displaced {
		out[p.Namespace+"/"+p.Name] = p.From
	}
	return out
}

// Evictions is the number of pods the node's drain evicts: its own pods that
// move, and those it displaces.
func (n *NodePlan) Evictions() int {
	count := len(n.Displaced)
	for _, p := range n.Pods {
		if p.Action == actionNames[Move] {
			count++
		}
	}
	return count
}

// PodPlan is the verdict on one pod of a candidate node.
type PodPlan struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Action is move, ignore, wait or block.
	Action string `json:"action"`
	// Destination is the node the pod would go to (drainable nodes only): a
	// spot node, or an on-demand node that stays when OnDemand.
	Destination string `json:"destination"`
	// From is the node of a displaced pod (NodePlan.Displaced): an on-demand
	// node that stays.
	From string `json:"from,omitempty"`
	// OnDemand is true when Destination is an on-demand node (a
	// consolidation).
	OnDemand bool `json:"onDemand,omitempty"`
	// Reason explains why the pod does not move, or cannot.
	Reason string `json:"reason"`
	// Wave is when the pod moves in the node's drain, from 1 (drainable nodes
	// only): a PodDisruptionBudget that allows fewer disruptions at once than
	// the node needs spreads its pods over waves, each evicted once the
	// previous wave's replacements are Ready.
	Wave int `json:"wave,omitempty"`
}

// Action names in PodPlan.
var actionNames = map[Action]string{Ignore: "ignore", Wait: "wait", Move: "move", Block: "block"}

// Planner computes plans.
type Planner struct {
	opts Options
	// exhaustive turns every shortcut off: each pod's PreFilter runs afresh
	// over the whole snapshot with every plugin, and every Filter plugin runs
	// on every spot node with room. Tests compare it with the shortcuts.
	exhaustive bool
	// oneWave keeps the rule before waves (a budget must allow all of a
	// node's pods at once), for the benchmark that compares the two.
	oneWave bool

	// last is the last plan of a snapshot with a Revision.
	mu   sync.Mutex
	last struct {
		revision    string
		nodes, pods int
		plan        *Plan
	}
	// shapes is what the last plan learnt of which pods share a template
	// (see shapes), known its bound pods' PodInfos (see knownPods) and
	// built its destination nodes' NodeInfos (see builtNodes). Plans only
	// read them, and each publishes its own when it ends.
	shapes *shapes
	known  knownPods
	built  builtNodes
}

// Classify returns a node's class as the planner sees it.
func (p *Planner) Classify(node *corev1.Node) classify.Result {
	return p.opts.Classifier.Classify(node)
}

// New returns a planner.
func New(opts Options) *Planner {
	if opts.Classifier == nil {
		opts.Classifier = &classify.Classifier{}
	}
	return &Planner{opts: opts}
}

// run is the state of one planning run.
type run struct {
	*Planner
	fit      *fitter
	budgets  *budgets
	spot     []string       // destination nodes, by name
	spotInfo []fwk.NodeInfo // their NodeInfos, in the same order
	room     []room         // and their room, in the same order
	spotAt   map[string]int // the index of each spot node
	// classes groups the spot nodes the static plugins cannot tell apart;
	// singles has one group per spot node (see staticFit).
	classes, singles [][]int
	// rooms indexes the spot nodes of each class by fill.
	rooms     *roomIndex
	templates *templates
	// cands and sortKeys are buffers of place and sortIndexesBySize.
	cands    []candidate
	sortKeys []sortKey

	// pods are the snapshot's pods; facts holds, for those of candidate
	// nodes, what learn found (the others are zero).
	pods  []*corev1.Pod
	facts []podFacts
	// consolidating, during the consolidation pass, lets pods that fit no
	// spot node go to on-demand nodes that stay.
	consolidating *consolidation
}

// podFacts is what the plan needs of a pod of a candidate node.
type podFacts struct {
	verdict Movability
	// covers are the disruption budgets covering a movable pod.
	covers []*budget
}

// learn returns, for the pods of candidate nodes (candidate is indexed like the
// snapshot's nodes), their movability and the budgets covering them, in one
// pass over the pods in the order they sit in memory. It only reads rules,
// budgets and s.
func learn(rules Rules, budgets *budgets, s *snapshot.Snapshot, g grouped, candidate []bool) []podFacts {
	facts := make([]podFacts, len(s.Pods))
	for j, pod := range s.Pods {
		if i := g.nodeOf[j]; i < 0 || !candidate[i] {
			continue
		}
		f := &facts[j]
		f.verdict = rules.Check(pod)
		if f.verdict.Action == Move {
			f.covers = budgets.covering(pod)
		}
	}
	return facts
}

// podSize is a pod's CPU (millicores) and memory (bytes) requests.
type podSize struct{ cpu, mem int64 }

// Plan computes a plan for s. It does not modify s. A plan is a function of
// the snapshot alone: for a snapshot with the Revision of the last one (and as
// many nodes and pods) it returns the last plan, which callers share and must
// not modify.
func (p *Planner) Plan(ctx context.Context, s *snapshot.Snapshot) (*Plan, error) {
	if s.Revision == "" {
		return p.plan(ctx, s)
	}
	p.mu.Lock()
	last := p.last
	p.mu.Unlock()
	if last.plan != nil && last.revision == s.Revision && last.nodes == len(s.Nodes) && last.pods == len(s.Pods) {
		return last.plan, nil
	}
	out, err := p.plan(ctx, s)
	if err == nil {
		p.mu.Lock()
		p.last.revision, p.last.nodes, p.last.pods, p.last.plan = s.Revision, len(s.Nodes), len(s.Pods), out
		p.mu.Unlock()
	}
	return out, err
}

func (p *Planner) plan(ctx context.Context, s *snapshot.Snapshot) (*Plan, error) {
	g := groupPods(s)
	r, classes, err := p.newRun(ctx, s, g)
	if err != nil {
		return nil, err
	}
	defer func() {
		p.mu.Lock()
		p.shapes, p.known, p.built = r.templates.next, r.fit.known, r.fit.built
		p.mu.Unlock()
	}()
	pending := g.pending

	out := &Plan{}
	var candidates []*NodePlan
	var others []*NodePlan
	podsOf := make(map[*NodePlan][]int32, len(s.Nodes))
	for i, node := range s.Nodes {
		c := classes[node.Name]
		np := &NodePlan{
			Name: node.Name, Class: c.Class, ClassReason: c.Reason, Warning: c.Warning,
			CPUAllocatable:    node.Status.Allocatable.Cpu().MilliValue(),
			MemoryAllocatable: node.Status.Allocatable.Memory().Value(),
			InstanceType:      node.Labels[InstanceTypeLabel],
		}
		inst, known := p.opts.Instances[node.Name]
		if known && inst.InstanceType != "" {
			np.InstanceType = inst.InstanceType
		}
		if price, ok := p.opts.Pricing.InstanceTypes[np.InstanceType]; ok {
			np.HourlyPrice = price.OnDemand
			if c.Class == classify.Spot {
				np.HourlyPrice = price.Spot
			}
		}
		if known {
			np.NodeGroup = inst.NodeGroup
			if inst.PriceKnown {
				np.HourlyPrice = inst.PricePerHour
			}
		}
		np.PodCount = len(g.byNode[i])
		podsOf[np] = g.byNode[i]
		size := r.fit.requested[node.Name]
		np.CPURequested, np.MemoryRequested = size.cpu, size.mem
		if c.Warning != "" {
			out.Summary.Warnings = append(out.Summary.Warnings, node.Name+": "+c.Warning)
		}
		switch c.Class {
		case classify.Spot:
			out.Summary.SpotNodes++
			np.Reason = "spot node: a destination"
			others = append(others, np)
		case classify.OnDemand:
			out.Summary.OnDemandNodes++
			candidates = append(candidates, np)
		default:
			np.Reason = fmt.Sprintf("%s node: never drained", c.Class)
			others = append(others, np)
		}
	}
	out.Summary.Nodes = len(s.Nodes)

	// Pending pods get first call on spot capacity.
	r.sortBySize(pending)
	for _, pod := range pending {
		if dest, _, _ := r.place(ctx, pod, pod, r.resource(pod)); dest != "" {
			out.Summary.PendingReserved++
		}
	}

	sort.SliceStable(candidates, func(i, j int) bool {
		si, sj := share(candidates[i]), share(candidates[j])
		if si != sj {
			return si < sj
		}
		return candidates[i].Name < candidates[j].Name
	})
	// Nodes that would drain in waves are planned after all the others: a
	// drain in waves holds its budgets' disruptions for longer, and planning
	// them last never takes a budget from a node that drains at once.
	r.budgets.oneWave = true
	var inWaves []*NodePlan
	for _, np := range candidates {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		needsWaves, err := r.planNode(ctx, np, podsOf[np])
		if err != nil {
			return nil, err
		}
		if needsWaves && !p.oneWave {
			inWaves = append(inWaves, np)
		}
	}
	r.budgets.oneWave = false
	for _, np := range inWaves {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if _, err := r.planNode(ctx, np, podsOf[np]); err != nil {
			return nil, err
		}
	}
	// Consolidations come last: they never take a budget or spot capacity
	// from a node that drains onto spot alone.
	if p.opts.Consolidation.Enabled {
		if err := r.consolidate(ctx, candidates, podsOf); err != nil {
			return nil, err
		}
	}
	for _, np := range candidates {
		if np.Drainable {
			out.Summary.DrainableNodes++
			if np.Consolidated {
				out.Summary.ConsolidatedNodes++
			}
			out.Summary.HourlySaving += np.HourlyPrice
			out.Summary.PodsToMove += np.Evictions()
		}
	}
	if out.Summary.HourlySaving > 0 {
		out.Summary.Currency = p.opts.Pricing.Currency
	}

	sort.SliceStable(others, func(i, j int) bool {
		if others[i].Class != others[j].Class {
			return others[i].Class < others[j].Class
		}
		return others[i].Name < others[j].Name
	})
	for _, np := range append(candidates, others...) {
		if np.Pods == nil {
			np.Pods = []PodPlan{}
		}
		out.Nodes = append(out.Nodes, *np)
	}
	return out, nil
}

// grouped holds the pods of a snapshot by node.
type grouped struct {
	// byNode holds the pods bound to each node (indexes into the snapshot's
	// pods), in the order of the snapshot's nodes; pods bound to nodes not in
	// the snapshot are left out.
	byNode [][]int32
	// pending are the pods waiting to be scheduled: not bound, not
	// terminated, not terminating, not gated.
	pending []*corev1.Pod
	// nodeOf is the index of each pod's node in the snapshot's nodes, in the
	// order of its pods, or -1. Passes over every pod go in that order: the
	// pods were decoded in it, so it is the order they sit in memory.
	nodeOf []int32
}

func groupPods(s *snapshot.Snapshot) grouped {
	at := make(map[string]int, len(s.Nodes))
	for i, n := range s.Nodes {
		at[n.Name] = i
	}
	g := grouped{byNode: make([][]int32, len(s.Nodes)), nodeOf: make([]int32, len(s.Pods))}
	// Each pod's node, half of them on the other core.
	find := func(lo, hi int) {
		for j := lo; j < hi; j++ {
			g.nodeOf[j] = -1
			if name := s.Pods[j].Spec.NodeName; name != "" {
				if i, ok := at[name]; ok {
					g.nodeOf[j] = int32(i)
				}
			}
		}
	}
	half := len(s.Pods) / 2
	done := make(chan struct{})
	go func() {
		find(half, len(s.Pods))
		close(done)
	}()
	find(0, half)
	<-done
	for j, pod := range s.Pods {
		switch {
		case g.nodeOf[j] >= 0:
			g.byNode[g.nodeOf[j]] = append(g.byNode[g.nodeOf[j]], int32(j))
		case pod.Spec.NodeName != "" || terminal(pod) || pod.DeletionTimestamp != nil:
		case len(pod.Spec.SchedulingGates) == 0:
			g.pending = append(g.pending, pod)
		}
	}
	return g
}

// newRun classifies the nodes of s and builds the fit engine over it; g
// holds the pods of s by node.
func (p *Planner) newRun(ctx context.Context, s *snapshot.Snapshot, g grouped) (*run, map[string]classify.Result, error) {
	classes := make(map[string]classify.Result, len(s.Nodes))
	for _, node := range s.Nodes {
		classes[node.Name] = p.opts.Classifier.Classify(node)
	}
	bud := newBudgets(s.PDBs)
	// What the candidates' pods need does not depend on the scheduler
	// snapshot: learn it on the other core while the snapshot is built.
	candidate := make([]bool, len(s.Nodes))
	for i, node := range s.Nodes {
		candidate[i] = classes[node.Name].Class == classify.OnDemand
	}
	facts := make(chan []podFacts, 1)
	go func() { facts <- learn(p.opts.Rules, bud, s, g, candidate) }()
	p.mu.Lock()
	known, built := p.known, p.built
	p.mu.Unlock()
	fit, err := newFitter(ctx, s, g.nodeOf, func(node string) bool { return classes[node].Class == classify.Spot }, known, built)
	learned := <-facts
	if err != nil {
		return nil, nil, err
	}
	fit.exhaustive = p.exhaustive
	if p.exhaustive {
		if err := fit.materialize(); err != nil {
			return nil, nil, err
		}
	}
	p.mu.Lock()
	prev := p.shapes
	p.mu.Unlock()
	r := &run{Planner: p, fit: fit, budgets: bud, templates: newTemplates(prev, len(s.Pods)), pods: s.Pods, facts: learned}
	for _, node := range s.Nodes {
		if classes[node.Name].Class == classify.Spot {
			r.spot = append(r.spot, node.Name)
		}
	}
	slices.Sort(r.spot)
	spotNodes := make([]*corev1.Node, len(r.spot))
	for i, name := range r.spot {
		ni := fit.nodeInfo(name)
		r.spotInfo = append(r.spotInfo, ni)
		spotNodes[i] = ni.Node()
		r.singles = append(r.singles, []int{i})
	}
	r.classes = nodeClasses(spotNodes)
	r.room = make([]room, len(r.spot))
	r.spotAt = make(map[string]int, len(r.spot))
	for i, ni := range r.spotInfo {
		r.room[i] = roomOf(ni)
		r.spotAt[r.spot[i]] = i
	}
	r.rooms = newRoomIndex(&r.room, r.classes)
	fit.onChange = func(node string) {
		if i, ok := r.spotAt[node]; ok {
			r.room[i] = roomOf(r.spotInfo[i])
			r.rooms.update(i)
		} else if c := r.consolidating; c != nil {
			if i, ok := c.at[node]; ok {
				c.room[i] = fit.room(c.infos[i])
				c.rooms.update(i)
			}
		}
	}
	return r, classes, nil
}

// FitsOnSpot reports whether pod, taken off its node, would fit on a spot node
// of s now: the spot node the plan would choose, or "" and why none fits. The
// drains ask it before each eviction (through a Resident), because the cluster
// changes while a node drains.
func (p *Planner) FitsOnSpot(ctx context.Context, s *snapshot.Snapshot, pod *corev1.Pod) (string, string, error) {
	return p.NewResident(func(context.Context) (*snapshot.Snapshot, error) { return s, nil }).FitsOnSpot(ctx, pod)
}

// refuseUnfit turns an answer of fits into a drain.Request.BeforeEvict hook:
// an error when the pod fits nowhere.
func refuseUnfit(fits func(context.Context, *corev1.Pod) (string, string, error), where string) func(context.Context, *corev1.Pod) error {
	return func(ctx context.Context, pod *corev1.Pod) error {
		dest, reason, err := fits(ctx, pod)
		if err != nil {
			return err
		}
		if dest == "" {
			return fmt.Errorf("no longer fits on %s: %s", where, reason)
		}
		return nil
	}
}

// share is a node's requested share of its scarcer resource.
func share(np *NodePlan) float64 {
	return max(ratio(np.CPURequested, np.CPUAllocatable), ratio(np.MemoryRequested, np.MemoryAllocatable))
}

func ratio(a, b int64) float64 {
	if b <= 0 {
		return 1
	}
	return float64(a) / float64(b)
}

// planNode decides one candidate and commits its placements if it is drainable.
// The cheap checks come first and stop the node at its first pod that cannot
// move: movability, the disruption budgets, then for each pod whether any spot
// node passes the static plugins and has room for it now (placing the node's
// other pods only takes room away). Only then are the pods placed one by one.
// It reports whether the budgets refused the node only because it would need
// waves (budgets.oneWave); it may then be planned again.
func (r *run) planNode(ctx context.Context, np *NodePlan, idx []int32) (needsWaves bool, err error) {
	np.Reason, np.Waves, np.Displaced = "", 0, nil
	var movable, others []int32
	for _, j := range idx {
		v := r.facts[j].verdict
		if v.Action == Move {
			movable = append(movable, j)
		} else {
			others = append(others, j)
		}
		if v.Action == Block && np.Reason == "" {
			np.Reason = fmt.Sprintf("pod %s/%s: %s", r.pods[j].Namespace, r.pods[j].Name, v.Reason)
		}
	}
	// The list: movable pods first, in placement order (largest first), then
	// the others by name.
	r.sortIndexesBySize(movable)
	slices.SortFunc(others, func(a, b int32) int {
		pa, pb := r.pods[a], r.pods[b]
		return cmp.Or(strings.Compare(pa.Namespace, pb.Namespace), strings.Compare(pa.Name, pb.Name))
	})
	np.Pods = make([]PodPlan, 0, len(idx))
	for _, j := range movable {
		np.Pods = append(np.Pods, PodPlan{Namespace: r.pods[j].Namespace, Name: r.pods[j].Name, Action: actionNames[Move]})
	}
	for _, j := range others {
		v := r.facts[j].verdict
		np.Pods = append(np.Pods, PodPlan{Namespace: r.pods[j].Namespace, Name: r.pods[j].Name, Action: actionNames[v.Action], Reason: v.Reason})
	}
	// plans[i] is the PodPlan of movable[i].
	plans := np.Pods[:len(movable)]
	defer func() {
		if np.Drainable {
			return
		}
		for i := range plans {
			if plans[i].Reason == "" {
				plans[i].Reason = "not moved: the node is blocked by another pod"
			}
		}
	}()

	if np.Reason != "" {
		return false, nil
	}
	covers := make([][]*budget, len(movable))
	for i, j := range movable {
		covers[i] = r.facts[j].covers
	}
	d := r.budgets.take(covers, nil)
	if d.blocked >= 0 {
		pod := r.pods[movable[d.blocked]]
		np.Reason = fmt.Sprintf("pod %s/%s: %s", pod.Namespace, pod.Name, d.reason)
		plans[d.blocked].Reason = d.reason
		return d.needsWaves, nil
	}
	fail := func(i int, reason string) {
		pod := r.pods[movable[i]]
		np.Reason = fmt.Sprintf("pod %s/%s: %s", pod.Namespace, pod.Name, reason)
		plans[i].Reason = reason
		r.budgets.give(d.taken)
	}
	replacement := func(pod *corev1.Pod) *corev1.Pod {
		r := *pod
		r.Spec.NodeName = ""
		return &r
	}
	for i, j := range movable {
		pod, res := r.pods[j], r.fit.resOf[j]
		if !r.mayFit(ctx, pod, res) && (r.consolidating == nil || !r.mayBeBound(ctx, j)) {
			// place fails too, and says why.
			_, reason, _ := r.place(ctx, replacement(pod), pod, res)
			fail(i, reason)
			return false, nil
		}
	}

	// The node's movable pods leave it; then each must find a spot node.
	var undo []func() error
	rollback := func() error { return undoAll(undo) }
	for _, j := range movable {
		pod, res := r.pods[j], r.fit.resOf[j]
		if err := r.fit.remove(pod, np.Name); err != nil {
			return false, fmt.Errorf("removing %s/%s from %s in the snapshot: %w", pod.Namespace, pod.Name, np.Name, err)
		}
		undo = append(undo, func() error { return r.fit.add(pod, np.Name, res) })
	}
	// displaced are the pods of on-demand nodes that stay that a
	// consolidation moves to spot, to make room for the pods whose follow is
	// set.
	var displaced []displacement
	follow := make([]bool, len(movable))
	unplan := func(n int) {
		for j := range plans[:n] {
			plans[j].Destination, plans[j].OnDemand = "", false
		}
	}
	// placed are the copies the plan bound to their destinations.
	placed := make([]*corev1.Pod, len(movable))
	for i, j := range movable {
		// One copy for every question: none of them modifies it.
		pod, rep := r.pods[j], replacement(r.pods[j])
		dest, reason, moved := r.place(ctx, rep, pod, r.fit.resOf[j])
		if dest == "" && r.consolidating != nil && r.bound(ctx, rep, pod, j) {
			var why string
			var err error
			if dest, why, moved, err = r.placeOnDemand(ctx, rep, pod, r.fit.resOf[j], np.Name); err != nil {
				return false, errors.Join(err, rollback())
			}
			if dest == "" {
				made, whyNot, err := r.makeRoom(ctx, rep, pod, r.fit.resOf[j], np.Name, len(displaced))
				if err != nil {
					return false, err
				}
				if made == nil {
					reason += "; " + why
					if whyNot != "" {
						reason += "; " + whyNot
					}
				} else {
					dest, moved = made.dest, made.moved
					displaced = append(displaced, made.displaced...)
					undo = append(undo, made.undo...)
					follow[i] = true
				}
			}
			plans[i].OnDemand = dest != ""
		}
		if dest == "" {
			fail(i, reason)
			unplan(i)
			return false, rollback()
		}
		plans[i].Destination = dest
		placed[i] = moved
		undo = append(undo, func() error { return r.fit.remove(moved, dest) })
	}
	waves := d.waves
	if len(displaced) > 0 {
		// The displaced pods draw on their budgets too, and go first. Every
		// pod sent to a node they leave goes after them, not only those that
		// made room: a later one may have been placed in what was left of
		// that room (a lab replay of a simulated drain was rolled back when
		// such a pod, in the first wave, was re-checked before the displaced
		// pod had gone).
		left := map[string]bool{}
		for _, m := range displaced {
			left[m.from] = true
		}
		for i := range plans {
			follow[i] = follow[i] || plans[i].OnDemand && left[plans[i].Destination]
		}
		r.budgets.give(d.taken)
		all := make([][]*budget, 0, len(displaced)+len(covers))
		for _, m := range displaced {
			all = append(all, r.facts[m.j].covers)
		}
		all = append(all, covers...)
		order := &after{lead: len(displaced), follow: append(make([]bool, len(displaced)), follow...)}
		if d = r.budgets.take(all, order); d.blocked >= 0 {
			if i := d.blocked - len(displaced); i >= 0 {
				fail(i, d.reason)
			} else {
				pod := r.pods[displaced[d.blocked].j]
				np.Reason = fmt.Sprintf("pod %s/%s on %s, which would make room for this node's pods: %s", pod.Namespace, pod.Name, displaced[d.blocked].from, d.reason)
			}
			unplan(len(plans))
			return false, rollback()
		}
		for k, m := range displaced {
			pod := r.pods[m.j]
			np.Displaced = append(np.Displaced, PodPlan{Namespace: pod.Namespace, Name: pod.Name, Action: actionNames[Move], Destination: m.to, From: m.from, Wave: int(d.waves[k])})
			np.Waves = max(np.Waves, int(d.waves[k]))
		}
		waves = d.waves[len(displaced):]
	}
	if r.consolidating != nil {
		i, why, err := r.scheduledInWaves(ctx, np.Name, movable, plans, placed, waves)
		if err != nil {
			return false, errors.Join(err, rollback())
		}
		if i >= 0 {
			fail(i, why)
			np.Displaced, np.Waves = nil, 0
			unplan(len(plans))
			return false, rollback()
		}
	}
	np.Drainable = true
	for i := range plans {
		plans[i].Wave = int(waves[i])
		np.Waves = max(np.Waves, int(waves[i]))
	}
	return false, nil
}

// scheduledInWaves checks a consolidation's pods that go to on-demand nodes
// that stay (plans[i].OnDemand, bound by the plan at placed[i]) as the
// drain will have them placed: wave by wave, each where the scheduler's
// scores put it (ScorePick), not where the plan's best fit put it. The
// scheduler spreads them over the emptiest nodes; in room that is tight in
// CPU on some nodes and in memory on others, a pod of a later wave can then
// find no node left, and the drain would stop at its re-check with the earlier
// waves evicted. It returns the index of the first pod that finds no node
// and why, or -1. It leaves the snapshot as it found it.
func (r *run) scheduledInWaves(ctx context.Context, from string, movable []int32, plans []PodPlan, placed []*corev1.Pod, waves []int32) (int, string, error) {
	var order []int
	for i := range plans {
		if plans[i].OnDemand {
			order = append(order, i)
		}
	}
	// Pods of one wave go at once: their replacements are placed after
	// every one of them has passed its re-check.
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(waves[a], waves[b]) })
	if len(order) < 2 || waves[order[0]] == waves[order[len(order)-1]] {
		return -1, "", nil
	}
	c := r.consolidating
	var undo []func() error
	restore := func() error { return undoAll(undo) }
	for _, i := range order {
		p, dest, res := placed[i], plans[i].Destination, r.fit.resOf[movable[i]]
		if err := r.fit.remove(p, dest); err != nil {
			return -1, "", errors.Join(err, restore())
		}
		undo = append(undo, func() error { return r.fit.add(p, dest, res) })
	}
	// feasible returns the on-demand nodes that stay on which the filter
	// plugins accept a replacement of the pod of index i, the first most of
	// them (all: most < 0).
	feasible := func(i, most int) (*corev1.Pod, []fwk.NodeInfo, []string, error) {
		j := movable[i]
		pod, res := r.pods[j], r.fit.resOf[j]
		rep := *pod
		rep.Spec.NodeName = ""
		cyc, status := r.fit.cycleFor(ctx, &rep, r.templates.of(pod))
		if status != nil {
			return &rep, nil, nil, nil
		}
		var infos []fwk.NodeInfo
		var names []string
		for k, n := range r.staying(from) {
			if len(infos) == most {
				break
			}
			if n.fits(res.Resource.GetMilliCPU(), res.Resource.GetMemory()) != "" {
				continue
			}
			name := c.onDemand[k]
			if err := r.fit.materializeNode(name); err != nil {
				return nil, nil, nil, err
			}
			if r.fit.filterOn(ctx, cyc, &rep, c.infos[k]).IsSuccess() {
				infos, names = append(infos, c.infos[k]), append(names, name)
			}
		}
		return &rep, infos, names, nil
	}
	// The pods before a pod in the order take one node each: when more
	// nodes than that take it with all of them gone, some node is left for
	// it wherever they go. Only tight room needs the scheduler's choices
	// played out. (A constraint on other pods could let one pod shut
	// several nodes: such pods are always played out.)
	loose := true
	for t, i := range order {
		if interPod(r.pods[movable[i]]) {
			loose = false
			break
		}
		_, infos, _, err := feasible(i, t+1)
		if err != nil {
			return -1, "", errors.Join(err, restore())
		}
		if len(infos) <= t {
			loose = false
			break
		}
	}
	if loose {
		return -1, "", restore()
	}
	for _, i := range order {
		res := r.fit.resOf[movable[i]]
		rep, infos, names, err := feasible(i, -1)
		if err != nil {
			return -1, "", errors.Join(err, restore())
		}
		if len(infos) == 0 {
			return i, fmt.Sprintf("fits on no on-demand node once the scheduler has placed the pods of the waves before it (wave %d) where its scores put them", waves[i]), restore()
		}
		name := names[ScorePick(rep, infos)]
		_, why, bound := r.commit(rep, name, res)
		if bound == nil {
			return -1, "", errors.Join(errors.New(why), restore())
		}
		undo = append(undo, func() error { return r.fit.remove(bound, name) })
	}
	return -1, "", restore()
}

// mayFit reports whether some spot node passes the static plugins for a
// replacement of pod and has room for it now. When it returns false, place
// fails.
func (r *run) mayFit(ctx context.Context, pod *corev1.Pod, podRes fwk.PodResource) bool {
	if r.exhaustive {
		return true
	}
	st := r.staticFit(ctx, pod, r.templates.of(pod))
	res := podRes.Resource
	for _, group := range st.feasible {
		for _, i := range group {
			if r.room[i].fits(res.GetMilliCPU(), res.GetMemory()) == "" {
				return true
			}
		}
	}
	return false
}

// room is a spot node's allocatable and requested CPU, memory and pod count,
// as its NodeInfo has them, kept in step by the fitter's change hook: the
// placement loop reads it for every spot node, and NodeInfo's accessors cost
// an interface call and a copy each.
type room struct {
	allocCPU, allocMem, allocPods int64
	usedCPU, usedMem, pods        int64
}

func roomOf(ni fwk.NodeInfo) room {
	alloc, used := ni.GetAllocatable(), ni.GetRequested()
	return room{
		allocCPU: alloc.GetMilliCPU(), allocMem: alloc.GetMemory(), allocPods: int64(alloc.GetAllowedPodNumber()),
		usedCPU: used.GetMilliCPU(), usedMem: used.GetMemory(), pods: int64(len(ni.GetPods())),
	}
}

// fits does NodeResourcesFit's arithmetic for the pod count, CPU and memory,
// so that nodes it would reject are skipped without running the plugins; it
// returns the plugin's reason, or "" when the pod fits. As the plugin, it
// checks a resource only when the pod requests some: a node whose requests
// exceed its allocatable still takes pods that request none of it.
func (n *room) fits(cpu, mem int64) string {
	switch {
	case n.pods+1 > n.allocPods:
		return "NodeResourcesFit: Too many pods"
	case cpu > 0 && cpu > n.allocCPU-n.usedCPU:
		return "NodeResourcesFit: Insufficient cpu"
	case mem > 0 && mem > n.allocMem-n.usedMem:
		return "NodeResourcesFit: Insufficient memory"
	}
	return ""
}

// minus is the node's room once a pod that requests cpu and mem has left it.
func (n room) minus(cpu, mem int64) room {
	n.usedCPU -= cpu
	n.usedMem -= mem
	n.pods--
	return n
}

// score is the best-fit score of a pod on the node: the requested share of
// the scarcer resource after placing it.
func (n *room) score(cpu, mem int64) float64 {
	return max(ratio(n.usedCPU+cpu, n.allocCPU), ratio(n.usedMem+mem, n.allocMem))
}

// candidate is a spot node that passed the static plugins and has room for a
// pod, with its best-fit score.
type candidate struct {
	i     int // index into run.spot
	score float64
}

// better orders candidates best first: highest score, then name.
func better(a, b candidate) int {
	if c := cmp.Compare(b.score, a.score); c != 0 {
		return c
	}
	return cmp.Compare(a.i, b.i)
}

// place finds the best-fitting spot node for pod (whose spec.nodeName must be
// empty), commits a copy bound to it to the snapshot and returns the node and
// the copy; or "" and why no spot node fits. pod itself is not modified. orig
// is the pod pod was copied from (or pod itself), with the same requests and
// template.
//
// The static plugins' answer for the pod's template rules nodes out first,
// then NodeResourcesFit's arithmetic; the candidates left are tried best
// first with every Filter plugin, and the first that passes is the answer: the
// same node as running every plugin on every spot node and taking the best.
func (r *run) place(ctx context.Context, pod, orig *corev1.Pod, res fwk.PodResource) (string, string, *corev1.Pod) {
	if len(r.spot) == 0 {
		return "", "no spot nodes in the cluster", nil
	}
	t := r.templates.of(orig)
	st := r.staticFit(ctx, pod, t)
	cpu, mem := res.Resource.GetMilliCPU(), res.Resource.GetMemory()
	next := r.candidates(st, cpu, mem)
	var cyc *cycle
	// rejected counts the Filter plugins' reasons; it is made on the first
	// rejection, as most placements succeed at once.
	var rejected map[string]int
	for {
		c, ok := next()
		if !ok {
			break
		}
		if cyc == nil {
			var status *fwk.Status
			if cyc, status = r.fit.cycleFor(ctx, pod, t); status != nil {
				return "", describe(status), nil
			}
		}
		status := r.fit.filterOn(ctx, cyc, pod, r.spotInfo[c.i])
		if status.IsSuccess() {
			return r.commit(pod, r.spot[c.i], res)
		}
		if rejected == nil {
			rejected = map[string]int{}
		}
		rejected[describe(status)]++
	}
	// No node: say why of every spot node. The Filter plugins rejected those
	// with room; the others are counted here.
	if rejected == nil {
		rejected = map[string]int{}
	}
	for reason, n := range st.rejected {
		rejected[reason] += n
	}
	for _, group := range st.feasible {
		for _, i := range group {
			if reason := r.room[i].fits(cpu, mem); reason != "" {
				rejected[reason]++
			}
		}
	}
	return "", summarize(rejected, len(r.spot), "spot nodes"), nil
}

// commit adds a copy of pod bound to node to the snapshot and returns the
// node and the copy, or "" and why it could not.
func (r *run) commit(pod *corev1.Pod, node string, res fwk.PodResource) (string, string, *corev1.Pod) {
	placed := *pod
	placed.Spec.NodeName = node
	if err := r.fit.add(&placed, node, res); err != nil {
		return "", fmt.Sprintf("adding to the snapshot: %v", err), nil
	}
	return node, "", &placed
}

// candidates returns the spot nodes that the static plugins accept for a pod
// (st) and that have room for cpu and mem, one at a time, best fit first
// (see better). It finds them through the room index when st holds classes of
// nodes; otherwise, and in exhaustive mode, it scores every node and sorts
// them.
func (r *run) candidates(st *staticFit, cpu, mem int64) func() (candidate, bool) {
	if st.classes != nil && !r.exhaustive {
		return r.rooms.bestFirst(st.classes, cpu, mem).pop
	}
	cands := r.cands[:0]
	for _, group := range st.feasible {
		for _, i := range group {
			if n := &r.room[i]; n.fits(cpu, mem) == "" {
				cands = append(cands, candidate{i, n.score(cpu, mem)})
			}
		}
	}
	r.cands = cands
	return sortedBestFirst(cands)
}

// sortedBestFirst sorts cands best first (see better) and returns them one at
// a time.
func sortedBestFirst(cands []candidate) func() (candidate, bool) {
	slices.SortFunc(cands, better)
	return func() (candidate, bool) {
		if len(cands) == 0 {
			return candidate{}, false
		}
		c := cands[0]
		cands = cands[1:]
		return c, true
	}
}

// summarize renders rejection counts the way the scheduler does:
// "0/5 spot nodes fit: 3 NodeResourcesFit: Insufficient cpu, 2 TaintToleration: ...",
// where what names the nodes ("spot nodes").
func summarize(rejected map[string]int, total int, what string) string {
	reasons := make([]string, 0, len(rejected))
	for reason := range rejected {
		reasons = append(reasons, reason)
	}
	sort.Slice(reasons, func(i, j int) bool {
		if rejected[reasons[i]] != rejected[reasons[j]] {
			return rejected[reasons[i]] > rejected[reasons[j]]
		}
		return reasons[i] < reasons[j]
	})
	parts := make([]string, len(reasons))
	for i, reason := range reasons {
		parts[i] = fmt.Sprintf("%d %s", rejected[reason], reason)
	}
	return fmt.Sprintf("0/%d %s fit: %s", total, what, strings.Join(parts, ", "))
}

// resource returns the pod's requests as the scheduler's NodeInfo accounts
// them (PodInfo.CalculateResource).
func (r *run) resource(pod *corev1.Pod) fwk.PodResource {
	return r.fit.resources.get(pod)
}

// sortKey is what the plan orders pods by: largest first, by CPU, then
// memory, then namespace and name (which tell pods apart, so no sort need be
// stable). j is the pod's position.
type sortKey struct {
	cpu, mem        int64
	namespace, name string
	j               int32
}

// compareSizes orders sort keys largest first.
func compareSizes(a, b sortKey) int {
	return cmp.Or(cmp.Compare(b.cpu, a.cpu), cmp.Compare(b.mem, a.mem),
		strings.Compare(a.namespace, b.namespace), strings.Compare(a.name, b.name))
}

func sortBySizeKeys(keys []sortKey) { slices.SortFunc(keys, compareSizes) }

// sizeKey is the sort key of pod j (an index into r.pods).
func (r *run) sizeKey(j int32) sortKey {
	res, p := r.fit.resOf[j].Resource, r.pods[j]
	return sortKey{res.GetMilliCPU(), res.GetMemory(), p.Namespace, p.Name, j}
}

// sortIndexesBySize orders pods (indexes into r.pods) largest first.
func (r *run) sortIndexesBySize(idx []int32) {
	keys := r.sortKeys[:0]
	for _, j := range idx {
		keys = append(keys, r.sizeKey(j))
	}
	r.sortKeys = keys
	sortBySizeKeys(keys)
	for k := range keys {
		idx[k] = keys[k].j
	}
}

// sortBySize orders pods largest first.
func (r *run) sortBySize(pods []*corev1.Pod) {
	keys := make([]sortKey, len(pods))
	for i, p := range pods {
		res := r.resource(p).Resource
		keys[i] = sortKey{res.GetMilliCPU(), res.GetMemory(), p.Namespace, p.Name, int32(i)}
	}
	sortBySizeKeys(keys)
	sorted := make([]*corev1.Pod, len(pods))
	for k := range keys {
		sorted[k] = pods[keys[k].j]
	}
	copy(pods, sorted)
}
