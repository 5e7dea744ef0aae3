package sim

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"

	"spotter.dev/spotter/internal/backoff"
	"spotter.dev/spotter/internal/plan"
)

// autoscaler is a node-group autoscaler modelled on the cluster autoscaler
// with the price expander:
//
//   - scale-up: pods the scheduler could not place first go to nodes already
//     on their way (provisioning); for the rest, each node group not in
//     backoff and below its maximum is tried with node templates (first fit,
//     largest pods first, the real filter plugins), and the group with the
//     lowest price per pod helped is grown by the nodes it needs. A spot group
//     whose zone has no capacity fails the launch and is backed off (5m,
//     doubling up to 30m by default), so the next cheapest group is tried on
//     the next step.
//   - scale-down: a node empty for ScaleDownUnneededTime (and Ready that
//     long) is removed, down to the group's minimum. Nodes a strategy drains or
//     a preemption notice covers are left alone. Consolidation of
//     under-used nodes is not modelled.
type autoscaler struct {
	w           *World
	e           *plan.Engine
	lastVersion uint64
	lastRun     time.Time
}

func (a *autoscaler) run(ctx context.Context, unschedulable []*Pod) error {
	if err := a.scaleUp(ctx, unschedulable); err != nil {
		return err
	}
	a.scaleDown()
	return nil
}

func (a *autoscaler) scaleUp(ctx context.Context, unschedulable []*Pod) error {
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
		if n.state == provisioning {
			upcoming = append(upcoming, n)
		}
	}
	bound := w.boundObjs()
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
		placed, err := a.e.Schedule(ctx, plan.ScheduleRequest{Nodes: nodeObjs(append(readyNodes, upcoming...)), Pods: bound,
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
	type option struct {
		g      *Group
		nodes  int
		helped int
	}
	var best *option
	existing := nodeObjs(append(readyNodes, upcoming...))
	for _, g := range w.Groups {
		room := int(g.Max) - g.count
		if room <= 0 || g.backoff.Active(now) {
			continue
		}
		k := min(room, len(waiting))
		templates := make([]*corev1.Node, k)
		isTemplate := map[string]bool{}
		for i := range templates {
			templates[i] = w.template(g, i)
			isTemplate[templates[i].Name] = true
		}
		placed, err := a.e.Schedule(ctx, plan.ScheduleRequest{Nodes: append(append([]*corev1.Node(nil), existing...), templates...),
			Pods: bound, Pending: objs(waiting), Eligible: func(n *corev1.Node) bool { return isTemplate[n.Name] }})
		if err != nil {
			return err
		}
		used := map[string]bool{}
		o := &option{g: g}
		for _, pl := range placed {
			if pl.Node != "" {
				used[pl.Node] = true
				o.helped++
			}
		}
		o.nodes = len(used)
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
	for range best.nodes {
		if _, err := w.Launch(best.g); err != nil {
			if !errors.Is(err, ErrNoCapacity) {
				return nil // at its maximum: the next step tries others
			}
			best.g.backoff.Fail(now, w.sc.Cluster.ScaleUpBackoff.Duration, w.sc.Cluster.MaxScaleUpBackoff.Duration)
			w.changed() // the options changed: look again on the next step
			return nil
		}
	}
	best.g.backoff = backoff.Cooldown{}
	return nil
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

// template is a hypothetical new node of g, as the autoscaler imagines it.
func (w *World) template(g *Group, i int) *corev1.Node {
	n := &Node{Name: fmt.Sprintf("template-%s-%d", g.Name, i), Group: g, Created: w.Now()}
	w.refreshInto(n)
	return n.Obj
}

// refreshInto builds a node's object without counting a change.
func (w *World) refreshInto(n *Node) {
	v := w.version
	w.refresh(n)
	w.version = v
}

func (a *autoscaler) scaleDown() {
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
