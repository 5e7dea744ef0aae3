// Package preemptible drains the nodes of Compute Engine preemptible VMs
// before their run ends. Compute Engine stops a preemptible VM (not a Spot
// VM) after 24 hours of running, with 30 seconds of notice: too little for
// pods with long grace periods or PodDisruptionBudgets that let them go one
// at a time. From drainBefore ahead of the end of a node's run, the
// controller drains it through the drain engine (PodDisruptionBudgets
// honoured, each eviction retried with backoff), with a slot of the
// disruption budget the rescheduler and the migrator share and inside its
// windows, the run that ends first first, one node at a time; it waits for
// the evicted pods' replacements before the next drain, and leaves the node
// cordoned: it is stopped at the end of its run, or removed earlier by an
// autoscaler once empty.
//
// A run is read from the Node (see RunOf): it starts when the node
// registered, which is a little after its VM started, so the end it gives is
// as much late; drainBefore covers that.
//
// A node whose run ends before it could be drained (the budget was spent,
// the windows closed, its drains failed) is reported with an Event and a
// metric, and left to the preemption notice: the controller never deletes a
// node or a pod. A dry run drains nothing and reports each node once, when it
// is due.
//
// State lives on the Node: the drain engine's marks while a drain runs, then
// the controller's record (DrainedAnnotation), which keeps a drained node
// from being drained again and names the boot it was drained in. When the VM
// behind a Node object is replaced (another boot ID), its record and the
// cordon the controller put on it are lifted, so that a Node object that
// outlives its VM is not left cordoned.
package preemptible

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"spotter.dev/spotter/internal/backoff"
	"spotter.dev/spotter/internal/classify"
	"spotter.dev/spotter/internal/coop"
	"spotter.dev/spotter/internal/disruption"
	"spotter.dev/spotter/internal/drain"
)

// Component is the controller's name on drain marks and Events.
const Component = "preemptible"

// Event reasons.
const (
	// ReasonNotDrained: the node's run ended before it was drained.
	ReasonNotDrained = "SpotterPreemptibleNotDrained"
	// ReasonReplaced: the VM behind a drained node was replaced; its cordon
	// and record were lifted.
	ReasonReplaced = "SpotterPreemptibleReplaced"
)

// Options configure the controller.
type Options struct {
	// Selectors select the nodes of preemptible VMs: a node matching any of
	// them is one.
	Selectors []labels.Selector
	// Timing says how long a run lasts and how long before its end a node
	// is drained.
	Timing
	// ReplacementTimeout bounds the wait, after a drain, for the evicted
	// pods' replacements to be Running. Default 5m.
	ReplacementTimeout time.Duration
	// Interval is the longest wait between two cycles. Default 1m.
	Interval time.Duration
	// FailureBackoff is a node's first cooldown after a failed drain; it
	// doubles up to MaxFailureBackoff. Defaults 1m and 10m.
	FailureBackoff, MaxFailureBackoff time.Duration
	// OnRestart says what to do with a drain of this controller found
	// unfinished at start.
	OnRestart drain.RecoverPolicy
	// ShutdownGracePeriod is how long a drain in flight at shutdown may go on
	// before it is rolled back (see drain.Outlive).
	ShutdownGracePeriod time.Duration
	// OwnNode is the node Spotter runs on (NODE_NAME): drained last.
	OwnNode string
	DryRun  bool
}

// Controller is the preemptible controller.
type Controller struct {
	reader     client.Reader
	kube       kubernetes.Interface
	classifier *classify.Classifier
	drainer    *drain.Drainer
	budget     *disruption.Budget
	clock      clock.Clock
	recorder   events.EventRecorder
	opts       Options

	failures map[string]backoff.Cooldown // node -> cooldown after failed drains
	// failed holds, per node, the error of its last failed drain.
	failed map[string]string
	// blocked says, per node, why it was not drained when it was last due.
	blocked map[string]string
	// ended and wouldDrain hold, per node, the end of the run already
	// reported as not drained, and (dry run) as to be drained.
	ended, wouldDrain map[string]time.Time
}

// New returns the controller. reader should be the manager's cache; kube
// writes the controller's records; drainer must be built for Component, with
// Cordon set, so that a drained node stays cordoned.
func New(reader client.Reader, kube kubernetes.Interface, classifier *classify.Classifier, drainer *drain.Drainer, budget *disruption.Budget,
	clk clock.Clock, recorder events.EventRecorder, opts Options) *Controller {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&opts.Interval, time.Minute)
	def(&opts.ReplacementTimeout, 5*time.Minute)
	def(&opts.FailureBackoff, time.Minute)
	def(&opts.MaxFailureBackoff, 10*time.Minute)
	if classifier == nil {
		classifier = &classify.Classifier{}
	}
	return &Controller{reader: reader, kube: kube, classifier: classifier, drainer: drainer, budget: budget, clock: clk, recorder: recorder, opts: opts,
		failures: map[string]backoff.Cooldown{}, failed: map[string]string{}, blocked: map[string]string{}, ended: map[string]time.Time{}, wouldDrain: map[string]time.Time{}}
}

// Name is the controller's name in logs.
func (c *Controller) Name() string { return Component }

// Register adds the controller to the manager as a Runnable that runs on the
// leader only.
func (c *Controller) Register(mgr ctrl.Manager) error { return mgr.Add(c) }

// NeedLeaderElection makes the controller run on the leader only.
func (c *Controller) NeedLeaderElection() bool { return true }

// Start runs cycles until ctx ends. Unfinished drains of a previous process
// are rolled back first when OnRestart is Rollback; else the cycles resume
// those still due (see Cycle).
func (c *Controller) Start(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithValues("controller", Component)
	ctx = klog.NewContext(ctx, logger)
	if !c.opts.DryRun {
		c.drainer.RollBackAtStart(ctx, c.clock, c.opts.OnRestart, c.opts.ShutdownGracePeriod)
	}
	for {
		if coop.Sleep(ctx, c.clock, c.Cycle(ctx)) != nil {
			return nil
		}
	}
}

// Cycle looks at every preemptible node once and drains at most one. It
// returns how long to wait before the next cycle: until the next node's
// drain time or the next drain window, at most an interval.
//
// A drain of this controller found unfinished (the process stopped
// mid-drain) is resumed by the rules of a fresh one: while its node is due,
// inside the drain windows and with a slot of the budget, before any other
// node. Where a rule forbids it now, it is rolled back.
func (c *Controller) Cycle(ctx context.Context) time.Duration {
	logger := klog.FromContext(ctx)
	now := c.clock.Now()
	var list corev1.NodeList
	if err := c.reader.List(ctx, &list); err != nil {
		logger.Error(err, "Listing nodes from the cache")
		return c.opts.Interval
	}
	all := c.assess(ctx, list.Items, now)
	count(all)
	c.forgetGone(all)
	var due []Assessment
	unfinished := map[string]bool{}
	for _, a := range all {
		switch a.State {
		case Replaced:
			c.lift(ctx, a)
		case Ended:
			c.reportEnded(a)
		case Due:
			due = append(due, a)
		}
		if m, marked, _ := drain.MarkOf(a.Node); marked && m.By == Component && !c.opts.DryRun {
			unfinished[a.Node.Name] = true
		}
	}
	Order(due, c.opts.OwnNode)
	wait := c.waitFor(now, NextDrainAt(all, now))
	if len(due) > 0 {
		logger.Info("Preemptible nodes due for a drain", "nodes", names(due), "first", due[0].Node.Name, "runEnds", due[0].Run.End)
	}
	if c.opts.DryRun {
		c.reportDryRun(ctx, due)
		return wait
	}
	if len(due) == 0 {
		c.rollBack(ctx, unfinished, "the node is not due for a drain now")
		return wait
	}
	open, next := c.budget.Open(now)
	if !open {
		why := "outside the drain windows"
		if next.IsZero() {
			why = "no drain window will open (their schedules match no date)"
		} else {
			wait = min(wait, c.waitFor(now, next))
		}
		logger.V(1).Info("Not draining now", "reason", why, "next", next)
		c.block(due, why)
		c.rollBack(ctx, unfinished, why)
		return wait
	}
	target := c.choose(due, unfinished, now)
	if target == nil {
		c.rollBack(ctx, unfinished, "the node may not be drained now")
		return wait
	}
	delete(unfinished, target.Node.Name)
	c.rollBack(ctx, unfinished, "another node goes first")
	if err := c.budget.Acquire(target.Node.Name, Component); err != nil {
		logger.Info("Not draining now", "node", target.Node.Name, "reason", err.Error())
		c.block(due, err.Error())
		if m, marked, _ := drain.MarkOf(target.Node); marked && m.By == Component {
			c.rollBack(ctx, map[string]bool{target.Node.Name: true}, err.Error())
		}
		return c.opts.Interval
	}
	defer c.budget.Release(target.Node.Name)
	if c.drainNode(ctx, *target) {
		return time.Second
	}
	return c.opts.Interval
}

// assess returns the preemptible nodes among items, placed in their runs at
// now. Control-plane and excluded nodes are left out.
func (c *Controller) assess(ctx context.Context, items []corev1.Node, now time.Time) []Assessment {
	var out []Assessment
	for i := range items {
		n := &items[i]
		if !c.selected(n) {
			continue
		}
		if class := c.classifier.Classify(n).Class; class == classify.ControlPlane || class == classify.Excluded {
			continue
		}
		record, err := RecordOf(n)
		if err != nil {
			klog.FromContext(ctx).Error(err, "Ignoring an unreadable drain record", "node", klog.KObj(n))
		}
		out = append(out, c.opts.Assess(n, record, now))
	}
	return out
}

func (c *Controller) selected(n *corev1.Node) bool {
	set := labels.Set(n.Labels)
	for _, s := range c.opts.Selectors {
		if s.Matches(set) {
			return true
		}
	}
	return false
}

// choose returns the due node to drain now: an unfinished drain of this
// controller first, else the first due node (in Order) that is Ready, out of
// its cooldown and not drained by another component. It records why the
// others wait.
func (c *Controller) choose(due []Assessment, unfinished map[string]bool, now time.Time) *Assessment {
	for i := range due {
		if unfinished[due[i].Node.Name] && ready(due[i].Node) {
			return &due[i]
		}
	}
	for i := range due {
		a := &due[i]
		n := a.Node
		if m, marked, _ := drain.MarkOf(n); marked && m.By != Component {
			c.blocked[n.Name] = "it is being drained by the " + m.By
			continue
		}
		if !ready(n) {
			c.blocked[n.Name] = "it was not Ready"
			continue
		}
		if f := c.failures[n.Name]; f.Active(now) {
			c.blocked[n.Name] = fmt.Sprintf("its last drain failed (%s); it cools down until %s", c.failed[n.Name], f.Until.UTC().Format(time.RFC3339))
			continue
		}
		for _, other := range due[i+1:] {
			c.blocked[other.Node.Name] = "other nodes whose runs end earlier were drained first"
		}
		return a
	}
	return nil
}

// drainNode drains a due node, records it drained, and waits for the evicted
// pods' replacements. It reports whether the drain succeeded.
func (c *Controller) drainNode(ctx context.Context, a Assessment) bool {
	node := a.Node
	logger := klog.FromContext(ctx).WithValues("node", node.Name)
	owners := c.ownersOn(ctx, node.Name)
	// The cordon is the controller's when the node was schedulable before
	// this drain (or before the unfinished drain it resumes).
	cordoned := !node.Spec.Unschedulable
	if m, marked, _ := drain.MarkOf(node); marked && m.By == Component {
		cordoned = m.Cordoned
	}
	drains.WithLabelValues(drain.OutcomeStarted).Inc()
	// A shutdown lets the drain finish within the grace period, else rolls it
	// back: never a half-drained node.
	dctx, cancel := drain.Outlive(ctx, c.clock, c.opts.ShutdownGracePeriod)
	res, err := c.drainer.Drain(dctx, drain.Request{
		Node: node.Name,
		Reason: fmt.Sprintf("its preemptible VM's run ends at %s, %s after it %s", a.Run.End.UTC().Format(time.RFC3339),
			c.opts.MaxRunTime, a.Run.From),
		LeaveCordoned: true,
	})
	cancel()
	podsEvicted.Add(float64(len(res.Evicted)))
	if err != nil {
		drains.WithLabelValues(drain.OutcomeFailed).Inc()
		if res.RolledBack {
			drains.WithLabelValues(drain.OutcomeRolledBack).Inc()
		}
		f := c.failures[node.Name]
		f.Fail(c.clock.Now(), c.opts.FailureBackoff, c.opts.MaxFailureBackoff)
		c.failures[node.Name] = f
		c.failed[node.Name] = err.Error()
		c.blocked[node.Name] = "its drain failed: " + err.Error()
		logger.Error(err, "Drain failed; node cooling down", "until", f.Until, "failures", f.Failures)
		return false
	}
	delete(c.failures, node.Name)
	delete(c.failed, node.Name)
	delete(c.blocked, node.Name)
	drains.WithLabelValues(drain.OutcomeSucceeded).Inc()
	record := Record{At: metav1.NewTime(c.clock.Now()), RunEnd: metav1.NewTime(a.Run.End), BootID: node.Status.NodeInfo.BootID, Cordoned: cordoned}
	if err := c.writeRecord(ctx, node.Name, record); err != nil {
		// The node stays cordoned and empty: the next cycle finds it due
		// without a record, drains nothing and writes it.
		logger.Error(err, "Recording the drain on the node")
	}
	logger.Info("Drained a preemptible node before the end of its run; it stays cordoned", "runEnds", a.Run.End, "evicted", len(res.Evicted))
	c.waitReplacements(ctx, owners)
	return true
}

// writeRecord puts the controller's record on the node.
func (c *Controller) writeRecord(ctx context.Context, name string, r Record) error {
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := c.kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if node.Annotations == nil {
			node.Annotations = map[string]string{}
		}
		node.Annotations[DrainedAnnotation] = string(data)
		_, err = c.kube.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
		return err
	})
}

// lift removes the record of a node drained in an earlier boot and, when
// the cordon was the controller's, uncordons it: the VM behind the Node
// object was replaced, and the new one is to be used. A node another drain
// holds is left for later.
func (c *Controller) lift(ctx context.Context, a Assessment) {
	logger := klog.FromContext(ctx).WithValues("node", a.Node.Name, "recordedBootID", a.Record.BootID, "bootID", a.Node.Status.NodeInfo.BootID)
	if _, marked, _ := drain.MarkOf(a.Node); marked {
		return
	}
	if c.opts.DryRun {
		logger.V(1).Info("Dry run: the VM behind a drained node was replaced; would lift its cordon")
		return
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := c.kube.CoreV1().Nodes().Get(ctx, a.Node.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		r, err := RecordOf(node)
		if err != nil || r == nil || r.BootID != a.Record.BootID {
			return err // gone or changed since the cache's copy
		}
		if _, marked, _ := drain.MarkOf(node); marked {
			return nil
		}
		delete(node.Annotations, DrainedAnnotation)
		if r.Cordoned {
			node.Spec.Unschedulable = false
		}
		_, err = c.kube.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		logger.Error(err, "Lifting the cordon of a node whose VM was replaced")
		return
	}
	logger.Info("The VM behind a drained node was replaced: its cordon and drain record are lifted")
	c.event(a.Node.Name, corev1.EventTypeNormal, ReasonReplaced, "Uncordon",
		"the VM behind this node was replaced since it was drained (boot %s, was %s): cordon and drain record lifted", a.Node.Status.NodeInfo.BootID, a.Record.BootID)
}

// reportEnded reports, once per run, a node whose run ended before it was
// drained.
func (c *Controller) reportEnded(a Assessment) {
	name := a.Node.Name
	if c.ended[name].Equal(a.Run.End) {
		return
	}
	c.ended[name] = a.Run.End
	why := c.blocked[name]
	if why == "" {
		why = "it was not seen due before then"
	}
	notDrained.Inc()
	klog.Background().WithValues("controller", Component).Info("A preemptible node's run ended before it was drained; its pods are left to the preemption notice",
		"node", name, "runEnded", a.Run.End, "reason", why)
	c.event(name, corev1.EventTypeWarning, ReasonNotDrained, "Drain",
		"the run of this node's preemptible VM ended at %s (%s after it %s at %s) before Spotter drained it: %s; its pods are left to the preemption notice",
		a.Run.End.UTC().Format(time.RFC3339), c.opts.MaxRunTime, a.Run.From, a.Run.Start.UTC().Format(time.RFC3339), why)
}

// reportDryRun says, once per node and run, which due nodes would be drained,
// in order.
func (c *Controller) reportDryRun(ctx context.Context, due []Assessment) {
	for i, a := range due {
		if c.wouldDrain[a.Node.Name].Equal(a.Run.End) {
			continue
		}
		c.wouldDrain[a.Node.Name] = a.Run.End
		klog.FromContext(ctx).Info("Dry run: would drain a preemptible node before the end of its run", "node", a.Node.Name, "runEnds", a.Run.End,
			"place", i+1, "due", len(due))
		c.event(a.Node.Name, corev1.EventTypeNormal, drain.ReasonWouldDrain, "Drain",
			"dry run: would drain this node, %d of %d due: its preemptible VM's run ends at %s, %s after it %s", i+1, len(due),
			a.Run.End.UTC().Format(time.RFC3339), c.opts.MaxRunTime, a.Run.From)
	}
}

// forgetGone drops what the controller remembers of nodes that are no
// longer preemptible nodes of the cluster.
func (c *Controller) forgetGone(all []Assessment) {
	present := make(map[string]bool, len(all))
	for _, a := range all {
		present[a.Node.Name] = true
	}
	for _, m := range []map[string]string{c.failed, c.blocked} {
		maps.DeleteFunc(m, func(node, _ string) bool { return !present[node] })
	}
	for _, m := range []map[string]time.Time{c.ended, c.wouldDrain} {
		maps.DeleteFunc(m, func(node string, _ time.Time) bool { return !present[node] })
	}
	maps.DeleteFunc(c.failures, func(node string, _ backoff.Cooldown) bool { return !present[node] })
}

// block records why the due nodes wait.
func (c *Controller) block(due []Assessment, why string) {
	for _, a := range due {
		c.blocked[a.Node.Name] = why
	}
}

// rollBack rolls back the unfinished drains of nodes: their marks removed,
// uncordoned if the drain had cordoned them.
func (c *Controller) rollBack(ctx context.Context, nodes map[string]bool, why string) {
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
		c.event(name, corev1.EventTypeNormal, drain.ReasonDrainRolledBack, "Drain", "unfinished drain rolled back: %s", why)
	}
}

// waitFor returns how long to wait at now for t, at most an interval; an
// interval when t is not after now.
func (c *Controller) waitFor(now, t time.Time) time.Duration {
	if d := t.Sub(now); d > 0 {
		return min(c.opts.Interval, d)
	}
	return c.opts.Interval
}

func (c *Controller) event(node, typ, reason, action, note string, args ...any) {
	if c.recorder != nil {
		c.recorder.Eventf(&corev1.ObjectReference{Kind: "Node", Name: node, UID: types.UID(node)}, nil, typ, reason, action, note, args...)
	}
}

// count sets the nodes gauge.
func count(all []Assessment) {
	by := map[State]int{}
	for _, a := range all {
		by[a.State]++
	}
	for _, s := range States {
		nodes.WithLabelValues(string(s)).Set(float64(by[s]))
	}
}

func names(as []Assessment) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.Node.Name
	}
	return out
}
