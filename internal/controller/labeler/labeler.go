// Package labeler keeps the labels and taints that tell spot from on-demand:
// cluster.x-k8s.io/interruptible=true on spot nodes (removed from nodes known to
// be on-demand, where the labeler wrote it: never where Cluster API did), and,
// when enabled, spotter.dev/on-demand=true:PreferNoSchedule
// on on-demand nodes so that new pods prefer spot. It is event-driven and
// idempotent, writes only patches, and never touches control-plane nodes.
package labeler

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"spotter.dev/spotter/internal/classify"
)

// What the labeler writes.
const (
	InterruptibleLabel = classify.InterruptibleLabel
	OnDemandTaintKey   = "spotter.dev/on-demand"
)

// Options configure the labeler.
type Options struct {
	// InterruptibleLabel keeps cluster.x-k8s.io/interruptible=true on spot nodes.
	InterruptibleLabel bool
	// PreferSpotTaint keeps spotter.dev/on-demand=true:PreferNoSchedule on
	// on-demand nodes.
	PreferSpotTaint bool
	// DryRun logs and records what would change and changes nothing.
	DryRun bool
}

// Controller reconciles one node at a time.
type Controller struct {
	client     client.Client
	classifier *classify.Classifier
	recorder   events.EventRecorder
	opts       Options
	// nodes counts nodes by class for the nodes-by-class metric.
	classes *classCounter
}

// New returns the labeler. The classifier must ignore the interruptible label
// (classify.Classifier.IgnoreInterruptibleLabel), which the labeler writes
// itself; New sets it on a copy.
func New(c client.Client, classifier *classify.Classifier, recorder events.EventRecorder, opts Options) *Controller {
	cl := *classifier
	cl.IgnoreInterruptibleLabel = true
	return &Controller{client: c, classifier: &cl, recorder: recorder, opts: opts, classes: newClassCounter()}
}

// Name is the controller's name in logs and metrics.
func (c *Controller) Name() string { return "labeler" }

// Register adds the controller to the manager: it runs on every Node event.
func (c *Controller) Register(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named(c.Name()).For(&corev1.Node{}).Complete(c)
}

// Reconcile brings one node's label and taint to what its class calls for.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	node := &corev1.Node{}
	if err := c.client.Get(ctx, req.NamespacedName, node); err != nil {
		if apierrors.IsNotFound(err) {
			c.classes.forget(req.Name)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, err
	}
	class := c.classifier.Classify(node)
	c.classes.set(node.Name, class.Class)
	if c.classes.warn(node.Name, class.Class == classify.ControlPlane && class.Warning != "") {
		c.warnControlPlaneOnSpot(ctx, node.Name)
		if c.recorder != nil {
			c.recorder.Eventf(node, nil, corev1.EventTypeWarning, "SpotterControlPlaneOnSpot", "Classify", "%s", class.Warning)
		}
	}
	if class.Class == classify.ControlPlane {
		return reconcile.Result{}, nil
	}

	updated, changes := c.desired(node, class.Class)
	if len(changes) == 0 {
		return reconcile.Result{}, nil
	}
	logger := klog.FromContext(ctx).WithValues("node", klog.KObj(node), "class", class.Class, "reason", class.Reason)
	if c.opts.DryRun {
		logger.Info("Dry run: would update node", "changes", changes)
		c.event(node, "SpotterWouldLabel", "dry run: would %s (%s: %s)", strings.Join(changes, ", "), class.Class, class.Reason)
		return reconcile.Result{}, nil
	}
	// A merge patch with the resourceVersion: taints are an atomic list, so the
	// patch replaces it whole, and the version makes a concurrent writer's
	// change fail this patch (and requeue) instead of being overwritten.
	if err := c.client.Patch(ctx, updated, client.MergeFromWithOptions(node, client.MergeFromWithOptimisticLock{})); err != nil {
		return reconcile.Result{}, fmt.Errorf("patching node %s: %w", node.Name, err)
	}
	logger.Info("Updated node", "changes", changes)
	c.event(node, "SpotterLabeled", "%s (%s: %s)", strings.Join(changes, ", "), class.Class, class.Reason)
	return reconcile.Result{}, nil
}

// desired returns a copy of node with the label and taint its class calls for,
// and the changes made, in words; no changes means the node is as it should be.
func (c *Controller) desired(node *corev1.Node, class classify.Class) (*corev1.Node, []string) {
	out := node.DeepCopy()
	var changes []string
	// Only a label the labeler wrote (its annotation beside it) is the
	// labeler's to remove; Cluster API's is left alone, whatever the class.
	ours := node.Annotations[classify.LabeledByUsAnnotation] == "true"
	_, labelled := node.Labels[InterruptibleLabel]
	switch {
	case c.opts.InterruptibleLabel && class == classify.Spot && !labelled:
		if out.Labels == nil {
			out.Labels = map[string]string{}
		}
		if out.Annotations == nil {
			out.Annotations = map[string]string{}
		}
		out.Labels[InterruptibleLabel] = "true"
		out.Annotations[classify.LabeledByUsAnnotation] = "true"
		changes = append(changes, "add label "+InterruptibleLabel+"=true")
	case class == classify.OnDemand && labelled && ours:
		delete(out.Labels, InterruptibleLabel)
		delete(out.Annotations, classify.LabeledByUsAnnotation)
		changes = append(changes, "remove label "+InterruptibleLabel)
	case ours && !labelled:
		// The label went (removed by hand): so does its mark.
		delete(out.Annotations, classify.LabeledByUsAnnotation)
		changes = append(changes, "remove annotation "+classify.LabeledByUsAnnotation)
	}

	desired := corev1.Taint{Key: OnDemandTaintKey, Value: "true", Effect: corev1.TaintEffectPreferNoSchedule}
	want := c.opts.PreferSpotTaint && class == classify.OnDemand
	var kept []corev1.Taint
	found := false
	for _, t := range node.Spec.Taints {
		if t.Key != OnDemandTaintKey {
			kept = append(kept, t)
			continue
		}
		if want && t.Value == desired.Value && t.Effect == desired.Effect && !found {
			kept = append(kept, t)
			found = true
			continue
		}
		changes = append(changes, "remove taint "+t.ToString())
	}
	if want && !found {
		kept = append(kept, desired)
		changes = append(changes, "add taint "+desired.ToString())
	}
	out.Spec.Taints = kept
	return out, changes
}

// warnControlPlaneOnSpot logs, once, the control-plane nodes that look like
// spot, newly found when node was: a warning about the cluster's setup, not an
// error of Spotter's (an error-level line carries a stack trace). All of them
// are named in one line, read from the cache; a node is named again only after
// it stopped looking like spot.
func (c *Controller) warnControlPlaneOnSpot(ctx context.Context, node string) {
	names := []string{node}
	var nodes corev1.NodeList
	if err := c.client.List(ctx, &nodes); err == nil {
		for i := range nodes.Items {
			n := &nodes.Items[i]
			if r := c.classifier.Classify(n); n.Name != node && r.Class == classify.ControlPlane && r.Warning != "" {
				names = append(names, n.Name)
			}
		}
	}
	if names = c.classes.unlogged(names); len(names) > 0 {
		klog.FromContext(ctx).Info("WARNING: control-plane nodes look like spot; Spotter never drains them nor uses them as spot. "+
			"A control plane on spot capacity can be interrupted: check these nodes' labels and node groups", "nodes", names)
	}
}

func (c *Controller) event(node *corev1.Node, reason, note string, args ...any) {
	if c.recorder != nil {
		c.recorder.Eventf(node, nil, corev1.EventTypeNormal, reason, "Label", note, args...)
	}
}
