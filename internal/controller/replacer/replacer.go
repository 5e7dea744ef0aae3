// Package replacer asks for the replacement of an interrupted node as soon as
// it is drained: a node whose record (spotter.dev/interruption) holds a
// termination notice, from the agent or the interruption queue, and on which
// no pod a drain moves is left, has its machine deleted through the cloud
// provider (cloud.Replacer), and its group makes a new one at once. On Cluster
// API that is the node's Machine: its MachineSet or MachinePool creates
// another, where a MachineHealthCheck would wait for the node to be gone for
// its timeout first.
//
// A stop or hibernate notice (AWS spot instances that stop) is left alone: the
// instance may come back.
package replacer

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"spotter.dev/spotter/internal/agent/interrupt"
	"spotter.dev/spotter/internal/cloud"
	"spotter.dev/spotter/internal/drain"
)

// Event reasons.
const (
	ReasonReplacementRequested = "SpotterReplacementRequested"
	ReasonWouldReplace         = "SpotterWouldRequestReplacement"
)

var replacements = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: "spotter", Subsystem: "replacer", Name: "replacements_total",
	Help: "Interrupted nodes, once drained, whose machine Spotter deleted for their group to replace at once, by result: requested, or refused (a node without a machine in a node group, of the control plane, or a provider that cannot), or error (retried).",
}, []string{"result"})

func init() {
	metrics.Registry.MustRegister(replacements)
	for _, r := range []string{"requested", "refused", "error"} {
		replacements.WithLabelValues(r)
	}
}

// recheck is how soon a node still holding pods is looked at again (pods
// leaving do not change the node).
const recheck = 2 * time.Second

// Controller replaces interrupted nodes once drained.
type Controller struct {
	reader   client.Reader
	kube     kubernetes.Interface
	replacer cloud.Replacer
	recorder events.EventRecorder
	dryRun   bool

	mu   sync.Mutex
	done map[string]types.UID // nodes asked for (or refused) already: name to UID
}

// New returns a Controller; recorder may be nil.
func New(reader client.Reader, kube kubernetes.Interface, replacer cloud.Replacer, recorder events.EventRecorder, dryRun bool) *Controller {
	return &Controller{reader: reader, kube: kube, replacer: replacer, recorder: recorder, dryRun: dryRun, done: map[string]types.UID{}}
}

// Name is the controller's name.
func (c *Controller) Name() string { return "replacer" }

// Register adds the controller to mgr: it sees the nodes whose record holds a
// termination notice.
func (c *Controller) Register(mgr ctrl.Manager) error {
	underNotice := predicate.NewPredicateFuncs(func(obj client.Object) bool {
		n, ok := obj.(*corev1.Node)
		if !ok {
			return false
		}
		_, ok = interrupt.TerminationOf(n)
		return ok
	})
	return ctrl.NewControllerManagedBy(mgr).Named(c.Name()).For(&corev1.Node{}, builder.WithPredicates(underNotice)).Complete(c)
}

// Reconcile asks for one node's replacement once it is drained.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	node := &corev1.Node{}
	if err := c.reader.Get(ctx, req.NamespacedName, node); err != nil {
		if apierrors.IsNotFound(err) {
			c.forget(req.Name)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	e, ok := interrupt.TerminationOf(node)
	if !ok || c.asked(node) {
		return reconcile.Result{}, nil
	}
	log := klog.FromContext(ctx).WithValues("node", node.Name, "notice", e.Action, "by", e.By)
	switch e.Action {
	case "stop", "hibernate", "stopping":
		// Not remembered: a later termination of the same instance is
		// replaced.
		log.V(1).Info("Not replacing a node whose instance stops: it may come back")
		return reconcile.Result{}, nil
	}
	left, err := drain.PodsToMove(ctx, c.kube, node.Name)
	if err != nil {
		return reconcile.Result{}, err
	}
	if left > 0 {
		return reconcile.Result{RequeueAfter: recheck}, nil
	}
	if c.dryRun {
		c.event(node, corev1.EventTypeNormal, ReasonWouldReplace, "dry run: the node is drained for a termination notice; would delete its machine for its group to replace it")
		c.remember(node)
		return reconcile.Result{}, nil
	}
	err = c.replacer.ReplaceNode(ctx, node)
	switch {
	case err == nil:
		replacements.WithLabelValues("requested").Inc()
		log.Info("Interrupted node drained: its machine deleted for its group to replace")
		c.event(node, corev1.EventTypeNormal, ReasonReplacementRequested, "the node is drained for a termination notice: its machine was deleted, and its group creates the replacement")
	case errors.Is(err, errors.ErrUnsupported) || cloud.IsNotFound(err) || cloud.IsControlPlane(err):
		replacements.WithLabelValues("refused").Inc()
		log.Info("Not replacing an interrupted node", "why", err.Error())
	default:
		replacements.WithLabelValues("error").Inc()
		return reconcile.Result{}, err
	}
	c.remember(node)
	return reconcile.Result{}, nil
}

func (c *Controller) asked(node *corev1.Node) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.done[node.Name] == node.UID
}

func (c *Controller) remember(node *corev1.Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.done[node.Name] = node.UID
}

// forget drops what is remembered of a node that is gone.
func (c *Controller) forget(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.done, name)
}

func (c *Controller) event(node *corev1.Node, typ, reason, note string) {
	if c.recorder != nil {
		c.recorder.Eventf(node, nil, typ, reason, "Replace", "%s", note)
	}
}
