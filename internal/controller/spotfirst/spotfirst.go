package spotfirst

import (
	"context"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"spotter.dev/spotter/internal/classify"
	"spotter.dev/spotter/internal/coop"
)

// Component names the controller in logs, Events and metrics.
const Component = "spot-first"

// Options configure the controller.
type Options struct {
	// FallbackAfter is how long a steered pod may wait for spot before it is
	// deleted and its replacement may go anywhere; a pod its workload comes
	// to need (see WithinBudget) waits no longer.
	FallbackAfter time.Duration
	// DryRun logs what the controller would do and changes nothing. Gated
	// pods then wait for the gate to be taken off by hand: the chart installs
	// no admission policy in dry run.
	DryRun bool
}

// Controller is the spot-first controller (see the package comment).
type Controller struct {
	reader     client.Reader
	kube       kubernetes.Interface
	classifier *classify.Classifier
	clock      clock.Clock
	recorder   events.EventRecorder
	opts       Options
	wake       chan struct{}
	// fellBack counts, by owner UID, the pods deleted by the fallback whose
	// replacements are still to be released without the spot selector.
	// Kept in memory: after a restart, an owner's next pod waits for spot
	// again.
	fellBack map[types.UID]int
}

// New returns the controller.
func New(reader client.Reader, kube kubernetes.Interface, classifier *classify.Classifier, clk clock.Clock, recorder events.EventRecorder, opts Options) *Controller {
	return &Controller{reader: reader, kube: kube, classifier: classifier, clock: clk, recorder: recorder, opts: opts,
		wake: make(chan struct{}, 1), fellBack: map[types.UID]int{}}
}

// Name is the controller's name.
func (c *Controller) Name() string { return Component }

// Register adds the controller to the manager.
func (c *Controller) Register(mgr ctrl.Manager) error { return mgr.Add(c) }

// NeedLeaderElection makes the controller run on the leader only.
func (c *Controller) NeedLeaderElection() bool { return true }

// PodChanged tells the controller that a pod was added or changed: a gated
// pod wakes it. It never blocks; the informer's event handler and the
// simulator call it.
func (c *Controller) PodChanged(pod *corev1.Pod) {
	if pod == nil || !Gated(pod) {
		return
	}
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Start runs cycles until ctx ends: at once when a gated pod comes, else
// when the next steered pod's wait ends.
func (c *Controller) Start(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithValues("controller", Component)
	ctx = klog.NewContext(ctx, logger)
	for {
		wait := c.Cycle(ctx)
		if _, err := coop.SleepOrReceive(ctx, c.clock, wait, c.wake); err != nil {
			return nil
		}
	}
}

// idleWait is the longest a cycle waits without news: the cache's gated
// pods are looked at again then, whatever the informer said.
const idleWait = time.Minute

// retryWait is how soon a cycle comes again after a pod could not be
// admitted.
const retryWait = time.Second

// Cycle releases or steers every gated pod, deletes the steered pods whose
// wait for spot is over, and returns how long to wait before the next cycle.
func (c *Controller) Cycle(ctx context.Context) time.Duration {
	logger := klog.FromContext(ctx)
	// The cache's objects, not copies: read only here (Release and Steer
	// copy the pod they change).
	var pods corev1.PodList
	var nodes corev1.NodeList
	if err := c.reader.List(ctx, &pods, client.UnsafeDisableDeepCopy); err != nil {
		logger.Error(err, "Listing pods")
		return idleWait
	}
	if err := c.reader.List(ctx, &nodes, client.UnsafeDisableDeepCopy); err != nil {
		logger.Error(err, "Listing nodes")
		return idleWait
	}
	var spot []*corev1.Node
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if n.DeletionTimestamp == nil && c.classifier.Classify(n).Class == classify.Spot {
			spot = append(spot, n)
		}
	}
	var pdbs policyv1.PodDisruptionBudgetList
	if err := c.reader.List(ctx, &pdbs, client.UnsafeDisableDeepCopy); err != nil {
		logger.Error(err, "Listing PodDisruptionBudgets")
		return idleWait
	}
	budgets := shortBudgets(pdbs.Items)
	// Ready pods by owner: a workload with none is never kept waiting long.
	readyOwners := map[types.UID]int{}
	for i := range pods.Items {
		pod := &pods.Items[i]
		if ref := metav1.GetControllerOf(pod); ref != nil && pod.DeletionTimestamp == nil && ready(pod) {
			readyOwners[ref.UID]++
		}
	}
	now := c.clock.Now()
	wait := idleWait
	for i := range pods.Items {
		pod := &pods.Items[i]
		if pod.DeletionTimestamp != nil || pod.Spec.NodeName != "" {
			continue
		}
		if Gated(pod) {
			if !c.admit(ctx, pod, spot, now, !budgets.withinBudget(pod, readyOwners)) {
				// A conflict (the scheduler writes a gated pod's status) or
				// an error: soon again, with the cache's newer copy.
				wait = min(wait, retryWait)
			}
			continue
		}
		at, err := time.Parse(time.RFC3339, pod.Annotations[SteeredAnnotation])
		if err != nil {
			continue
		}
		// A pod its workload has come to need waits no longer.
		after := c.opts.FallbackAfter
		if !budgets.withinBudget(pod, readyOwners) {
			after = 0
		}
		if left := at.Add(after).Sub(now); left > 0 {
			wait = min(wait, left)
			continue
		}
		c.fallBack(ctx, pod)
	}
	return wait
}

// admit releases or steers one gated pod; needed: its workload needs it now
// (not WithinBudget). It reports whether the pod was admitted (or is gone, or
// in dry run, nothing to retry).
func (c *Controller) admit(ctx context.Context, pod *corev1.Pod, spot []*corev1.Node, now time.Time, needed bool) bool {
	logger := klog.FromContext(ctx).WithValues("pod", klog.KObj(pod))
	owner, recreated := Recreated(pod)
	key, value, toSpot := SpotLabel(pod, spot)
	decision := DecisionReleased
	switch {
	case !recreated || !toSpot || needed || SpreadNarrowed(pod):
		// Never held: it would not come back if deleted, cannot run on
		// spot, its workload needs it now, or the spot selector would
		// change where its spread constraint counts.
	case c.fellBack[owner] > 0:
		decision = DecisionFallback
	default:
		decision = DecisionSteered
	}
	if c.opts.DryRun {
		logger.Info("Dry run: would admit the pod", "decision", decision, "spotLabel", key+"="+value)
		return true
	}
	// The decision reads the cache; the update starts from the pod as the
	// apiserver has it. The cache's copy lacks what the cache leaves out
	// (snapshot.Transform: environment, probes, volume mounts, ...), and an
	// update of a pod may change nothing of its spec but the gates and the
	// node selector.
	fresh, err := c.kube.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return true
	case err != nil:
		logger.Error(err, "Reading the pod before admitting it", "decision", decision)
		return false
	case fresh.UID != pod.UID || !Gated(fresh):
		return true // gone and replaced, or admitted already
	}
	var out *corev1.Pod
	if decision == DecisionSteered {
		out = Steer(fresh, key, value, now.UTC().Format(time.RFC3339))
	} else {
		out = Release(fresh)
	}
	if _, err = c.kube.CoreV1().Pods(pod.Namespace).Update(ctx, out, metav1.UpdateOptions{FieldManager: "spotter-" + Component}); err != nil {
		if apierrors.IsNotFound(err) {
			return true
		}
		if !apierrors.IsConflict(err) {
			logger.Error(err, "Admitting the pod", "decision", decision)
		}
		return false
	}
	if decision == DecisionFallback {
		c.fellBack[owner]--
		if c.fellBack[owner] == 0 {
			delete(c.fellBack, owner)
		}
	}
	admitted.WithLabelValues(decision).Inc()
	logger.V(1).Info("Admitted the pod", "decision", decision, "spotLabel", key+"="+value)
	return true
}

// fallBack deletes a steered pod that waited for spot in vain; its
// replacement is released without the spot selector.
func (c *Controller) fallBack(ctx context.Context, pod *corev1.Pod) {
	logger := klog.FromContext(ctx).WithValues("pod", klog.KObj(pod))
	owner, ok := Recreated(pod)
	if !ok {
		return
	}
	if c.opts.DryRun {
		logger.Info("Dry run: would delete the pod, still waiting for spot", "waited", c.opts.FallbackAfter)
		return
	}
	uid := pod.UID
	zero := int64(0)
	err := c.kube.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &uid}, GracePeriodSeconds: &zero})
	switch {
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return
	case err != nil:
		logger.Error(err, "Deleting the pod still waiting for spot")
		return
	}
	c.fellBack[owner]++
	admitted.WithLabelValues(DecisionFellBack).Inc()
	if c.recorder != nil {
		c.recorder.Eventf(pod, nil, corev1.EventTypeNormal, ReasonFallback, "FallBack",
			"No spot capacity for %s: deleted the pod; its replacement may run on any node", c.opts.FallbackAfter)
	}
	logger.Info("No spot capacity in time: deleted the pod, its replacement may run on any node", "waited", c.opts.FallbackAfter,
		"owner", owner)
}

// WithinBudget reports whether the pod's workload does without it for now:
// its owner has a Ready pod (readyOwners, by controller UID), and no
// PodDisruptionBudget that selects the pod has fewer healthy pods than it
// demands. A workload with no Ready pod, or short of a budget, needs the
// pod now.
func WithinBudget(pod *corev1.Pod, pdbs []policyv1.PodDisruptionBudget, readyOwners map[types.UID]int) bool {
	return shortBudgets(pdbs).withinBudget(pod, readyOwners)
}

// short are the selectors of the PodDisruptionBudgets with fewer healthy
// pods than they demand, by namespace: read once a cycle, asked of every
// pending pod.
type short map[string][]labels.Selector

func shortBudgets(pdbs []policyv1.PodDisruptionBudget) short {
	out := short{}
	for i := range pdbs {
		b := &pdbs[i]
		if b.Status.CurrentHealthy >= b.Status.DesiredHealthy {
			continue
		}
		if sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector); err == nil && !sel.Empty() {
			out[b.Namespace] = append(out[b.Namespace], sel)
		}
	}
	return out
}

// withinBudget is WithinBudget with the short budgets read.
func (s short) withinBudget(pod *corev1.Pod, readyOwners map[types.UID]int) bool {
	ref := metav1.GetControllerOf(pod)
	if ref == nil || readyOwners[ref.UID] == 0 {
		return false
	}
	return !slices.ContainsFunc(s[pod.Namespace], func(sel labels.Selector) bool { return sel.Matches(labels.Set(pod.Labels)) })
}

// ready reports whether the pod has the condition Ready.
func ready(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
