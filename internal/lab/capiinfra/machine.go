package capiinfra

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"spotter.dev/spotter/internal/lab"
)

// machineReconciler turns LabMachines into kwok Nodes and back.
type machineReconciler struct {
	client client.Client // the management cluster
	reader client.Reader
	// nodes reads and writes the Nodes, in the workload cluster.
	nodes client.Client
}

func (r *machineReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	lm := newUnstructured(LabMachineGVK)
	if err := r.reader.Get(ctx, req.NamespacedName, lm); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !lm.GetDeletionTimestamp().IsZero() {
		return reconcile.Result{}, r.delete(ctx, lm)
	}
	if !controllerutil.ContainsFinalizer(lm, Finalizer) {
		orig := lm.DeepCopy()
		controllerutil.AddFinalizer(lm, Finalizer)
		if err := r.client.Patch(ctx, lm, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			if apierrors.IsConflict(err) {
				// Cluster API labels and owns the LabMachine right after making it.
				return reconcile.Result{RequeueAfter: 100 * time.Millisecond}, nil
			}
			return reconcile.Result{}, fmt.Errorf("adding the finalizer to LabMachine %s: %w", req, err)
		}
	}
	if provisioned, _, _ := unstructured.NestedBool(lm.Object, "status", "initialization", "provisioned"); provisioned {
		// The instance exists; a Node deleted since is not brought back, as a
		// cloud would not bring back a terminated instance.
		return reconcile.Result{}, nil
	}
	if _, ok := lm.GetLabels()[MachinePoolNameLabel]; ok {
		// An instance of a LabMachinePool, which provisions it; this
		// controller only deletes its Node when it goes.
		return reconcile.Result{}, nil
	}

	// Cluster API's contract: provision only once the Machine's bootstrap data
	// is there. The lab needs none, but keeps the order.
	owner := ownerOf(lm, MachineGVK.Kind)
	if owner == nil {
		log.V(1).Info("waiting for a Machine to own the LabMachine")
		return reconcile.Result{}, nil
	}
	machine := newUnstructured(MachineGVK)
	if err := r.reader.Get(ctx, client.ObjectKey{Namespace: lm.GetNamespace(), Name: owner.Name}, machine); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if name, _, _ := unstructured.NestedString(machine.Object, "spec", "bootstrap", "dataSecretName"); name == "" {
		log.V(1).Info("waiting for the Machine's bootstrap data", "machine", owner.Name)
		return reconcile.Result{}, nil
	}

	spec, err := machineSpecOf(lm.Object, "spec")
	if err != nil {
		return reconcile.Result{}, reconcile.TerminalError(fmt.Errorf("LabMachine %s: %w", req, err))
	}
	return reconcile.Result{}, provision(ctx, r.client, r.nodes, lm, spec)
}

// provision makes the instance of a LabMachine, its kwok Node, then records
// it on the LabMachine: spec.providerID, status.initialization.provisioned,
// status.interruptible and the Node's address.
func provision(ctx context.Context, c, nodes client.Client, lm *unstructured.Unstructured, spec MachineSpec) error {
	providerID := providerIDOf(lm)
	if err := ensureNode(ctx, nodes, lab.Node(spec.nodeSpec(lm.GetName(), providerID))); err != nil {
		return err
	}
	orig := lm.DeepCopy()
	if err := unstructured.SetNestedField(lm.Object, providerID, "spec", "providerID"); err != nil {
		return err
	}
	if err := c.Patch(ctx, lm, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("setting the providerID of LabMachine %s: %w", client.ObjectKeyFromObject(lm), err)
	}
	orig = lm.DeepCopy()
	status := map[string]any{
		"initialization": map[string]any{"provisioned": true},
		"interruptible":  spec.Spot,
		"addresses":      []any{map[string]any{"type": "Hostname", "address": lm.GetName()}},
	}
	if err := unstructured.SetNestedMap(lm.Object, status, "status"); err != nil {
		return err
	}
	if err := c.Status().Patch(ctx, lm, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("marking LabMachine %s provisioned: %w", client.ObjectKeyFromObject(lm), err)
	}
	ctrl.LoggerFrom(ctx).Info("LabMachine provisioned", "node", lm.GetName(), "providerID", providerID, "spot", spec.Spot)
	return nil
}

// ensureNode creates a kwok Node, unless it is there already with the same
// providerID (a retry after a failed status update).
func ensureNode(ctx context.Context, nodes client.Client, node *corev1.Node) error {
	err := nodes.Create(ctx, node)
	if !apierrors.IsAlreadyExists(err) {
		if err != nil {
			return fmt.Errorf("creating Node %s: %w", node.Name, err)
		}
		return nil
	}
	existing := &corev1.Node{}
	if err := nodes.Get(ctx, client.ObjectKey{Name: node.Name}, existing); err != nil {
		return fmt.Errorf("reading Node %s: %w", node.Name, err)
	}
	if existing.Spec.ProviderID != node.Spec.ProviderID {
		return reconcile.TerminalError(fmt.Errorf("node %s exists with providerID %q, not %q", node.Name, existing.Spec.ProviderID, node.Spec.ProviderID))
	}
	return nil
}

// delete deletes the LabMachine's Node, then lets the LabMachine go. Cluster API
// has drained the Node by the time it deletes the LabMachine.
func (r *machineReconciler) delete(ctx context.Context, lm *unstructured.Unstructured) error {
	if !controllerutil.ContainsFinalizer(lm, Finalizer) {
		return nil
	}
	providerID := providerIDOf(lm)
	node := &corev1.Node{}
	err := r.nodes.Get(ctx, client.ObjectKey{Name: lm.GetName()}, node)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("reading Node %s: %w", lm.GetName(), err)
	case node.Spec.ProviderID == providerID:
		// The UID precondition keeps a Node of the same name made since safe.
		if err := r.nodes.Delete(ctx, node, client.Preconditions{UID: &node.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting Node %s: %w", node.Name, err)
		}
		ctrl.LoggerFrom(ctx).Info("Node deleted", "node", node.Name)
	}
	orig := lm.DeepCopy()
	controllerutil.RemoveFinalizer(lm, Finalizer)
	if err := r.client.Patch(ctx, lm, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("removing the finalizer of LabMachine %s: %w", client.ObjectKeyFromObject(lm), err)
	}
	return nil
}

// providerIDOf is the providerID of a LabMachine and of its Node.
func providerIDOf(lm client.Object) string {
	return ProviderIDPrefix + lm.GetNamespace() + "/" + lm.GetName()
}
