// Package migrator replaces on-demand nodes by spot nodes on a schedule, and
// soon after spot capacity returns, through node groups and the cloud
// provider. In the default make-before-break mode it asks the best spot node
// group that can hold a node's pods (planned against the group's template, so
// a group of size 0 counts; best by price weighed with the interruptions seen
// in its instance type and zone, spread over markets: see Weigh) for the nodes
// needed, waits until they are Ready, and only then drains the on-demand node
// and deletes its instance. When spot capacity does not come, it cancels the
// request, backs the group off for a few minutes (longer only while the
// shortage lasts), tries again when the pause ends, and drains nothing. The
// drain-first mode of older tools (drain, delete, let an autoscaler provision
// spot) stops as soon as a new on-demand node appears.
//
// The state of a replacement lives on the node: the label
// spotter.dev/selected-for-deletion and the drain engine's marks. A migrator
// that starts finishes the nodes it finds selected before anything else.
package migrator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/robfig/cron/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	nodeutil "k8s.io/kubernetes/pkg/util/node"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"spotter.dev/spotter/internal/backoff"
	"spotter.dev/spotter/internal/classify"
	"spotter.dev/spotter/internal/cloud"
	"spotter.dev/spotter/internal/coop"
	"spotter.dev/spotter/internal/disruption"
	"spotter.dev/spotter/internal/drain"
	"spotter.dev/spotter/internal/plan"
	"spotter.dev/spotter/internal/snapshot"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// Component is the migrator's name on drain marks and Events.
const Component = "migrator"

// Names on the cluster.
const (
	// SelectedForDeletionLabel marks an on-demand node the migrator is
	// replacing; its value is when the replacement started (Unix seconds).
	SelectedForDeletionLabel = "spotter.dev/selected-for-deletion"
	// ToBeDeletedTaint and DeletionCandidateTaint are the cluster autoscaler's
	// taints: the first goes on a drained node just before its instance is
	// deleted, so that the autoscaler and the scheduler leave it alone.
	ToBeDeletedTaint       = "ToBeDeletedByClusterAutoscaler"
	DeletionCandidateTaint = "DeletionCandidateOfClusterAutoscaler"
	// templatePrefix names the virtual nodes a plan puts in place of the
	// nodes a group would add.
	templatePrefix = "spotter-template-"
)

// Event reasons.
const (
	ReasonSelected          = "SpotterSelectedForDeletion"
	ReasonSpotRequested     = "SpotterSpotRequested"
	ReasonSpotTopUp         = "SpotterSpotTopUp"
	ReasonSpotUnavailable   = "SpotterSpotUnavailable"
	ReasonSpotRequestFailed = "SpotterSpotRequestFailed"
	ReasonMigrated          = "SpotterMigrated"
	ReasonMigrationFailed   = "SpotterMigrationFailed"
	ReasonWouldMigrate      = "SpotterWouldMigrate"
	ReasonNodeGroupLeftOut  = "SpotterNodeGroupLeftOut"
	ReasonSpotGivenBack     = "SpotterSpotGivenBack"
)

// Options configure the migrator.
type Options struct {
	// Schedule says when runs start (at fixed clock times).
	Schedule cron.Schedule
	// Mode is make-before-break or drain-first.
	Mode             v1alpha1.MigrationMode
	NodeReadyTimeout time.Duration
	MaxNodesPerRun   int
	// SpotUnavailableBackoff is the first pause of a group after a shortage;
	// it doubles while the shortage lasts (backoff.Cooldown.FailStreak), up
	// to MaxSpotUnavailable. The migrator runs again when a pause ends.
	SpotUnavailableBackoff time.Duration
	MaxSpotUnavailable     time.Duration
	// SpotReadyDelay is how long after a spot node became Ready (NodeChanged)
	// the migrator runs, between its scheduled runs; 0: no such runs.
	SpotReadyDelay time.Duration
	// InterruptionCost and MaxSpotSharePercent weigh the spot groups (see
	// Weigh); InterruptionWindow is how far back interruptions count
	// (default 24h). MaxSpotSharePercent 0 means 100 (no cap).
	InterruptionCost    time.Duration
	InterruptionWindow  time.Duration
	MaxSpotSharePercent int
	// ShutdownGracePeriod is how long a drain in flight at shutdown may go on.
	ShutdownGracePeriod time.Duration
	// NodeGoneTimeout bounds the wait for a deleted node's Node object to go.
	// Default 5m.
	NodeGoneTimeout time.Duration
	// PollInterval paces the waits for nodes. Default 1s.
	PollInterval time.Duration
	// ProviderSynced, when set, is closed once the provider knows its
	// instances; the migrator waits for it before it starts.
	ProviderSynced <-chan struct{}
	// OwnNode is the node Spotter runs on: never replaced.
	OwnNode string
	// Self is the object Events about the migrator itself rather than a
	// node go to (its leader Lease); nil: none.
	Self   *corev1.ObjectReference
	DryRun bool
}

// Controller is the migrator.
type Controller struct {
	reader   client.Reader
	kube     kubernetes.Interface
	provider cloud.Provider
	planner  *plan.Planner
	// groupPlans are the plans of the cluster against each group's
	// templates, for the snapshot of one Revision (see planOnGroup).
	groupPlans struct {
		revision string
		plans    map[string]*plan.Plan
	}
	drainer  *drain.Drainer
	budget   *disruption.Budget
	clock    clock.Clock
	recorder events.EventRecorder
	opts     Options

	backoff map[string]backoff.Cooldown // node group -> rest after spot shortages
	// failed: on-demand node -> rest after a failed drain (failedDrainBackoff)
	failed map[string]backoff.Cooldown
	// resident answers the re-check before each eviction (see Resident).
	resident *plan.Resident
	// risk is what the informer and the runs have seen of the spot nodes.
	risk  *Risk
	weigh Weigh
	// wake carries NodeChanged's news of spot capacity to Start.
	wake chan struct{}
	// leftOut is the node groups the provider left out at the last run,
	// and why (see reportLeftOut).
	leftOut map[string]string
}

// New returns the migrator. reader should be the manager's cache; drainer
// must be built for Component.
func New(reader client.Reader, kube kubernetes.Interface, provider cloud.Provider, planner *plan.Planner, drainer *drain.Drainer,
	budget *disruption.Budget, clk clock.Clock, recorder events.EventRecorder, opts Options) *Controller {
	if opts.NodeGoneTimeout == 0 {
		opts.NodeGoneTimeout = 5 * time.Minute
	}
	if opts.PollInterval == 0 {
		opts.PollInterval = time.Second
	}
	if opts.MaxNodesPerRun <= 0 {
		opts.MaxNodesPerRun = 10
	}
	if opts.InterruptionWindow <= 0 {
		opts.InterruptionWindow = 24 * time.Hour
	}
	if opts.MaxSpotSharePercent <= 0 {
		opts.MaxSpotSharePercent = 100
	}
	return &Controller{reader: reader, kube: kube, provider: provider, planner: planner, drainer: drainer, budget: budget,
		clock: clk, recorder: recorder, opts: opts, backoff: map[string]backoff.Cooldown{}, failed: map[string]backoff.Cooldown{}, leftOut: map[string]string{},
		risk: NewRisk(opts.InterruptionWindow),
		resident: planner.NewResident(func(ctx context.Context) (*snapshot.Snapshot, error) {
			return snapshot.FromReader(ctx, reader)
		}),
		weigh: Weigh{InterruptionCost: opts.InterruptionCost, MaxShare: float64(opts.MaxSpotSharePercent) / 100},
		wake:  make(chan struct{}, 1)}
}

// Name is the controller's name in logs.
func (c *Controller) Name() string { return Component }

// Register adds the migrator to the manager as a Runnable on the leader only.
func (c *Controller) Register(mgr ctrl.Manager) error { return mgr.Add(c) }

// NeedLeaderElection makes the migrator run on the leader only.
func (c *Controller) NeedLeaderElection() bool { return true }

// Start finishes the replacements a previous process left, then runs until
// ctx ends: at each time of the schedule, SpotReadyDelay after a spot node
// became Ready (NodeChanged), and when the pause of a group that ran short
// during a run ends.
func (c *Controller) Start(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithValues("controller", Component)
	ctx = klog.NewContext(ctx, logger)
	// A provider that learns its instances at start (kwok adopts its Nodes)
	// must know them before a replacement is finished or sizes are read.
	if c.opts.ProviderSynced != nil {
		if coop.WaitClosed(ctx, c.clock, c.opts.ProviderSynced) != nil {
			return nil
		}
	}
	if !c.opts.DryRun {
		c.finishSelected(ctx)
	}
	logged := false
	for {
		now := c.clock.Now()
		next := c.opts.Schedule.Next(now)
		// The cron library answers a schedule that matches no date with a
		// zero time: waiting for it would mean running without pause.
		// Validation refuses such schedules; should one come through, the
		// migrator idles and asks the schedule again a day later.
		run := next.After(now)
		wait := next.Sub(now)
		if !run {
			if !logged {
				logger.Error(errNoNextRun, "Migrations paused: the schedule has no next run; checking it again every day")
				logged = true
			}
			wait = noRunRecheck
		} else {
			logged = false
			logger.V(1).Info("Next migration run", "at", next)
		}
		// A group that ran short is tried again when its pause ends.
		if retry, ok := c.nextRetry(now); ok && retry.Sub(now) < wait {
			wait, run = retry.Sub(now), true
			logger.V(1).Info("Trying a spot node group again after a shortage", "at", retry)
		}
		woken, err := coop.SleepOrReceive(ctx, c.clock, wait, c.wake)
		if err != nil {
			return nil
		}
		if woken {
			logger.V(1).Info("A spot node became Ready: migrating early", "in", c.opts.SpotReadyDelay)
			if coop.Sleep(ctx, c.clock, c.opts.SpotReadyDelay) != nil {
				return nil
			}
			c.drainWake() // news that came during the delay is in this run
		} else if !run {
			continue
		}
		if _, err := c.Run(ctx); err != nil {
			logger.Error(err, "Migration run")
		}
		// Spot nodes that became Ready during the run are its own, or were
		// there for it to use: no reason for another run.
		c.drainWake()
	}
}

// nextRetry returns the earliest end of a group's pause after a shortage
// still to come, if any: the migrator runs then, so that a group whose
// capacity flaps is tried again within minutes. A run at a pause's end that
// has nothing to migrate starts no further pause.
func (c *Controller) nextRetry(now time.Time) (time.Time, bool) {
	var next time.Time
	for _, f := range c.backoff {
		if f.Active(now) && (next.IsZero() || f.Until.Before(next)) {
			next = f.Until
		}
	}
	return next, !next.IsZero()
}

// drainWake forgets news of spot capacity not yet heard.
func (c *Controller) drainWake() {
	select {
	case <-c.wake:
	default:
	}
}

// NodeChanged tells the migrator that a Node was added (old nil) or updated.
// It never blocks; the node informer's event handler and the simulator call
// it. A spot node is recorded for the group choice (its market, that it runs,
// whether the agent tainted it for a termination notice: see Risk). A spot
// node that became Ready is spot capacity returning: a pause of a group of
// its market ends (see spotGroups), and, when SpotReadyDelay is set, the
// migrator runs SpotReadyDelay later instead of at its next scheduled time.
func (c *Controller) NodeChanged(old, node *corev1.Node) {
	if node == nil || c.planner.Classify(node).Class != classify.Spot {
		return
	}
	now := c.clock.Now()
	c.risk.Observe(node, now)
	if !nodeutil.IsNodeReady(node) || old != nil && nodeutil.IsNodeReady(old) || Interrupted(node) {
		return
	}
	c.risk.Ready(MarketOf(node), now)
	if c.opts.SpotReadyDelay <= 0 {
		return
	}
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// NodeDeleted tells the migrator that a Node left the cluster (the node
// informer's delete event): it ran until now.
func (c *Controller) NodeDeleted(node *corev1.Node) {
	if node != nil {
		c.risk.Gone(node.Name, c.clock.Now())
	}
}

// noRunRecheck is how long the migrator waits before it asks a schedule that
// had no next run again.
const noRunRecheck = 24 * time.Hour

var errNoNextRun = errors.New("the migration schedule has no next run after now")

// finishSelected completes the replacements of nodes already selected for
// deletion (by a process that stopped midway).
func (c *Controller) finishSelected(ctx context.Context) {
	logger := klog.FromContext(ctx)
	nodes, err := c.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: SelectedForDeletionLabel})
	if err != nil {
		logger.Error(err, "Listing nodes selected for deletion")
		return
	}
	for i := range nodes.Items {
		node := &nodes.Items[i]
		logger.Info("Finishing the replacement of a node selected for deletion", "node", klog.KObj(node))
		// The plan of the first start is gone: every pod is re-checked
		// against spot, and goes in one wave.
		if err := c.replace(ctx, node, "finishing a replacement started before a restart", c.resident.SpotRecheck(), &plan.NodePlan{Name: node.Name}); err != nil {
			logger.Error(err, "Finishing a replacement", "node", klog.KObj(node))
		}
	}
}

// Run is one migration run. It returns the nodes it replaced.
func (c *Controller) Run(ctx context.Context) ([]string, error) {
	logger := klog.FromContext(ctx)
	runs.Inc()
	now := c.clock.Now()
	if open, next := c.budget.Open(now); !open {
		logger.Info("Outside the allowed drain windows; skipping this run", "nextWindow", next)
		return nil, nil
	}
	groups, err := c.spotGroups(ctx, now)
	if err != nil {
		return nil, err
	}
	if len(groups) == 0 && c.opts.Mode == v1alpha1.MigrationMakeBeforeBreak {
		logger.Info("No spot node group is usable now; nothing to migrate to")
		return nil, nil
	}
	snap, err := snapshot.FromReader(ctx, c.reader)
	if err != nil {
		return nil, fmt.Errorf("reading the cluster from the cache: %w", err)
	}
	// The record of spot nodes as the cache shows them (the informer's
	// events may have been missed), and the groups weighed on it.
	c.syncRisk(snap, now)
	if groups, err = c.spotGroups(ctx, now); err != nil {
		return nil, err
	}
	onDemandBefore := c.onDemandNames(snap)
	var migrated []string
	tried := map[string]bool{}
	// The groups that did not deliver in this run.
	short := map[string]bool{}
	for len(migrated) < c.opts.MaxNodesPerRun {
		node := c.nextCandidate(snap, tried)
		if node == nil {
			break
		}
		tried[node.Name] = true
		ok, stop := c.migrate(ctx, snap, node, groups, short)
		if ok {
			migrated = append(migrated, node.Name)
			nodesMigrated.Inc()
		}
		if stop || ctx.Err() != nil {
			break
		}
		if snap, err = snapshot.FromReader(ctx, c.reader); err != nil {
			return migrated, fmt.Errorf("reading the cluster from the cache: %w", err)
		}
		c.syncRisk(snap, c.clock.Now())
		if c.opts.Mode == v1alpha1.MigrationDrainFirst {
			if added := newOnDemand(c.onDemandNames(snap), onDemandBefore); len(added) > 0 {
				logger.Info("A new on-demand node appeared: the pods did not find spot capacity; stopping this run", "nodes", added)
				break
			}
		}
		if groups, err = c.spotGroups(ctx, c.clock.Now()); err != nil {
			return migrated, err
		}
		if c.opts.Mode == v1alpha1.MigrationMakeBeforeBreak && !slices.ContainsFunc(groups, func(g cloud.NodeGroup) bool { return !short[g.ID()] }) {
			logger.Info("No spot node group is usable now (each is backed off or did not deliver in this run); ending the run")
			break
		}
	}
	logger.Info("Migration run done", "migrated", migrated)
	return migrated, nil
}

// syncRisk records the snapshot's spot nodes in the risk record.
func (c *Controller) syncRisk(snap *snapshot.Snapshot, now time.Time) {
	var spot []*corev1.Node
	for _, n := range snap.Nodes {
		if c.planner.Classify(n).Class == classify.Spot {
			spot = append(spot, n)
		}
	}
	c.risk.Sync(spot, now)
}

// spotGroups returns the usable spot node groups not backed off, in the
// order Weigh gives them (lowest expected price first, spread over markets,
// unknown prices last). A group backed off whose market delivered capacity
// since its shortage (a spot node became Ready: NodeChanged) is usable again.
// Refused groups (control plane on spot) are reported.
func (c *Controller) spotGroups(ctx context.Context, now time.Time) ([]cloud.NodeGroup, error) {
	usable, refused, err := cloud.UsableNodeGroups(ctx, c.provider)
	if err == nil {
		c.reportLeftOut(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("listing node groups: %w", err)
	}
	for _, r := range refused {
		kind := refusedKind(r)
		refusedGroups.WithLabelValues(kind).Inc()
		msg := "Node group refused: it would put the control plane on spot"
		switch kind {
		case KindControlPlane:
			msg = "Control plane refused: its machines would be spot"
		case KindUnchecked:
			msg = "Not checked whether it would put the control plane on spot: refused for this run"
		}
		klog.FromContext(ctx).Error(r, msg)
	}
	var spot []cloud.NodeGroup
	markets := map[string]Market{}
	for _, g := range usable {
		if !g.Spot() {
			continue
		}
		if tmpl, err := g.TemplateNode(ctx); err == nil {
			markets[g.ID()] = MarketOf(tmpl)
		}
		if f := c.backoff[g.ID()]; f.Active(now) {
			since := f.Until.Add(-backoff.Delay(c.opts.SpotUnavailableBackoff, c.opts.MaxSpotUnavailable, f.Failures))
			m, ok := markets[g.ID()]
			if !ok || !c.risk.Returned(m, since) {
				continue
			}
			klog.FromContext(ctx).Info("Spot capacity returned to a backed-off group's instance type and zone; trying it again", "group", g.ID())
			delete(c.backoff, g.ID())
		}
		spot = append(spot, g)
	}
	c.refreshPrices(ctx, spot)
	ws := make([]weighed, len(spot))
	for i, g := range spot {
		price, known := g.PricePerHour()
		m, ok := markets[g.ID()]
		if !ok {
			m = Market{InstanceType: "?unknown:" + g.ID()} // no template: nothing seen of it
		}
		ws[i] = weighed{group: g, market: m, price: price, known: known, stats: c.risk.Stats(m, now)}
	}
	c.weigh.order(ws, c.risk.SpotNodes())
	for i, w := range ws {
		spot[i] = w.group
		klog.FromContext(ctx).V(1).Info("Spot node group weighed", "group", w.group.ID(), "rank", i, "price", w.price, "expectedPrice", w.expected,
			"interruptions", w.stats.Interruptions, "nodeHours", w.stats.NodeHours, "spotNodes", w.stats.Nodes, "overShare", w.over)
	}
	return spot, nil
}

// reportLeftOut says which node groups the provider left out of its last
// read because it could not read or use them (cloud.LeftOutReporter): the
// gauge spotter_migrator_node_group_left_out is 1 for each while it is, and
// a log line and a Warning Event on Options.Self say why when a group is
// left out or its reason changes, not at every run. A group that comes back
// is logged once.
func (c *Controller) reportLeftOut(ctx context.Context) {
	r, ok := c.provider.(cloud.LeftOutReporter)
	if !ok {
		return
	}
	logger := klog.FromContext(ctx)
	now := map[string]string{}
	for _, l := range r.LeftOut() {
		why := l.Err.Error()
		now[l.Group] = why
		leftOutGroups.WithLabelValues(l.Group).Set(1)
		if c.leftOut[l.Group] == why {
			continue
		}
		logger.Error(l.Err, "Node group left out: the cloud provider cannot read or use it", "group", l.Group)
		if c.opts.Self != nil {
			c.event(c.opts.Self, corev1.EventTypeWarning, ReasonNodeGroupLeftOut, "node group %s left out: %s", l.Group, why)
		}
	}
	for g := range c.leftOut {
		if _, ok := now[g]; !ok {
			leftOutGroups.DeleteLabelValues(g)
			logger.Info("Node group usable again", "group", g)
		}
	}
	c.leftOut = now
}

// refreshPrices asks a provider that reads prices from its cloud
// (cloud.PriceReader) for the current prices of the spot groups' instance
// types (from their template nodes), so that the groups are ordered by what
// they cost now; the provider reads at most once per its price TTL. A
// failure keeps the prices read before (or configured), and is logged.
func (c *Controller) refreshPrices(ctx context.Context, groups []cloud.NodeGroup) {
	pr, ok := c.provider.(cloud.PriceReader)
	if !ok || len(groups) == 0 {
		return
	}
	types := map[string]bool{}
	for _, g := range groups {
		if tmpl, err := g.TemplateNode(ctx); err == nil {
			if it := tmpl.Labels[corev1.LabelInstanceTypeStable]; it != "" {
				types[it] = true
			}
		}
	}
	if len(types) == 0 {
		return
	}
	if err := pr.RefreshPrices(ctx, slices.Sorted(maps.Keys(types))); err != nil {
		klog.FromContext(ctx).Error(err, "Reading spot prices from the cloud; ordering the spot groups by the prices read before")
	}
}

// nextCandidate returns the on-demand node to replace next, in the order:
// already selected for deletion, unschedulable, tainted by the cluster
// autoscaler, oldest. Control-plane and excluded nodes, Spotter's own node,
// nodes resting after a failed replacement and nodes in tried are skipped.
func (c *Controller) nextCandidate(snap *snapshot.Snapshot, tried map[string]bool) *corev1.Node {
	var candidates []*corev1.Node
	for _, n := range snap.Nodes {
		if tried[n.Name] || n.Name == c.opts.OwnNode || strings.HasPrefix(n.Name, templatePrefix) || c.failed[n.Name].Active(c.clock.Now()) {
			continue
		}
		if c.planner.Classify(n).Class != classify.OnDemand {
			continue
		}
		candidates = append(candidates, n)
	}
	slices.SortStableFunc(candidates, CompareCandidates)
	if len(candidates) == 0 {
		return nil
	}
	return candidates[0]
}

// CompareCandidates orders two on-demand nodes as the migrator takes them:
// already selected for deletion, unschedulable, tainted by the cluster
// autoscaler, then oldest (then by name). The simulator calls it too.
func CompareCandidates(a, b *corev1.Node) int {
	if d := cmp.Compare(rank(a), rank(b)); d != 0 {
		return d
	}
	if d := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); d != 0 {
		return d
	}
	return cmp.Compare(a.Name, b.Name)
}

// rank orders candidates: lower first.
func rank(n *corev1.Node) int {
	switch {
	case n.Labels[SelectedForDeletionLabel] != "":
		return 0
	case n.Spec.Unschedulable:
		return 1
	case hasTaint(n, ToBeDeletedTaint) || hasTaint(n, DeletionCandidateTaint):
		return 2
	}
	return 3
}

// migrate replaces one node. It tries the spot groups in their order, but
// those found short earlier in the run (shortGroups); a group that does not
// deliver the capacity the node's plan needs is backed off, added to
// shortGroups, and the next one is tried. ok says it was replaced; stop says
// the run must end (the budget is full, the cloud could not be asked, or the
// process is stopping).
func (c *Controller) migrate(ctx context.Context, snap *snapshot.Snapshot, node *corev1.Node, groups []cloud.NodeGroup, shortGroups map[string]bool) (ok, stop bool) {
	logger := klog.FromContext(ctx).WithValues("node", klog.KObj(node))
	ctx = klog.NewContext(ctx, logger)
	// Only a node whose instance the provider can delete can be replaced.
	insts, err := c.provider.Instances(ctx, []*corev1.Node{node})
	if err != nil {
		logger.Error(err, "Looking up the node's instance")
		return false, true
	}
	inst, ok := insts[node.Name]
	if !ok {
		logger.V(1).Info("Not migratable: the cloud provider does not manage this node's instance", "provider", c.provider.Name())
		return false, false
	}
	if inst.Protected != "" {
		logger.V(1).Info("Not migratable: its instance is protected from deletion", "why", inst.Protected)
		return false, false
	}
	// A node whose group is at its minimum size cannot be deleted: do not
	// drain it only to find that out.
	if g, err := c.provider.NodeGroupForNode(ctx, node); err == nil {
		if target, err := g.TargetSize(ctx); err != nil || target-1 < g.MinSize() {
			logger.V(1).Info("Not migratable: its node group is at its minimum size", "group", g.ID(), "target", target, "min", g.MinSize())
			return false, false
		}
	} else if !cloud.IsNotFound(err) {
		logger.Error(err, "Looking up the node's group")
		return false, true
	}
	if c.opts.Mode == v1alpha1.MigrationDrainFirst {
		np, err := c.planWith(ctx, snap, node, groups)
		if err != nil || !np.Drainable {
			c.notMigratable(ctx, node, np, err)
			return false, false
		}
		if c.opts.DryRun {
			logger.Info("Dry run: would drain and delete (drain-first)")
			c.event(nodeRef(node), corev1.EventTypeNormal, ReasonWouldMigrate, "dry run: would drain and delete this node (drain-first); its pods fit on spot node groups")
			return false, false
		}
		if !c.acquire(ctx, node) {
			return false, true
		}
		defer c.budget.Release(node.Name)
		// No re-check of the fit before each eviction: in drain-first the
		// pods wait for an autoscaler to bring the spot nodes the plan
		// counted on. Pods under a notice's budget still come first.
		return c.replaceOrReport(ctx, node, "drain-first: its pods fit on spot node groups", c.resident.HoldForNotices(), np), false
	}

	var last *plan.NodePlan
	short := false
	for _, g := range groups {
		if shortGroups[g.ID()] {
			continue
		}
		np, need, err := c.planOnGroup(ctx, snap, node, g)
		if err != nil {
			logger.Error(err, "Planning against a node group", "group", g.ID())
			continue
		}
		last = np
		if !np.Drainable {
			continue
		}
		if len(np.OnDemandPods()) > 0 && c.budget.RecentlyReceived(node.Name, c.clock.Now()) {
			// Its pinned pods would go back where a consolidation just
			// brought others from: not now (disruption.ConsolidationHold).
			logger.V(1).Info("Not migratable now: a consolidation sent pods to this node less than an hour ago, and its plan sends its own to other on-demand nodes",
				"hold", disruption.ConsolidationHold)
			return false, false
		}
		if c.opts.DryRun {
			logger.Info("Dry run: would migrate", "group", g.ID(), "newNodes", need)
			c.event(nodeRef(node), corev1.EventTypeNormal, ReasonWouldMigrate, "dry run: would add %d node(s) to spot group %s, then drain and delete this node", need, g.ID())
			return false, false
		}
		// The budget slot first: capacity asked for and then not used would
		// sit idle.
		if !c.acquire(ctx, node) {
			return false, true
		}
		if need > 0 {
			delivered, wasShort := c.addCapacity(ctx, node, g, need, false)
			if wasShort {
				// g is backed off, and not asked again in this run
				// whatever its backoff (a short one may end before the
				// run does): the next group may deliver. A short
				// delivery the node's pods fit on is used all the same.
				shortGroups[g.ID()] = true
			}
			if !delivered {
				// Nothing was drained.
				c.budget.Release(node.Name)
				if !wasShort || ctx.Err() != nil {
					return false, true
				}
				short = true
				continue
			}
		}
		defer c.budget.Release(node.Name)
		recheck := c.topUp(node, g, max(need, 1), np, c.resident.Recheck(np))
		ok := c.replaceOrReport(ctx, node, fmt.Sprintf("replaced by spot capacity of group %s", g.ID()), recheck, np)
		if ok {
			for _, dest := range np.OnDemandDestinations() {
				c.budget.Received(dest, c.clock.Now())
			}
		}
		return ok, false
	}
	if short {
		// Its pods fit, but no group delivered: each said why
		// (spotUnavailable, requestFailed).
		return false, false
	}
	c.notMigratable(ctx, node, last, nil)
	return false, false
}

// planWith plans node against every group's template (drain-first).
func (c *Controller) planWith(ctx context.Context, snap *snapshot.Snapshot, node *corev1.Node, groups []cloud.NodeGroup) (*plan.NodePlan, error) {
	var last *plan.NodePlan
	for _, g := range groups {
		np, _, err := c.planOnGroup(ctx, snap, node, g)
		if err != nil {
			return nil, err
		}
		if np.Drainable {
			return np, nil
		}
		last = np
	}
	if last == nil {
		// No group: the spot capacity in the cluster is all there is.
		p, err := c.planner.Plan(ctx, snap)
		if err != nil {
			return nil, err
		}
		return find(p, node.Name), nil
	}
	return last, nil
}

// planWithTemplates plans the cluster of snap with room more nodes like g's
// template (at most as many as its pods need).
func (c *Controller) planWithTemplates(ctx context.Context, snap *snapshot.Snapshot, g cloud.NodeGroup, room int) (*plan.Plan, error) {
	withTemplates := *snap
	withTemplates.Revision = "" // not the cluster's state: it has virtual nodes
	withTemplates.Nodes = slices.Clone(snap.Nodes)
	if room > 0 {
		tmpl, err := g.TemplateNode(ctx)
		if err != nil {
			return nil, err
		}
		// A node needs at most as many new nodes as it has pods.
		for i := range min(room, len(snap.Pods)+1, c.opts.MaxNodesPerRun*10) {
			n := tmpl.DeepCopy()
			n.Name = fmt.Sprintf("%s%s-%d", templatePrefix, g.ID(), i)
			n.Labels["kubernetes.io/hostname"] = n.Name
			withTemplates.Nodes = append(withTemplates.Nodes, n)
		}
	}
	return c.planner.Plan(ctx, &withTemplates)
}

// planOnGroup plans the cluster with as many of g's template nodes as g can
// still add, and returns node's verdict and how many new nodes its plan
// needs: those its pods go to, and those the pods it displaces from other
// nodes go to (a consolidation makes room on an on-demand node that stays by
// moving some of that node's pods to spot).
func (c *Controller) planOnGroup(ctx context.Context, snap *snapshot.Snapshot, node *corev1.Node, g cloud.NodeGroup) (*plan.NodePlan, int, error) {
	target, err := g.TargetSize(ctx)
	if err != nil {
		return nil, 0, err
	}
	// The plan is the whole cluster's: every candidate of a run, and every
	// run until the cluster changes, reads the same one.
	key := fmt.Sprintf("%s/%d", g.ID(), target)
	if snap.Revision == "" || c.groupPlans.revision != snap.Revision {
		c.groupPlans.revision, c.groupPlans.plans = snap.Revision, map[string]*plan.Plan{}
	}
	p := c.groupPlans.plans[key]
	if p == nil {
		if p, err = c.planWithTemplates(ctx, snap, g, g.MaxSize()-target); err != nil {
			return nil, 0, err
		}
		if snap.Revision != "" {
			c.groupPlans.plans[key] = p
		}
	}
	np := find(p, node.Name)
	if np == nil {
		return nil, 0, fmt.Errorf("node %s is not in the plan", node.Name)
	}
	used := map[string]bool{}
	for _, pp := range slices.Concat(np.Pods, np.Displaced) {
		if strings.HasPrefix(pp.Destination, templatePrefix) {
			used[pp.Destination] = true
		}
	}
	return np, len(used), nil
}

// topUp wraps the re-check of a drain onto g's nodes. Once the drain has let
// a pod go, a pod bound for spot that no longer fits there (other pods, new
// or scaled up, took the room the migrator asked for while the drain waited
// between its waves) is not the end of the drain: g is asked for one more
// node, at most limit in all, and the pod's eviction is held until the next
// attempt (drain.ErrNotNow), which re-checks it with the new node. Rolling
// back instead would leave the pods already evicted evicted for nothing. A
// pod bound for an on-demand node, a drain that has let no pod go yet (its
// rollback costs nothing), and a group that cannot deliver end the drain as
// the re-check says.
func (c *Controller) topUp(node *corev1.Node, g cloud.NodeGroup, limit int, np *plan.NodePlan, recheck func(context.Context, *corev1.Pod) error) func(context.Context, *corev1.Pod) error {
	onDemand := np.OnDemandPods()
	// A wave's evictions run in parallel; the state is shared, and no lock
	// is held while the node comes (the simulator runs the goroutines one
	// at a time: one blocked on a lock would stop it).
	var mu sync.Mutex
	started, adding := false, false
	var added time.Time
	waitForIt := func(pod *corev1.Pod) error {
		return fmt.Errorf("%w: waiting for the node spot group %s adds for this drain; %s/%s is checked again then", drain.ErrNotNow, g.ID(), pod.Namespace, pod.Name)
	}
	return func(ctx context.Context, pod *corev1.Pod) error {
		mu.Lock()
		busy := adding
		mu.Unlock()
		if busy {
			return waitForIt(pod)
		}
		err := recheck(ctx, pod)
		mu.Lock()
		if err == nil {
			started = true
			mu.Unlock()
			return nil
		}
		if adding || (!added.IsZero() && c.clock.Since(added) < topUpSettle) {
			// The node asked for, or the cluster view (the informer behind
			// the re-check) not showing it yet.
			mu.Unlock()
			return waitForIt(pod)
		}
		if !started || limit == 0 || onDemand[pod.Namespace+"/"+pod.Name] || errors.Is(err, drain.ErrNotNow) {
			mu.Unlock()
			return err
		}
		limit--
		adding = true
		mu.Unlock()
		klog.FromContext(ctx).Info("A pod of the drain no longer fits on spot; asking for one more node", "pod", klog.KObj(pod), "group", g.ID(), "why", err.Error())
		delivered, _ := c.addCapacity(ctx, node, g, 1, true)
		mu.Lock()
		adding = false
		if delivered {
			added = c.clock.Now()
		}
		mu.Unlock()
		if !delivered {
			return fmt.Errorf("%w; spot node group %s could not add a node for it", err, g.ID())
		}
		topUps.WithLabelValues(g.ID()).Inc()
		return fmt.Errorf("%w: spot node group %s added a node for %s/%s, which %w", drain.ErrNotNow, g.ID(), pod.Namespace, pod.Name, err)
	}
}

// topUpSettle is how long after a node added mid-drain came a pod that
// still does not fit is held rather than failed: the re-check reads the
// cluster through an informer, which may not show the node yet.
const topUpSettle = 10 * time.Second

// addCapacity asks g for need more nodes and waits until they can take pods
// (takesPods): delivered. It acts on what the cloud says as soon as it says
// it:
//   - a stock-out, whether IncreaseSize refuses at once or a request not yet
//     fulfilled reports it (Instance.Err, read at every poll), cancels what
//     is unfulfilled and backs g off: short, and the caller asks the next
//     group;
//   - throttling of the request (IncreaseSize's *cloud.ThrottledError) is no
//     shortage: the request is asked again after the cloud's Retry-After
//     (PollInterval when it names none) until NodeReadyTimeout;
//   - any other refusal (access denied, a malformed group, a size limit) is
//     an error of g, not a shortage: a SpotterSpotRequestFailed Event and
//     spotter_migrator_spot_request_errors_total, and no backoff. short is
//     set, so that the caller tries the next group; g is not asked again in
//     the run.
//
// Capacity that does not come within NodeReadyTimeout, with nothing said, is
// cancelled and g backed off: short. Neither when g's nodes could not be
// listed: g was not asked. midDrain is set for a node asked for while node's
// drain is under way (topUp), and changes only what the log and the Events
// say.
func (c *Controller) addCapacity(ctx context.Context, node *corev1.Node, g cloud.NodeGroup, need int, midDrain bool) (delivered, short bool) {
	logger := klog.FromContext(ctx).WithValues("group", g.ID(), "newNodes", need)
	before, err := g.Nodes(ctx)
	if err != nil {
		logger.Error(err, "Listing the group's nodes")
		return false, false
	}
	known := map[string]bool{}
	for _, inst := range before {
		known[inst.ID] = true
	}
	deadline := c.clock.Now().Add(c.opts.NodeReadyTimeout)
	if !c.request(ctx, node, g, need, deadline, midDrain) {
		return false, true
	}
	logger.Info("Asked for spot capacity")
	if midDrain {
		c.event(nodeRef(node), corev1.EventTypeNormal, ReasonSpotTopUp, "asked spot node group %s for %d more node(s) during this node's drain: a pod still to be evicted no longer fits on the spot capacity there is", g.ID(), need)
	} else {
		c.event(nodeRef(node), corev1.EventTypeNormal, ReasonSpotRequested, "asked spot node group %s for %d node(s) to replace this node", g.ID(), need)
	}
	// A stock-out the cloud reports ends the request at once, save for
	// the instances it did launch, which are waited for (up to the
	// deadline) so that they can be used or given back once they are nodes.
	var stockOut error
	for {
		p, err := c.progress(ctx, g, known)
		if p.ready >= need {
			logger.Info("Spot capacity is Ready")
			delete(c.backoff, g.ID()) // the group delivers again
			return true, false
		}
		if p.stockOut != nil && stockOut == nil {
			stockOut = p.stockOut
			c.cancelUnfulfilled(ctx, g, known, need-p.ready-p.inFlight)
			if p.inFlight > 0 {
				logger.Info("The cloud reports a shortage; waiting for the instances it launched", "ready", p.ready, "launching", p.inFlight)
			}
		}
		var cause error
		timedOut := !c.clock.Now().Before(deadline) || ctx.Err() != nil
		switch {
		case stockOut != nil && (p.inFlight == 0 || timedOut):
			cause = fmt.Errorf("%d of %d new node(s) Ready; the cloud reports: %w", p.ready, need, stockOut)
		case timedOut:
			cause = fmt.Errorf("%d of %d new node(s) Ready after %s", p.ready, need, c.opts.NodeReadyTimeout)
			if late := cmp.Or(p.late, err); late != nil {
				cause = fmt.Errorf("%w: %w", cause, late)
			}
		}
		if cause != nil {
			c.cancelUnfulfilled(ctx, g, known, need-p.ready)
			c.spotUnavailable(ctx, node, g, cause, midDrain)
			c.deleteUnregistered(ctx, node, g, known)
			if p.ready > 0 {
				if !midDrain && c.fitsOnNodes(ctx, node, g) {
					logger.Info("Using the spot capacity delivered: the node's pods fit on the nodes there are", "ready", p.ready)
					return true, true
				}
				c.giveBack(ctx, node, g, known)
			}
			return false, true
		}
		_ = coop.Sleep(ctx, c.clock, c.opts.PollInterval)
	}
}

// request asks g for need more nodes (IncreaseSize), again after each
// throttling until deadline, and reports whether the request is recorded. A
// refusal is reported: a stock-out backs g off (spotUnavailable), anything
// else is an error of g (requestFailed).
func (c *Controller) request(ctx context.Context, node *corev1.Node, g cloud.NodeGroup, need int, deadline time.Time, midDrain bool) bool {
	for {
		err := g.IncreaseSize(ctx, need)
		switch {
		case err == nil:
			return true
		case cloud.IsCapacityUnavailable(err):
			c.spotUnavailable(ctx, node, g, err, midDrain)
			return false
		case cloud.IsThrottled(err) && ctx.Err() == nil:
			wait, ok := cloud.RetryAfter(err)
			if !ok || wait <= 0 {
				wait = c.opts.PollInterval
			}
			if c.clock.Now().Add(wait).After(deadline) {
				c.requestFailed(ctx, node, g, fmt.Errorf("still throttled after %s: %w", c.opts.NodeReadyTimeout, err))
				return false
			}
			spotRequestErrors.WithLabelValues(g.ID(), labelThrottled).Inc()
			klog.FromContext(ctx).Info("The cloud throttles the request for spot capacity; asking again", "group", g.ID(), "retryAfter", wait, "cause", err.Error())
			if coop.Sleep(ctx, c.clock, wait) != nil {
				return false
			}
		default:
			c.requestFailed(ctx, node, g, err)
			return false
		}
	}
}

// requestFailed reports a request for spot capacity that g refused for
// another reason than a stock-out: an error to fix, which backs nothing off.
func (c *Controller) requestFailed(ctx context.Context, node *corev1.Node, g cloud.NodeGroup, err error) {
	spotRequestErrors.WithLabelValues(g.ID(), labelError).Inc()
	klog.FromContext(ctx).Error(err, "The spot node group refused the request; not a shortage, so the group is not backed off", "group", g.ID())
	c.event(nodeRef(node), corev1.EventTypeWarning, ReasonSpotRequestFailed,
		"spot node group %s refused the request for capacity (%v); not a shortage: check the group and Spotter's permissions; the next group is tried", g.ID(), err)
}

// cancelUnfulfilled cancels up to most of g's new requests not yet
// fulfilled: an instance that came up but is not Ready is the group's to
// deal with. A fresh context: the request must be cancelled even at shutdown.
func (c *Controller) cancelUnfulfilled(ctx context.Context, g cloud.NodeGroup, known map[string]bool, most int) {
	unfulfilled := min(most, c.waiting(ctx, g, known))
	if unfulfilled <= 0 {
		return
	}
	cctx, cancel := drain.WithClockTimeout(context.WithoutCancel(ctx), c.clock, 30*time.Second)
	defer cancel()
	// What counts as unfulfilled differs by cloud (an instance being
	// launched can be cancelled on some, not on others): fewer are asked
	// when the group says it has fewer.
	for n := unfulfilled; n > 0; n-- {
		err := g.DecreaseTargetSize(cctx, n)
		if err == nil {
			return
		}
		if !errors.Is(err, cloud.ErrNotUnfulfilled) || n == 1 {
			klog.FromContext(ctx).Error(err, "Cancelling the unfulfilled request", "group", g.ID())
			return
		}
	}
}

// broughtInstance is an instance a request brought, with its Node (nil
// when it has none, or none could be read).
type broughtInstance struct {
	inst cloud.Instance
	node *corev1.Node
}

// brought lists the instances of g a request brought (not in known), with
// their Nodes, on a fresh context for what follows, which the caller
// cancels: what a short request leaves must go even at shutdown.
func (c *Controller) brought(ctx context.Context, g cloud.NodeGroup, known map[string]bool) (context.Context, context.CancelFunc, []broughtInstance) {
	cctx, cancel := drain.WithClockTimeout(context.WithoutCancel(ctx), c.clock, 30*time.Second)
	insts, err := g.Nodes(cctx)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Listing the instances a short request brought", "group", g.ID())
		return cctx, cancel, nil
	}
	var out []broughtInstance
	for _, inst := range insts {
		// Running, or launched and still being created (an ID, no
		// error); not a request that never got an instance.
		launched := inst.State == cloud.InstanceRunning || (inst.State == cloud.InstanceCreating && inst.ID != "" && inst.Err == nil)
		if known[inst.ID] || !launched {
			continue
		}
		b := broughtInstance{inst: inst}
		if inst.NodeName != "" {
			b.node, _ = c.kube.CoreV1().Nodes().Get(cctx, inst.NodeName, metav1.GetOptions{})
		}
		out = append(out, b)
	}
	return cctx, cancel, out
}

// deleteUnregistered deletes, through g, the new instances (not in known)
// that run but have no Node that takes pods when a request ends short: an
// instance that never registers is billed and idle.
func (c *Controller) deleteUnregistered(ctx context.Context, node *corev1.Node, g cloud.NodeGroup, known map[string]bool) {
	cctx, cancel, brought := c.brought(ctx, g, known)
	defer cancel()
	var stale []*corev1.Node
	for _, b := range brought {
		switch {
		case b.inst.NodeName == "":
			stale = append(stale, &corev1.Node{Spec: corev1.NodeSpec{ProviderID: b.inst.ID}})
		case b.node != nil && !takesPods(b.node):
			stale = append(stale, b.node)
		}
	}
	c.delete(cctx, node, g, stale, labelUnregistered, "never became nodes that take pods")
}

// fitsOnNodes reports whether node's pods fit on the cluster's nodes as they
// are now, with what a short request delivered and no more: the drain then
// goes ahead, each eviction re-checked as always.
func (c *Controller) fitsOnNodes(ctx context.Context, node *corev1.Node, g cloud.NodeGroup) bool {
	if c.reader == nil {
		return false
	}
	snap, err := snapshot.FromReader(ctx, c.reader)
	if err != nil {
		return false
	}
	p, err := c.planWithTemplates(ctx, snap, g, 0)
	if err != nil {
		return false
	}
	np := find(p, node.Name)
	return np != nil && np.Drainable
}

// giveBack deletes, through g, the new nodes (instances not in known) of a
// short request that the node's drain will not use and that no pod has
// taken yet (DaemonSets' and static pods aside): they would sit idle.
func (c *Controller) giveBack(ctx context.Context, node *corev1.Node, g cloud.NodeGroup, known map[string]bool) {
	cctx, cancel, brought := c.brought(ctx, g, known)
	defer cancel()
	var idle []*corev1.Node
	for _, b := range brought {
		if b.node == nil {
			continue
		}
		pods, err := c.kube.CoreV1().Pods("").List(cctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + b.node.Name})
		if err != nil {
			continue
		}
		if !slices.ContainsFunc(pods.Items, func(p corev1.Pod) bool { return !drain.NodeBound(&p) && p.DeletionTimestamp == nil }) {
			idle = append(idle, b.node)
		}
	}
	c.delete(cctx, node, g, idle, labelUnused, "came, but too few for this node's pods, and no pod took them")
}

// delete deletes nodes of g a short request brought (why), counts them and
// says so on node.
func (c *Controller) delete(ctx context.Context, node *corev1.Node, g cloud.NodeGroup, nodes []*corev1.Node, kind, why string) {
	if len(nodes) == 0 {
		return
	}
	if err := g.DeleteNodes(ctx, nodes); err != nil {
		klog.FromContext(ctx).Error(err, "Deleting the spot capacity a short request brought", "group", g.ID(), "kind", kind)
		return
	}
	spotGivenBack.WithLabelValues(g.ID(), kind).Add(float64(len(nodes)))
	klog.FromContext(ctx).Info("Deleted spot capacity a short request brought", "group", g.ID(), "instances", len(nodes), "why", why)
	c.event(nodeRef(node), corev1.EventTypeNormal, ReasonSpotGivenBack, "deleted %d instance(s) of spot node group %s that %s", len(nodes), g.ID(), why)
}

// waiting counts the group's new requests not yet fulfilled.
func (c *Controller) waiting(ctx context.Context, g cloud.NodeGroup, known map[string]bool) int {
	insts, err := g.Nodes(context.WithoutCancel(ctx))
	if err != nil {
		return 0
	}
	n := 0
	for _, inst := range insts {
		if !known[inst.ID] && inst.State == cloud.InstanceCreating {
			n++
		}
	}
	return n
}

// growth is how a request for capacity stands: the group's instances not in
// known.
type growth struct {
	// ready counts those whose Node takes pods.
	ready int
	// inFlight counts those the cloud launched that are not ready yet:
	// running, or being created with no error (and an ID: not a request
	// still waiting for capacity).
	inFlight int
	// late is what holds up the others, when the cloud says.
	late error
	// stockOut is a stock-out a request not yet fulfilled reports (a
	// *cloud.CapacityUnavailableError).
	stockOut error
}

// progress reads how the request for g's new instances (those not in known)
// stands; an error says g's instances could not be listed.
func (c *Controller) progress(ctx context.Context, g cloud.NodeGroup, known map[string]bool) (growth, error) {
	var p growth
	insts, err := g.Nodes(ctx)
	if err != nil {
		return p, err
	}
	for _, inst := range insts {
		if known[inst.ID] {
			continue
		}
		if inst.Err != nil {
			p.late = inst.Err
			if inst.State == cloud.InstanceCreating && cloud.IsCapacityUnavailable(inst.Err) {
				p.stockOut = inst.Err
			}
		}
		ready := false
		if inst.NodeName != "" {
			n, err := c.kube.CoreV1().Nodes().Get(ctx, inst.NodeName, metav1.GetOptions{})
			ready = err == nil && takesPods(n)
		}
		switch {
		case ready:
			p.ready++
		case inst.State == cloud.InstanceRunning || (inst.State == cloud.InstanceCreating && inst.ID != "" && inst.Err == nil):
			p.inFlight++
		}
	}
	return p, nil
}

// takesPods reports whether a new node can take pods: Ready, not cordoned,
// and rid of the lifecycle taints a node starts with (node.kubernetes.io/...,
// such as not-ready, which the node lifecycle controller removes a few
// seconds after the Ready condition, and the cloud provider's
// node.cloudprovider.kubernetes.io/uninitialized). A drain that starts
// before that fails its re-check on the new node's taint and is rolled back:
// in the lab's GCP and Azure migrator tests, every such first try cost the
// node a minute's rest.
func takesPods(n *corev1.Node) bool {
	if !nodeutil.IsNodeReady(n) || n.Spec.Unschedulable {
		return false
	}
	for _, t := range n.Spec.Taints {
		if t.Effect != corev1.TaintEffectPreferNoSchedule &&
			(strings.HasPrefix(t.Key, "node.kubernetes.io/") || strings.HasPrefix(t.Key, "node.cloudprovider.kubernetes.io/")) {
			return false
		}
	}
	return true
}

// spotUnavailable backs g off, longer while the shortage lasts, has the loop
// run again when the pause ends, and says so. midDrain: the request was
// made during node's drain (topUp), which is then rolled back.
func (c *Controller) spotUnavailable(ctx context.Context, node *corev1.Node, g cloud.NodeGroup, cause error, midDrain bool) {
	f := c.backoff[g.ID()]
	now := c.clock.Now()
	f.FailStreak(now, c.opts.SpotUnavailableBackoff, c.opts.MaxSpotUnavailable)
	c.backoff[g.ID()] = f
	spotUnavailable.WithLabelValues(g.ID()).Inc()
	outcome := "nothing drained"
	if midDrain {
		outcome = "the drain is rolled back"
	}
	klog.FromContext(ctx).Info("Spot capacity unavailable; request cancelled, "+outcome, "group", g.ID(), "backoff", f.Until.Sub(now), "shortages", f.Failures, "cause", cause.Error())
	c.event(nodeRef(node), corev1.EventTypeWarning, ReasonSpotUnavailable,
		"spot node group %s could not deliver capacity (%v); request cancelled, %s; the group is skipped until %s",
		g.ID(), cause, outcome, f.Until.UTC().Format(time.RFC3339))
}

// acquire takes a slot of the shared disruption budget for node, within an
// allowed window.
func (c *Controller) acquire(ctx context.Context, node *corev1.Node) bool {
	if open, next := c.budget.Open(c.clock.Now()); !open {
		klog.FromContext(ctx).Info("The drain window closed; ending the run", "nextWindow", next)
		return false
	}
	if err := c.budget.Acquire(node.Name, Component); err != nil {
		klog.FromContext(ctx).Info("Not replacing now", "reason", err.Error())
		return false
	}
	return true
}

// replaceOrReport replaces node and reports a failure.
func (c *Controller) replaceOrReport(ctx context.Context, node *corev1.Node, why string, recheck func(context.Context, *corev1.Pod) error, np *plan.NodePlan) bool {
	if err := c.replace(ctx, node, why, recheck, np); err != nil {
		f := c.failed[node.Name]
		f.Fail(c.clock.Now(), failedDrainBackoff, maxFailedDrainBackoff)
		c.failed[node.Name] = f
		klog.FromContext(ctx).Error(err, "Replacing the node; not trying it again for a while", "until", f.Until)
		c.event(nodeRef(node), corev1.EventTypeWarning, ReasonMigrationFailed, "%v; not tried again until %s", err, f.Until.UTC().Format(time.RFC3339))
		return false
	}
	delete(c.failed, node.Name)
	return true
}

// A node whose replacement failed (its drain rolled back) rests for
// failedDrainBackoff, twice as long after each further failure, at most
// maxFailedDrainBackoff: runs come every hour and whenever spot capacity
// returns, and in `spotter simulate` a node whose re-check kept failing was
// drained and rolled back every few minutes. The first rest is short: a
// drain often fails once on a new spot node's passing taints (not ready,
// uninitialized), and the next try succeeds.
const (
	failedDrainBackoff    = time.Minute
	maxFailedDrainBackoff = 4 * time.Hour
)

// replace selects node for deletion, drains it as np plans (in its waves,
// with the pods it displaces from other nodes), taints it for deletion,
// deletes its instance and waits for the Node object to go. A failed drain is
// rolled back (the selection label too).
func (c *Controller) replace(ctx context.Context, node *corev1.Node, why string, recheck func(context.Context, *corev1.Pod) error, np *plan.NodePlan) error {
	logger := klog.FromContext(ctx)
	if err := c.patchNode(ctx, node.Name, fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, SelectedForDeletionLabel, fmt.Sprint(c.clock.Now().Unix()))); err != nil {
		return fmt.Errorf("selecting node %s for deletion: %w", node.Name, err)
	}
	c.event(nodeRef(node), corev1.EventTypeNormal, ReasonSelected, "selected for deletion: %s", why)
	dctx, cancel := drain.Outlive(ctx, c.clock, c.opts.ShutdownGracePeriod)
	drains.WithLabelValues(drain.OutcomeStarted).Inc()
	res, err := c.drainer.Drain(dctx, drain.Request{Node: node.Name, Reason: why, KeepMarks: true, BeforeEvict: recheck, Waves: np.PodWaves(), Displaced: np.DisplacedPods()})
	// The re-checks' snapshot is as large as the cluster: not kept between
	// drains.
	c.resident.Invalidate()
	cancel()
	podsEvicted.Add(float64(len(res.Evicted)))
	if err != nil {
		drains.WithLabelValues(drain.OutcomeFailed).Inc()
		if res.RolledBack {
			drains.WithLabelValues(drain.OutcomeRolledBack).Inc()
		}
		c.unselect(ctx, node.Name, false)
		return fmt.Errorf("node %s not replaced: %w", node.Name, err)
	}
	drains.WithLabelValues(drain.OutcomeSucceeded).Inc()
	if err := c.taintForDeletion(ctx, node.Name); err != nil {
		return err
	}
	current, err := c.kube.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	// NotFound: the instance is gone already (a replacement that stopped
	// after the delete); the Node object follows.
	if err := c.provider.DeleteInstance(ctx, current); err != nil && !cloud.IsNotFound(err) {
		// The node stays: give it back, schedulable, rather than leave it
		// drained and marked.
		c.unselect(ctx, node.Name, true)
		return fmt.Errorf("deleting the instance of node %s: %w; the node was given back", node.Name, err)
	}
	if err := c.waitGone(ctx, node.Name); err != nil {
		return err
	}
	logger.Info("Node replaced by spot capacity", "why", why)
	c.event(nodeRef(node), corev1.EventTypeNormal, ReasonMigrated, "drained and deleted: %s", why)
	return nil
}

// Resident is what answers the re-check before each eviction: feed it the
// cluster's changes (plan.Resident), or it reads the whole cluster for each.
func (c *Controller) Resident() *plan.Resident { return c.resident }

// unselect gives a node back after a failed replacement: the selection label,
// the drain marks (when drained is set; a failed drain rolls its own back) and
// the deletion taint go.
func (c *Controller) unselect(ctx context.Context, name string, drained bool) {
	logger := klog.FromContext(ctx)
	uctx, cancel := drain.WithClockTimeout(context.WithoutCancel(ctx), c.clock, 30*time.Second)
	defer cancel()
	if drained {
		if err := c.drainer.Unmark(uctx, name, true); err != nil {
			logger.Error(err, "Removing the drain marks of a node that was not deleted", "node", name)
		}
	}
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := c.kube.CoreV1().Nodes().Get(uctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		delete(node.Labels, SelectedForDeletionLabel)
		kept := node.Spec.Taints[:0]
		for _, t := range node.Spec.Taints {
			if t.Key != ToBeDeletedTaint {
				kept = append(kept, t)
			}
		}
		node.Spec.Taints = kept
		_, err = c.kube.CoreV1().Nodes().Update(uctx, node, metav1.UpdateOptions{})
		return err
	}); err != nil {
		logger.Error(err, "Giving a node back after a failed replacement", "node", name)
	}
}

func (c *Controller) taintForDeletion(ctx context.Context, name string) error {
	node, err := c.kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil || hasTaint(node, ToBeDeletedTaint) {
		return client.IgnoreNotFound(err)
	}
	node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: ToBeDeletedTaint, Value: fmt.Sprint(c.clock.Now().Unix()), Effect: corev1.TaintEffectNoSchedule})
	if _, err := c.kube.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("tainting node %s for deletion: %w", name, err)
	}
	return nil
}

func (c *Controller) waitGone(ctx context.Context, name string) error {
	deadline := c.clock.Now().Add(c.opts.NodeGoneTimeout)
	for {
		_, err := c.kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if !c.clock.Now().Before(deadline) {
			return fmt.Errorf("node %s still exists %s after its instance was deleted", name, c.opts.NodeGoneTimeout)
		}
		if coop.Sleep(ctx, c.clock, c.opts.PollInterval) != nil {
			return ctx.Err()
		}
	}
}

func (c *Controller) patchNode(ctx context.Context, name, patch string) error {
	_, err := c.kube.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

// notMigratable says why a node stays.
func (c *Controller) notMigratable(ctx context.Context, node *corev1.Node, np *plan.NodePlan, err error) {
	reason := "no usable spot node group"
	switch {
	case err != nil:
		reason = err.Error()
	case np != nil && np.Reason != "":
		reason = np.Reason
	}
	if np != nil && np.ConsolidationReason != "" {
		reason += "; not consolidated: " + np.ConsolidationReason
	}
	klog.FromContext(ctx).V(1).Info("Not migratable", "reason", reason)
}

func (c *Controller) onDemandNames(snap *snapshot.Snapshot) map[string]bool {
	out := map[string]bool{}
	for _, n := range snap.Nodes {
		if c.planner.Classify(n).Class == classify.OnDemand {
			out[n.Name] = true
		}
	}
	return out
}

func newOnDemand(now, before map[string]bool) []string {
	var added []string
	for n := range now {
		if !before[n] {
			added = append(added, n)
		}
	}
	slices.Sort(added)
	return added
}

func (c *Controller) event(ref *corev1.ObjectReference, typ, reason, note string, args ...any) {
	if c.recorder != nil {
		c.recorder.Eventf(ref, nil, typ, reason, "Migrate", note, args...)
	}
}

func nodeRef(n *corev1.Node) *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "Node", Name: n.Name, UID: types.UID(n.Name)}
}

func find(p *plan.Plan, name string) *plan.NodePlan {
	for i := range p.Nodes {
		if p.Nodes[i].Name == name {
			return &p.Nodes[i]
		}
	}
	return nil
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}
