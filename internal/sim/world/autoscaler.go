package world

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"spotter.dev/spotter/internal/backoff"
	"spotter.dev/spotter/internal/plan"
	kubescheduler "spotter.dev/spotter/internal/sim/scheduler"
	"spotter.dev/spotter/internal/snapshot"
)

// Autoscaler is a node-group autoscaler modelled on the cluster autoscaler
// with the price expander:
//
//   - scale-up: pods the scheduler could not place first go to nodes already
//     on their way (provisioning); for the rest, each node group not in
//     backoff and below its maximum is tried with node templates (first fit,
//     largest pods first, the real filter plugins), and the group with the
//     lowest price per pod helped is grown by the nodes it needs. A spot group
//     whose zone has no capacity fails the launch and is backed off (5m,
//     doubling up to 30m by default), so the next cheapest group is tried on
//     the next step. Where the cloud reports stock-outs late, the requests
//     the market could not hold count as nodes on their way until reported
//     failed; then the autoscaler cancels them and backs the group off, as
//     the cluster autoscaler does with the instances a failed scaling
//     activity left unfulfilled (its early abort on an out-of-resources
//     error), and the group's backoff is reset only by a scale-up delivered
//     in full.
//   - scale-down: a node empty for ScaleDownUnneededTime (and Ready that
//     long) is removed, down to the group's minimum; so is a node under-used
//     that long whose pods may move and fit elsewhere, drained first
//     (scaleDownUnderused). Nodes a strategy drains or a preemption notice
//     covers are left alone.
type Autoscaler struct {
	w           *World
	e           *plan.Engine
	lastVersion uint64
	lastRun     time.Time
	// static and lazy templates (scaleUp) spare scheduling questions whose
	// answer is known, unless exhaustive (NewAutoscaler; sim.Options.exhaustive).
	static     *StaticFit
	exhaustive bool
	// lastScaleUp is when the autoscaler last added a node; removing is the
	// node it is removing with pods on it; k places their pods in its check
	// (scaleDownUnderused).
	lastScaleUp time.Time
	removing    *Node
	k           *kubescheduler.Scheduler
}

// NewAutoscaler makes the autoscaler of a world. It asks its scheduling
// questions of an engine of its own: an engine keeps the pods' computed
// requests only for the pods of its last question, and the autoscaler's
// questions (few bound pods) would make the scheduler's (all of them) compute
// them afresh.
func NewAutoscaler(ctx context.Context, w *World, exhaustive bool) (*Autoscaler, error) {
	e, err := plan.NewEngine(ctx, &snapshot.Snapshot{Namespaces: w.nsObjs})
	if err != nil {
		return nil, err
	}
	return &Autoscaler{w: w, e: e, static: NewStaticFit(w, e), exhaustive: exhaustive}, nil
}

// Run is one pass of the autoscaler at the end of a step: scale-up for the
// pods the scheduler could not place (unschedulable), then scale-down.
func (a *Autoscaler) Run(ctx context.Context, unschedulable []*Pod) error {
	a.cancelFailed()
	if err := a.scaleUp(ctx, unschedulable); err != nil {
		return err
	}
	a.scaleDown()
	return a.scaleDownUnderused(ctx)
}

func (a *Autoscaler) scaleUp(ctx context.Context, unschedulable []*Pod) error {
	w := a.w
	var waiting []*Pod
	for _, p := range unschedulable {
		if p.Node == nil && !p.Terminating && !p.lost {
			waiting = append(waiting, p)
		}
	}
	now := w.Now()
	// Nothing changed since the last look, and no backoff ended: the same
	// answer.
	expired := false
	for _, g := range w.Groups {
		until := g.backoff.Until
		expired = expired || (!until.IsZero() && !now.Before(until) && a.lastRun.Before(until))
	}
	if len(waiting) == 0 || (w.version == a.lastVersion && !expired) {
		return nil
	}
	seen := w.version
	defer func() { a.lastVersion, a.lastRun = seen, now }()
	readyNodes := w.ReadyNodes()
	var upcoming []*Node
	for _, n := range w.nodes {
		// Nodes still on their way: not those preempted while provisioning,
		// which the cloud has taken back.
		if requested, failed := n.Unfulfilled(now); (n.state == provisioning && !n.Noticed()) || (requested && !failed) {
			upcoming = append(upcoming, n)
		}
	}
	bound := w.boundObjs()
	if !a.exhaustive {
		// Every destination below is a node without pods: the bound pods
		// count only for spread and affinity.
		bound = Constraining(bound, waiting)
	}
	// Largest first, as the cluster autoscaler's binpacking estimator.
	sort.SliceStable(waiting, func(i, j int) bool {
		if waiting[i].App.cpu != waiting[j].App.cpu {
			return waiting[i].App.cpu > waiting[j].App.cpu
		}
		return waiting[i].App.mem > waiting[j].App.mem
	})
	objs := func(pods []*Pod) []*corev1.Pod {
		out := make([]*corev1.Pod, len(pods))
		for i, p := range pods {
			out[i] = p.Obj
		}
		return out
	}
	if len(upcoming) > 0 {
		isUpcoming := map[string]bool{}
		for _, n := range upcoming {
			isUpcoming[n.Name] = true
		}
		placed, err := a.e.Schedule(ctx, plan.ScheduleRequest{Nodes: NodeObjs(append(readyNodes, upcoming...)), Pods: bound,
			Pending: objs(waiting), Eligible: func(n *corev1.Node) bool { return isUpcoming[n.Name] }})
		if err != nil {
			return err
		}
		var rest []*Pod
		for i, pl := range placed {
			if pl.Node == "" {
				rest = append(rest, waiting[i])
			}
		}
		waiting = rest
	}
	if len(waiting) == 0 {
		return nil
	}
	var best *option
	existing := NodeObjs(append(readyNodes, upcoming...))
	for _, g := range w.Groups {
		room := int(g.Max) - g.count
		if room <= 0 || g.backoff.Active(now) {
			continue
		}
		o, err := a.tryGroup(ctx, g, room, waiting, existing, bound)
		if err != nil {
			return err
		}
		if o.helped == 0 {
			continue
		}
		if best == nil || better(w.PricePerHour(o.g), o.nodes, o.helped, w.PricePerHour(best.g), best.nodes, best.helped) {
			best = o
		}
	}
	if best == nil {
		return nil
	}
	full := true
	for range best.nodes {
		n, err := w.Launch(best.g)
		if err != nil {
			if !errors.Is(err, ErrNoCapacity) {
				return nil // at its maximum: the next step tries others
			}
			a.fail(best.g)
			return nil
		}
		// A scale-up the cloud accepted: the scale-down waits after it (a
		// refused one starts no delay, as in the cluster autoscaler, which
		// records only a successful scale-up's time).
		a.lastScaleUp = now
		if requested, _ := n.Unfulfilled(now); requested {
			full = false
		}
	}
	if full {
		best.g.backoff = backoff.Cooldown{}
	}
	return nil
}

// fail backs a group off after a failed scale-up: the options changed, so
// the autoscaler looks again on the next step.
func (a *Autoscaler) fail(g *Group) {
	g.backoff.Fail(a.w.Now(), a.w.sc.Cluster.ScaleUpBackoff.Duration, a.w.sc.Cluster.MaxScaleUpBackoff.Duration)
	a.w.changed()
}

// cancelFailed cancels the requests the cloud reported failed for want of
// spot capacity, in every group, whoever asked for them, and backs their
// groups off.
func (a *Autoscaler) cancelFailed() {
	w := a.w
	failedGroups := map[*Group]bool{}
	for _, n := range slices.Clone(w.nodes) {
		if _, failed := n.Unfulfilled(w.Now()); failed {
			failedGroups[n.Group] = true
			w.DeleteNode(n)
		}
	}
	for _, g := range w.Groups {
		if failedGroups[g] {
			a.fail(g)
		}
	}
}

// option is what growing one node group would do for the waiting pods.
type option struct {
	g      *Group
	nodes  int
	helped int
}

// tryGroup places the waiting pods, first fit, largest first, on new nodes of
// g (node templates: at most room), the existing nodes counting for spread
// and affinity only. The plain way gives the templates as many nodes as room
// allows (or as pods wait); unless exhaustive, two shortcuts give the same
// answer for less: pods that fit no node of g (StaticFit) are left out, and
// templates are made as the pods' requests suggest, one more than that, then
// doubled while every one of them was used. Once a template is left empty,
// more of them would change nothing: a pod that fitted none of the templates
// did not fit that empty one, and would not fit another empty one.
func (a *Autoscaler) tryGroup(ctx context.Context, g *Group, room int, waiting []*Pod, existing []*corev1.Node, bound []*corev1.Pod) (*option, error) {
	w := a.w
	if a.static == nil {
		a.static = NewStaticFit(w, a.e)
	}
	o := &option{g: g}
	pods := waiting
	k := min(room, len(waiting))
	if !a.exhaustive {
		pods = nil
		var cpu, mem int64
		for _, p := range waiting {
			ok, err := a.static.Fits(ctx, p.App, g)
			if err != nil {
				return nil, err
			}
			if ok {
				pods = append(pods, p)
				cpu, mem = cpu+p.App.cpu, mem+p.App.mem
			}
		}
		if len(pods) == 0 {
			return o, nil
		}
		need := max(ceilDiv(cpu, g.cpu), ceilDiv(mem, g.mem), ceilDiv(int64(len(pods)), int64(g.Pods)))
		k = int(min(int64(min(room, len(pods))), need+1))
	}
	limit := min(room, len(pods))
	pending := make([]*corev1.Pod, len(pods))
	for i, p := range pods {
		pending[i] = p.Obj
	}
	for {
		templates := make([]*corev1.Node, k)
		isTemplate := map[string]bool{}
		for i := range templates {
			templates[i] = w.Template(g, i)
			isTemplate[templates[i].Name] = true
		}
		placed, err := a.e.Schedule(ctx, plan.ScheduleRequest{Nodes: append(append([]*corev1.Node(nil), existing...), templates...),
			Pods: bound, Pending: pending, Eligible: func(n *corev1.Node) bool { return isTemplate[n.Name] }})
		if err != nil {
			return nil, err
		}
		used := map[string]bool{}
		o.helped = 0
		for _, pl := range placed {
			if pl.Node != "" {
				used[pl.Node] = true
				o.helped++
			}
		}
		o.nodes = len(used)
		if o.nodes < k || k >= limit {
			return o, nil
		}
		k = min(2*k, limit)
	}
}

// Constraining are the bound pods that can change whether one of the
// waiting pods passes the filter plugins on a node without pods: those with
// pod affinity or anti-affinity of their own (an anti-affinity term can
// refuse a newcomer), and those a waiting pod's spread constraints or
// affinity terms select (by labels alone, whatever the namespaces: a
// superset). Resources, ports and volumes of a node without pods owe nothing
// to other nodes' pods.
func Constraining(bound []*corev1.Pod, waiting []*Pod) []*corev1.Pod {
	var selectors []labels.Selector
	all := false
	seen := map[*App]bool{}
	add := func(ls *metav1.LabelSelector) {
		if ls == nil {
			return
		}
		sel, err := metav1.LabelSelectorAsSelector(ls)
		if err != nil {
			all = true // keep everything rather than guess
			return
		}
		selectors = append(selectors, sel)
	}
	for _, p := range waiting {
		if seen[p.App] {
			continue
		}
		seen[p.App] = true
		spec := &p.Obj.Spec
		for i := range spec.TopologySpreadConstraints {
			add(spec.TopologySpreadConstraints[i].LabelSelector)
		}
		if aff := spec.Affinity; aff != nil {
			for _, terms := range [][]corev1.PodAffinityTerm{podAffinityTerms(aff.PodAffinity), podAntiAffinityTerms(aff.PodAntiAffinity)} {
				for i := range terms {
					add(terms[i].LabelSelector)
				}
			}
		}
	}
	if all {
		return bound
	}
	var out []*corev1.Pod
	for _, b := range bound {
		keep := false
		if aff := b.Spec.Affinity; aff != nil && (aff.PodAffinity != nil || aff.PodAntiAffinity != nil) {
			keep = true
		}
		for _, sel := range selectors {
			if keep {
				break
			}
			keep = sel.Matches(labels.Set(b.Labels))
		}
		if keep {
			out = append(out, b)
		}
	}
	return out
}

// podAffinityTerms and podAntiAffinityTerms are the required and preferred
// terms of an affinity.
func podAffinityTerms(a *corev1.PodAffinity) []corev1.PodAffinityTerm {
	if a == nil {
		return nil
	}
	out := append([]corev1.PodAffinityTerm(nil), a.RequiredDuringSchedulingIgnoredDuringExecution...)
	for _, w := range a.PreferredDuringSchedulingIgnoredDuringExecution {
		out = append(out, w.PodAffinityTerm)
	}
	return out
}

func podAntiAffinityTerms(a *corev1.PodAntiAffinity) []corev1.PodAffinityTerm {
	if a == nil {
		return nil
	}
	out := append([]corev1.PodAffinityTerm(nil), a.RequiredDuringSchedulingIgnoredDuringExecution...)
	for _, w := range a.PreferredDuringSchedulingIgnoredDuringExecution {
		out = append(out, w.PodAffinityTerm)
	}
	return out
}

// ceilDiv is a / b rounded up (b > 0).
func ceilDiv(a, b int64) int64 {
	if b <= 0 {
		return 0
	}
	return (a + b - 1) / b
}

// better is the price expander's choice, at the groups' prices now (price
// and hPrice per node-hour): the lower price per pod helped, then more pods
// helped, then the group listed first.
func better(price float64, nodes, helped int, hPrice float64, hNodes, hHelped int) bool {
	a := price * float64(nodes) / float64(helped)
	b := hPrice * float64(hNodes) / float64(hHelped)
	if a != b {
		return a < b
	}
	return helped > hHelped
}

// Template is a hypothetical new node of g, as the autoscaler imagines it:
// the i-th of the group's templates, made on first use (a node object holds
// nothing that changes with time that the filter plugins read).
func (w *World) Template(g *Group, i int) *corev1.Node {
	for len(g.templates) <= i {
		n := &Node{Name: fmt.Sprintf("template-%s-%d", g.Name, len(g.templates)), Group: g, Created: w.Now()}
		w.refreshInto(n)
		g.templates = append(g.templates, n.Obj)
	}
	return g.templates[i]
}

// refreshInto builds a node's object without counting a change: the node
// is not in the world.
func (w *World) refreshInto(n *Node) { n.Obj = w.nodeObject(n) }

func (a *Autoscaler) scaleDown() {
	w := a.w
	now := w.Now()
	unneeded := w.sc.Cluster.ScaleDownUnneededTime.Duration
	for _, n := range append([]*Node(nil), w.nodes...) {
		if !n.Ready() || len(n.pods) > 0 || n.Draining != "" || n.Noticed() {
			n.emptySince = time.Time{}
			continue
		}
		if n.emptySince.IsZero() {
			n.emptySince = now
		}
		if now.Sub(n.emptySince) >= unneeded && now.Sub(n.ReadyAt) >= unneeded && n.Group.count > int(n.Group.Min) {
			w.DeleteNode(n)
		}
	}
}
