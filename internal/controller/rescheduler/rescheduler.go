// Package rescheduler empties on-demand nodes onto spot, one at a time: every
// interval it plans from the informers' cache, drains the best drainable node
// through the drain engine (each eviction re-checked against the current
// cluster), waits until the evicted pods' replacements run, then pauses for
// drainDelay. It shares the disruption budget with the migrator, skips cycles
// while Pending pods need the spot capacity, drains its own node last and puts
// a node whose drain failed into a cooldown that grows with each failure. A
// dry run drains nothing and reports, each cycle, every node it would drain,
// in order.
package rescheduler

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	nodeutil "k8s.io/kubernetes/pkg/util/node"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"spotter.dev/spotter/internal/backoff"
	"spotter.dev/spotter/internal/classify"
	"spotter.dev/spotter/internal/coop"
	"spotter.dev/spotter/internal/disruption"
	"spotter.dev/spotter/internal/drain"
	"spotter.dev/spotter/internal/plan"
	"spotter.dev/spotter/internal/snapshot"
)

// Component is the rescheduler's name on drain marks and Events.
const Component = "rescheduler"

// Options configure the rescheduler.
type Options struct {
	// Interval is the longest wait between two cycles; also the wait while no
	// drain window will ever open. Default 1m.
	Interval time.Duration
	// DrainDelay is the pause after a successful drain (at least 1s).
	DrainDelay time.Duration
	// ReplacementTimeout bounds the wait for the evicted pods' replacements.
	ReplacementTimeout time.Duration
	// CordonAfterDrain leaves a drained node cordoned.
	CordonAfterDrain bool
	// FailureBackoff is the cooldown of a node after its first failed drain
	// (and the first pause after misplaced replacements); it doubles with each
	// further failure, up to MaxFailureBackoff (backoff.Cooldown).
	FailureBackoff    time.Duration
	MaxFailureBackoff time.Duration
	// OnRestart says what to do with a drain of ours found unfinished at start.
	OnRestart drain.RecoverPolicy
	// ShutdownGracePeriod is how long a drain in flight at shutdown may go on
	// before it is rolled back (see drain.Outlive).
	ShutdownGracePeriod time.Duration
	// OwnNode is the node Spotter runs on (NODE_NAME); it is drained last.
	OwnNode string
	DryRun  bool
	// WakeDelay is how long after a spot node became Ready (NodeChanged)
	// the next cycle starts, when the rescheduler is idle: nodes that
	// register together are planned at once. Default 10s.
	WakeDelay time.Duration
}

// Controller is the rescheduler.
type Controller struct {
	reader   client.Reader
	planner  *plan.Planner
	drainer  *drain.Drainer
	budget   *disruption.Budget
	clock    clock.Clock
	recorder events.EventRecorder
	opts     Options

	failures map[string]backoff.Cooldown // node -> cooldown after failed drains
	// emptied holds when the rescheduler emptied each node, for
	// holdConsolidations.
	emptied  map[string]time.Time
	reported map[string]string // node -> last reason published in an Event
	// misplaced pauses the rescheduler after replacements landed on on-demand
	// nodes, so that it does not move the same pods back and forth.
	misplaced backoff.Cooldown
	// neverOpens is set once it was logged that no drain window will open.
	neverOpens bool
	// spreadWarned is the last plan.SpreadWarnings logged, so that each
	// change is logged once, and spreadOf the plan it was read with: the
	// planner gives the same plan for an unchanged cluster, and the pods
	// are not read again for it.
	spreadWarned string
	spreadOf     *plan.Plan
	// wake carries NodeChanged's news of new spot capacity to Start; idle is
	// set when the last cycle's wait may be cut short by it (not the pause
	// after a drain).
	wake chan struct{}
	idle bool
	// resident answers the re-check before each eviction (see Resident).
	resident *plan.Resident
}

// New returns the rescheduler. reader should be the manager's cache; drainer
// must be built for Component.
func New(reader client.Reader, planner *plan.Planner, drainer *drain.Drainer, budget *disruption.Budget, clk clock.Clock, recorder events.EventRecorder, opts Options) *Controller {
	if opts.Interval <= 0 {
		opts.Interval = time.Minute
	}
	if opts.WakeDelay <= 0 {
		opts.WakeDelay = 10 * time.Second
	}
	return &Controller{reader: reader, planner: planner, drainer: drainer, budget: budget, clock: clk, recorder: recorder, opts: opts,
		failures: map[string]backoff.Cooldown{}, emptied: map[string]time.Time{}, reported: map[string]string{}, wake: make(chan struct{}, 1),
		resident: planner.NewResident(func(ctx context.Context) (*snapshot.Snapshot, error) { return snapshot.FromReader(ctx, reader) })}
}

// Resident is what answers the re-check before each eviction: feed it the
// cluster's changes (plan.Resident), or it reads the whole cluster for each.
func (c *Controller) Resident() *plan.Resident { return c.resident }

// Name is the controller's name in logs.
func (c *Controller) Name() string { return Component }

// Register adds the rescheduler to the manager as a Runnable that runs on the
// leader only.
func (c *Controller) Register(mgr ctrl.Manager) error { return mgr.Add(c) }

// NeedLeaderElection makes the rescheduler run on the leader only.
func (c *Controller) NeedLeaderElection() bool { return true }

// Start runs cycles until ctx ends. Unfinished drains of a previous process are
// rolled back first when OnRestart is Rollback; else the cycles resume them
// (see Cycle).
func (c *Controller) Start(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithValues("controller", Component)
	ctx = klog.NewContext(ctx, logger)
	if !c.opts.DryRun {
		c.drainer.RollBackAtStart(ctx, c.clock, c.opts.OnRestart, c.opts.ShutdownGracePeriod)
	}
	for {
		wait := c.Cycle(ctx)
		if !c.idle {
			if coop.Sleep(ctx, c.clock, wait) != nil {
				return nil
			}
			continue
		}
		woken, err := coop.SleepOrReceive(ctx, c.clock, wait, c.wake)
		if err != nil {
			return nil
		}
		if woken {
			logger.V(1).Info("A spot node became Ready: planning early", "in", c.opts.WakeDelay)
			if coop.Sleep(ctx, c.clock, c.opts.WakeDelay) != nil {
				return nil
			}
			select { // news that came during the delay is in this cycle
			case <-c.wake:
			default:
			}
		}
	}
}

// NodeChanged tells the rescheduler that a Node was added (old nil) or
// updated. A spot node that became Ready is new room on spot: an idle
// rescheduler plans WakeDelay later instead of at the end of its interval, so
// that pods go back to spot within seconds of the capacity. It never blocks;
// the informer's event handler and the simulator call it.
func (c *Controller) NodeChanged(old, node *corev1.Node) {
	if node == nil || !nodeutil.IsNodeReady(node) || old != nil && nodeutil.IsNodeReady(old) {
		return
	}
	if c.planner.Classify(node).Class != classify.Spot {
		return
	}
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Cycle plans once and drains at most one node. It returns how long to wait
// before the next cycle.
//
// A drain of the rescheduler's found unfinished (its marks on a node: the
// process stopped mid-drain; a drain of this process ends within its cycle)
// is resumed by the rules of a fresh drain: inside the drain windows, with no
// Pending pods waiting for spot, when the plan still finds the node drainable,
// with a slot of the disruption budget, each eviction re-checked, and followed
// by the wait for replacements and drainDelay. Where a rule forbids it now, the
// drain is rolled back, and the node is planned afresh in later cycles.
func (c *Controller) Cycle(ctx context.Context) time.Duration {
	logger := klog.FromContext(ctx)
	now := c.clock.Now()
	c.idle = true
	if c.misplaced.Active(now) {
		logger.V(1).Info("Paused: replacements of evicted pods landed on on-demand nodes", "until", c.misplaced.Until)
		c.rollBackUnfinished(ctx, c.unfinished(ctx, nil), "the rescheduler is paused")
		return c.waitFor(now, c.misplaced.Until)
	}
	open, next := c.budget.Open(now)
	if !open && next.IsZero() {
		if !c.neverOpens {
			logger.Info("No drain window will ever open: their schedules match no date; checking again every interval", "interval", c.opts.Interval)
		}
		c.neverOpens = true
		c.rollBackUnfinished(ctx, c.unfinished(ctx, nil), "no drain window will open")
		return c.opts.Interval
	}
	c.neverOpens = false
	if !open {
		logger.V(1).Info("Outside the allowed drain windows", "next", next)
		c.rollBackUnfinished(ctx, c.unfinished(ctx, nil), "outside the drain windows")
		return c.waitFor(now, next)
	}
	if err := c.budget.Spent(); err != nil && !c.opts.DryRun {
		// Another drain holds every slot: nothing could be drained, so the
		// cycle does not plan (in spotter simulate, a third of the plans
		// of a day of week-200); the gauges keep the last plan's figures.
		logger.V(1).Info("Not planning: no slot of the disruption budget is free", "reason", err.Error())
		c.rollBackUnfinished(ctx, c.unfinished(ctx, nil), err.Error())
		return c.opts.Interval
	}
	logger.V(1).Info("Cycle starts")
	snap, err := snapshot.FromReader(ctx, c.reader)
	if err != nil {
		logger.Error(err, "Reading the cluster from the cache")
		planErrors.WithLabelValues("read").Inc()
		return c.opts.Interval
	}
	snapshot.InListOrder(snap)
	start := c.clock.Now()
	p, err := c.planner.Plan(ctx, snap)
	planDuration.Observe(c.clock.Since(start).Seconds())
	if err != nil {
		logger.Error(err, "Planning")
		planErrors.WithLabelValues("plan").Inc()
		return c.opts.Interval
	}
	work := workOf(p)
	logger.Info("Planned", "onDemandNodes", p.Summary.OnDemandNodes, "drainable", work.nodes,
		"podsToMove", work.pods, "emptyOnDemand", work.empty, "duration", c.clock.Since(start))
	drainableNodes.Set(float64(work.nodes))
	hourlySavings.Set(work.saving)
	c.report(p)
	if p != c.spreadOf {
		c.spreadOf = p
		if w := strings.Join(plan.SpreadWarnings(snap), "; "); w != c.spreadWarned {
			c.spreadWarned = w
			if w != "" {
				logger.Info("Workloads spread over zones without minDomains", "warning", w)
			}
		}
	}
	unfinished := c.unfinished(ctx, snap)
	if p.Summary.PendingReserved > 0 {
		logger.Info("Skipping this cycle: Pending pods need the spot capacity", "pending", p.Summary.PendingReserved)
		c.rollBackUnfinished(ctx, unfinished, "Pending pods need the spot capacity")
		return c.opts.Interval
	}
	if c.opts.DryRun {
		c.reportDryRun(ctx, p, now)
		return c.opts.Interval
	}
	target := c.choose(p, now)
	if len(unfinished) > 0 {
		target = c.resumable(ctx, p, now, unfinished)
	}
	if target == nil {
		return c.opts.Interval
	}
	if err := c.budget.Acquire(target.Name, Component); err != nil {
		logger.Info("Not draining now", "node", target.Name, "reason", err.Error())
		if unfinished[target.Name] {
			c.rollBackUnfinished(ctx, map[string]bool{target.Name: true}, err.Error())
		}
		return c.opts.Interval
	}
	defer c.budget.Release(target.Name)
	if unfinished[target.Name] {
		logger.Info("Resuming an unfinished drain", "node", target.Name)
	}
	if c.drainNode(ctx, target, snap) {
		c.idle = false // the pause after a drain is kept
		return max(c.opts.DrainDelay, time.Second)
	}
	return c.opts.Interval
}

// reportDryRun says what the rescheduler would do with plan p at now, and
// changes nothing: every node it would drain, in the order it would drain
// them (Order), in one log line and in an Event on each node.
func (c *Controller) reportDryRun(ctx context.Context, p *plan.Plan, now time.Time) {
	order := Order(p, func(node string) bool { return c.failures[node].Active(now) }, c.opts.OwnNode, c.holdConsolidations(p, now))
	steps := make([]string, len(order))
	for i, n := range order {
		steps[i] = fmt.Sprintf("%s (%s)", n.Name, podsAndWaves(n))
	}
	klog.FromContext(ctx).Info("Dry run: would drain these nodes, one at a time, in this order", "nodes", steps)
	if c.recorder == nil {
		return
	}
	for i, n := range order {
		c.recorder.Eventf(&corev1.ObjectReference{Kind: "Node", Name: n.Name, UID: types.UID(n.Name)}, nil,
			corev1.EventTypeNormal, drain.ReasonWouldDrain, "Drain", "dry run: would drain this node, %d of %d in this plan: all %s fit on spot nodes",
			i+1, len(order), podsAndWaves(n))
	}
}

// unfinished returns the nodes marked by a drain of the rescheduler, read
// from snap, or from the cache when snap is nil. In a dry run there are none:
// it changes nothing.
func (c *Controller) unfinished(ctx context.Context, snap *snapshot.Snapshot) map[string]bool {
	if c.opts.DryRun {
		return nil
	}
	nodes := []*corev1.Node(nil)
	if snap != nil {
		nodes = snap.Nodes
	} else {
		var list corev1.NodeList
		if err := c.reader.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
			klog.FromContext(ctx).Error(err, "Listing nodes to find unfinished drains")
			return nil
		}
		for i := range list.Items {
			nodes = append(nodes, &list.Items[i])
		}
	}
	out := map[string]bool{}
	for _, n := range nodes {
		if m, marked, err := drain.MarkOf(n); err == nil && marked && m.By == Component {
			out[n.Name] = true
		}
	}
	return out
}

// resumable returns the unfinished drain to resume: the first of them in the
// order the rescheduler drains (Order), as a fresh drain would be chosen. The
// others are rolled back, and so are those the plan no longer finds drainable.
// An unfinished drain whose node has nothing left to move is finished: its
// marks are removed, as at the end of a drain.
func (c *Controller) resumable(ctx context.Context, p *plan.Plan, now time.Time, unfinished map[string]bool) *plan.NodePlan {
	var target *plan.NodePlan
	for _, n := range Order(p, func(node string) bool { return c.failures[node].Active(now) }, c.opts.OwnNode, c.holdConsolidations(p, now)) {
		if unfinished[n.Name] {
			target = n
			break
		}
	}
	rest := map[string]bool{}
	for i := range p.Nodes {
		n := &p.Nodes[i]
		switch {
		case !unfinished[n.Name] || n == target:
		case n.Drainable && n.Class == classify.OnDemand && n.Evictions() == 0:
			if err := c.drainer.Unmark(ctx, n.Name, !c.opts.CordonAfterDrain); err != nil {
				klog.FromContext(ctx).Error(err, "Finishing an unfinished drain", "node", n.Name)
			} else {
				klog.FromContext(ctx).Info("Finished an unfinished drain: nothing was left to move", "node", n.Name)
			}
		case n.Drainable:
			rest[n.Name] = true
		default:
			c.rollBackUnfinished(ctx, map[string]bool{n.Name: true}, "not drainable now: "+n.Reason)
		}
	}
	if target != nil {
		c.rollBackUnfinished(ctx, rest, "another unfinished drain goes first")
	} else {
		c.rollBackUnfinished(ctx, rest, "the node is not to be drained now")
	}
	return target
}

// rollBackUnfinished rolls back the unfinished drains of nodes: their marks
// removed, uncordoned if the drain had cordoned them.
func (c *Controller) rollBackUnfinished(ctx context.Context, nodes map[string]bool, why string) {
	names := make([]string, 0, len(nodes))
	for n := range nodes {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, name := range names {
		logger := klog.FromContext(ctx).WithValues("node", name)
		if err := c.drainer.Unmark(ctx, name, true); err != nil {
			logger.Error(err, "Rolling back an unfinished drain")
			continue
		}
		logger.Info("Rolled back an unfinished drain", "reason", why)
		drains.WithLabelValues(drain.OutcomeRolledBack).Inc()
		if c.recorder != nil {
			c.recorder.Eventf(&corev1.ObjectReference{Kind: "Node", Name: name, UID: types.UID(name)}, nil,
				corev1.EventTypeNormal, drain.ReasonDrainRolledBack, "Drain", "unfinished drain rolled back: %s", why)
		}
	}
}

// waitFor returns how long to wait at now for t, at most an interval. A t
// that is not after now (a zero time is the cron library's "never") gives an
// interval: the loop never spins on a wait of zero or less.
func (c *Controller) waitFor(now, t time.Time) time.Duration {
	if d := t.Sub(now); d > 0 {
		return min(c.opts.Interval, d)
	}
	return c.opts.Interval
}

// choose picks the drainable node to empty (see Choose), with the cooldowns of
// failed drains as they stand at now.
func (c *Controller) choose(p *plan.Plan, now time.Time) *plan.NodePlan {
	consolidation := map[string]bool{}
	for i := range p.Nodes {
		consolidation[p.Nodes[i].Name] = len(p.Nodes[i].OnDemandPods()) > 0
	}
	return Choose(p, func(node string) bool {
		return c.failures[node].Active(now) || consolidation[node] && c.budget.RecentlyReceived(node, now)
	}, c.opts.OwnNode, c.holdConsolidations(p, now))
}

// Event reasons of a node that cools down after a successful drain.
const (
	ReasonReplacementsReturned = "SpotterReplacementsReturned"
	ReasonEmptiedAgain         = "SpotterEmptiedAgain"
)

// emptiedAgainWithin is how soon after the rescheduler emptied a node a
// second emptying makes it cool down (emptiedAgain).
const emptiedAgainWithin = time.Hour

// emptiedAgain records that the rescheduler emptied node at now, and reports
// whether it had emptied it less than emptiedAgainWithin before: pods came
// back to it since. Whatever brought them (the scheduler preferring the node
// for replacements, a controller that recreates pods there, a policy that
// keeps them off spot), emptying it again and again moves the same pods in
// circles. Measured in `spotter simulate`: with spot-first steering pods its
// plan saw unsteered, the rescheduler emptied one node every 12 minutes for
// hours (BENCHMARKS.md, "Zone spread with minDomains").
func (c *Controller) emptiedAgain(node string, now time.Time) bool {
	before, ok := c.emptied[node]
	c.emptied[node] = now
	return ok && now.Sub(before) < emptiedAgainWithin
}

// holdConsolidations reports whether a node the rescheduler emptied less than
// disruption.ConsolidationHold ago (the bound: a node its group keeps at its
// minimum size is never removed) is still in plan p with nothing to move. The
// scheduler puts the pods a consolidation sends to on-demand nodes on the
// emptiest on-demand node, that one, not where the plan sends them, and the
// next plan would empty it again: measured in `spotter simulate`, two nodes
// swapped their pinned pods every cycle. Consolidations wait until the
// autoscaler has removed it.
func (c *Controller) holdConsolidations(p *plan.Plan, now time.Time) bool {
	for name, at := range c.emptied {
		if now.Sub(at) >= disruption.ConsolidationHold {
			delete(c.emptied, name)
		}
	}
	for i := range p.Nodes {
		n := &p.Nodes[i]
		if _, ok := c.emptied[n.Name]; ok && n.Class == classify.OnDemand && n.Drainable && n.Evictions() == 0 {
			return true
		}
	}
	return false
}

// drainNode drains one node and waits for the evicted pods' replacements. It
// reports whether the drain succeeded.
func (c *Controller) drainNode(ctx context.Context, target *plan.NodePlan, snap *snapshot.Snapshot) bool {
	logger := klog.FromContext(ctx).WithValues("node", target.Name)
	// The workloads on the node, and the pods they had before the drain: any
	// other pod of theirs afterwards is a replacement.
	// toOnDemand are the workloads of the pods a consolidation sends to
	// on-demand nodes: their replacements belong there.
	// The pods a consolidation displaces from other nodes count as the
	// node's: their replacements belong on spot.
	owners, toOnDemand := map[types.UID]bool{}, map[types.UID]bool{}
	onDemand, displaced := target.OnDemandPods(), target.DisplacedPods()
	for _, pod := range snap.Pods {
		if pod.Spec.NodeName == target.Name || displaced[pod.Namespace+"/"+pod.Name] == pod.Spec.NodeName && pod.Spec.NodeName != "" {
			if ref := metav1.GetControllerOf(pod); ref != nil {
				owners[ref.UID] = true
				if onDemand[pod.Namespace+"/"+pod.Name] {
					toOnDemand[ref.UID] = true
				}
			}
		}
	}
	existing := map[types.UID]bool{}
	for _, pod := range snap.Pods {
		if ref := metav1.GetControllerOf(pod); ref != nil && owners[ref.UID] {
			existing[pod.UID] = true
		}
	}
	drains.WithLabelValues(drain.OutcomeStarted).Inc()
	// A shutdown lets the drain finish within the grace period, else rolls it
	// back: never a half-drained node.
	dctx, cancel := drain.Outlive(ctx, c.clock, c.opts.ShutdownGracePeriod)
	reason := fmt.Sprintf("all %d pods fit on spot nodes", target.Evictions())
	if len(onDemand) > 0 {
		reason = fmt.Sprintf("consolidation: %d pods fit on spot nodes, %d on on-demand nodes that stay", target.Evictions()-len(onDemand)-len(displaced), len(onDemand))
		if len(displaced) > 0 {
			reason += fmt.Sprintf(", after %d pods of those move to spot nodes to make room", len(displaced))
		}
	}
	res, err := c.drainer.Drain(dctx, drain.Request{
		Node:          target.Name,
		Reason:        reason,
		BeforeEvict:   c.resident.Recheck(target),
		LeaveCordoned: c.opts.CordonAfterDrain,
		Waves:         target.PodWaves(),
		Displaced:     displaced,
	})
	cancel()
	// The re-checks' snapshot is as large as the cluster: not kept between
	// drains.
	c.resident.Invalidate()
	podsEvicted.Add(float64(len(res.Evicted)))
	if err != nil {
		drains.WithLabelValues(drain.OutcomeFailed).Inc()
		if res.RolledBack {
			drains.WithLabelValues(drain.OutcomeRolledBack).Inc()
		}
		f := c.failures[target.Name]
		f.Fail(c.clock.Now(), c.opts.FailureBackoff, c.opts.MaxFailureBackoff)
		c.failures[target.Name] = f
		logger.Error(err, "Drain failed; node cooling down", "until", f.Until, "failures", f.Failures)
		return false
	}
	cooling := c.failures[target.Name]
	delete(c.failures, target.Name)
	again := c.emptiedAgain(target.Name, c.clock.Now())
	for _, dest := range target.OnDemandDestinations() {
		c.budget.Received(dest, c.clock.Now())
	}
	drains.WithLabelValues(drain.OutcomeSucceeded).Inc()
	misplaced, returned := c.waitReplacements(ctx, target.Name, owners, existing, toOnDemand)
	if len(returned) > 0 || again {
		// Pods came back to the node: a StatefulSet recreates a pod only
		// once the old one is gone, after the drain took its marks off, and
		// the scheduler put it back on the emptied node (returned); or
		// something put pods back later, so that the node had to be emptied
		// again within the hour (again). Draining it again and again would
		// evict in circles: the node cools down, longer each time.
		f := cooling
		f.Fail(c.clock.Now(), c.opts.FailureBackoff, c.opts.MaxFailureBackoff)
		c.failures[target.Name] = f
		ref := &corev1.ObjectReference{Kind: "Node", Name: target.Name, UID: types.UID(target.Name)}
		if len(returned) > 0 {
			logger.Info("Replacements came back to the drained node; node cooling down", "pods", returned, "until", f.Until)
			if c.recorder != nil {
				c.recorder.Eventf(ref, nil, corev1.EventTypeWarning, ReasonReplacementsReturned, "Reschedule",
					"replacements of the evicted pods were scheduled on this node again (%v); not draining it until %s", returned, f.Until.UTC().Format(time.RFC3339))
			}
		} else {
			logger.Info("Node emptied again within the hour; node cooling down", "within", emptiedAgainWithin, "until", f.Until, "failures", f.Failures)
			if c.recorder != nil {
				c.recorder.Eventf(ref, nil, corev1.EventTypeWarning, ReasonEmptiedAgain, "Reschedule",
					"this node had been emptied less than %s before and had pods to move again; not draining it until %s", emptiedAgainWithin, f.Until.UTC().Format(time.RFC3339))
			}
		}
	}
	if len(misplaced) > 0 {
		// The scheduler preferred on-demand capacity for the replacements: draining
		// more would move pods in circles. Pause, longer each time.
		c.misplaced.Fail(c.clock.Now(), c.opts.FailureBackoff, c.opts.MaxFailureBackoff)
		msg := fmt.Sprintf("replacements of the evicted pods were scheduled on on-demand nodes (%v); pausing until %s. "+
			"Keep labeler.preferSpotTaint on so that the scheduler prefers spot", misplaced, c.misplaced.Until.UTC().Format(time.RFC3339))
		logger.Info("Replacements landed on on-demand nodes", "pods", misplaced, "pausedUntil", c.misplaced.Until)
		if c.recorder != nil {
			c.recorder.Eventf(&corev1.ObjectReference{Kind: "Node", Name: target.Name, UID: types.UID(target.Name)}, nil,
				corev1.EventTypeWarning, "SpotterReplacementsOnOnDemand", "Reschedule", "%s", msg)
		}
		return true
	}
	c.misplaced = backoff.Cooldown{}
	return true
}

// waitReplacements waits until every pod of the drained workloads runs again,
// or ReplacementTimeout, and returns the replacements (pods not in existing)
// that run on nodes that are not spot, leaving out those of the workloads a
// consolidation sent to on-demand nodes (toOnDemand), and apart from them
// those back on the drained node itself.
func (c *Controller) waitReplacements(ctx context.Context, drained string, owners, existing, toOnDemand map[types.UID]bool) (misplaced, returned []string) {
	deadline := c.clock.Now().Add(c.opts.ReplacementTimeout)
	for {
		var pods corev1.PodList
		var nodes corev1.NodeList
		if err := c.reader.List(ctx, &pods, client.UnsafeDisableDeepCopy); err == nil {
			waiting := 0
			var running []*corev1.Pod
			for i := range pods.Items {
				p := &pods.Items[i]
				ref := metav1.GetControllerOf(p)
				if ref == nil || !owners[ref.UID] {
					continue
				}
				if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
					waiting++
				} else {
					running = append(running, p)
				}
			}
			if waiting == 0 && c.reader.List(ctx, &nodes, client.UnsafeDisableDeepCopy) == nil {
				spot := map[string]bool{}
				for i := range nodes.Items {
					spot[nodes.Items[i].Name] = c.planner.Classify(&nodes.Items[i]).Class == classify.Spot
				}
				for _, p := range running {
					switch {
					case existing[p.UID]:
					case p.Spec.NodeName == drained:
						returned = append(returned, p.Namespace+"/"+p.Name)
					case !spot[p.Spec.NodeName] && !toOnDemand[metav1.GetControllerOf(p).UID]:
						misplaced = append(misplaced, p.Namespace+"/"+p.Name+"@"+p.Spec.NodeName)
					}
				}
				return misplaced, returned
			}
		}
		if !c.clock.Now().Before(deadline) {
			klog.FromContext(ctx).Info("Replacements not all Running yet; going on", "timeout", c.opts.ReplacementTimeout)
			return nil, nil
		}
		if coop.Sleep(ctx, c.clock, time.Second) != nil {
			return nil, nil
		}
	}
}

// maxVerdictEvents bounds the verdict Events (SpotterDrainable,
// SpotterNotDrainable) one cycle records. The first cycle has a verdict for
// every on-demand node: 3,000 Events at 5,000 nodes, which the client's rate
// limit would send over minutes, ahead of the Events of the drains. The rest
// wait for the next cycles, 50 a cycle.
const maxVerdictEvents = 50

// report records an Event on each on-demand node whose verdict changed, so
// that `kubectl describe node` says why Spotter leaves it alone, at most
// maxVerdictEvents a cycle: a change not recorded yet is recorded in a later
// cycle (or never, if the verdict changes back meanwhile). The reason is the
// plan's, as `spotter plan` gives it (the snapshot is in list order).
func (c *Controller) report(p *plan.Plan) {
	recorded := 0
	for _, n := range p.Nodes {
		if n.Class != classify.OnDemand {
			continue
		}
		reason := n.Reason
		switch {
		case n.Consolidated:
			reason = "drainable by consolidation"
		case n.Drainable:
			reason = "drainable"
		}
		if c.reported[n.Name] == reason {
			continue
		}
		if c.recorder == nil {
			c.reported[n.Name] = reason
			continue
		}
		if recorded == maxVerdictEvents {
			return
		}
		recorded++
		c.reported[n.Name] = reason
		ref := &corev1.ObjectReference{Kind: "Node", Name: n.Name, UID: types.UID(n.Name)}
		switch {
		case n.Consolidated:
			c.recorder.Eventf(ref, nil, corev1.EventTypeNormal, "SpotterDrainable", "Plan",
				"consolidation: the pods of this on-demand node fit on spot nodes and on on-demand nodes that stay")
		case n.Drainable:
			c.recorder.Eventf(ref, nil, corev1.EventTypeNormal, "SpotterDrainable", "Plan", "all pods of this on-demand node fit on spot nodes")
		default:
			c.recorder.Eventf(ref, nil, corev1.EventTypeNormal, "SpotterNotDrainable", planAction(reason), "not moved to spot: %s", reason)
		}
	}
}

// planAction is the action of a SpotterNotDrainable Event: "Plan", and a
// digest of the reason. The events library merges an Event into the series of
// an earlier one with the same type, reason, action, regarding and related
// objects, and keeps the first note (client-go v0.37.1,
// tools/events/event_broadcaster.go, getKey): with one action for every
// reason, `kubectl describe node` went on showing the first reason after it
// changed. A repeat of the same reason still joins its series.
func planAction(reason string) string {
	h := fnv.New32a()
	h.Write([]byte(reason))
	return fmt.Sprintf("Plan-%08x", h.Sum32())
}

// work is what a plan leaves the rescheduler to do.
type work struct {
	// nodes are the drainable on-demand nodes with pods to move, pods the
	// evictions they need and saving their on-demand price per hour.
	nodes, pods int
	saving      float64
	// empty counts the drainable on-demand nodes with nothing to move: no
	// drain, the autoscaler removes them.
	empty int
}

// workOf counts the nodes the rescheduler would drain: the planner calls a
// node with nothing to move drainable, but there is nothing to drain.
func workOf(p *plan.Plan) work {
	var w work
	for i := range p.Nodes {
		n := &p.Nodes[i]
		if !n.Drainable || n.Class != classify.OnDemand {
			continue
		}
		moves := n.Evictions()
		if moves == 0 {
			w.empty++
			continue
		}
		w.nodes++
		w.pods += moves
		w.saving += n.HourlyPrice
	}
	return w
}

// podsAndWaves says how many pods a node's drain moves, and in how many waves
// when more than one.
func podsAndWaves(n *plan.NodePlan) string {
	if n.Waves > 1 {
		return fmt.Sprintf("%d pods in %d waves", n.Evictions(), n.Waves)
	}
	return fmt.Sprintf("%d pods", n.Evictions())
}
