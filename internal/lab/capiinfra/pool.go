package capiinfra

import (
	"context"
	"encoding/base64"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/validation"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"spotter.dev/spotter/internal/lab"
)

// poolReconciler keeps a LabMachinePool's instances at its MachinePool's
// replicas and reports them as Cluster API's InfraMachinePool contract asks.
type poolReconciler struct {
	client client.Client // the management cluster
	reader client.Reader
	// nodes reads and writes the Nodes, in the workload cluster.
	nodes client.Client
}

// unsettled is how soon a pool whose instances are still coming or going is
// looked at again.
const unsettled = 500 * time.Millisecond

func (r *poolReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	pool := newUnstructured(LabMachinePoolGVK)
	if err := r.reader.Get(ctx, req.NamespacedName, pool); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	machines, _, _ := unstructured.NestedBool(pool.Object, "spec", "machinePoolMachines")
	if !pool.GetDeletionTimestamp().IsZero() {
		return r.delete(ctx, pool, machines)
	}
	if !controllerutil.ContainsFinalizer(pool, Finalizer) {
		orig := pool.DeepCopy()
		controllerutil.AddFinalizer(pool, Finalizer)
		if err := r.client.Patch(ctx, pool, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			if apierrors.IsConflict(err) {
				return reconcile.Result{RequeueAfter: 100 * time.Millisecond}, nil
			}
			return reconcile.Result{}, fmt.Errorf("adding the finalizer to LabMachinePool %s: %w", req, err)
		}
	}
	// Cluster API owns the infrastructure machine pool once it reconciles
	// the MachinePool; the contract: make instances only once the bootstrap
	// data is there (the lab needs none, but keeps the order).
	owner := ownerOf(pool, MachinePoolGVK.Kind)
	if owner == nil {
		log.V(1).Info("waiting for a MachinePool to own the LabMachinePool")
		return reconcile.Result{}, nil
	}
	mp := newUnstructured(MachinePoolGVK)
	if err := r.reader.Get(ctx, client.ObjectKey{Namespace: pool.GetNamespace(), Name: owner.Name}, mp); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if name, _, _ := unstructured.NestedString(mp.Object, "spec", "template", "spec", "bootstrap", "dataSecretName"); name == "" {
		log.V(1).Info("waiting for the MachinePool's bootstrap data", "machinePool", owner.Name)
		return reconcile.Result{}, nil
	}
	spec, err := machineSpecOf(pool.Object, "spec", "template")
	if err != nil {
		return reconcile.Result{}, reconcile.TerminalError(fmt.Errorf("LabMachinePool %s: %w", req, err))
	}
	desired, _, _ := unstructured.NestedInt64(mp.Object, "spec", "replicas")

	var ids []string
	var settled bool
	if machines {
		ids, settled, err = r.reconcileMachines(ctx, pool, mp, spec, int(desired))
	} else {
		ids, settled, err = r.reconcileNodes(ctx, pool, spec, int(desired))
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	if err := r.report(ctx, pool, ids, machines); err != nil {
		return reconcile.Result{}, err
	}
	if !settled {
		return reconcile.Result{RequeueAfter: unsettled}, nil
	}
	return reconcile.Result{}, nil
}

// report writes what the contract asks of an InfraMachinePool: the instances
// in spec.providerIDList, their number in status.replicas, provisioned
// (status.ready, which Cluster API v1.14's MachinePool controller reads, and
// status.initialization.provisioned of the v1beta2 contract), and, with
// Machines, status.infrastructureMachineKind.
func (r *poolReconciler) report(ctx context.Context, pool *unstructured.Unstructured, ids []string, machines bool) error {
	slices.Sort(ids)
	list := make([]any, len(ids))
	for i, id := range ids {
		list[i] = id
	}
	if old, _, _ := unstructured.NestedStringSlice(pool.Object, "spec", "providerIDList"); !slices.Equal(old, ids) {
		orig := pool.DeepCopy()
		if err := unstructured.SetNestedSlice(pool.Object, list, "spec", "providerIDList"); err != nil {
			return err
		}
		if err := r.client.Patch(ctx, pool, client.MergeFrom(orig)); err != nil {
			return fmt.Errorf("writing the providerIDList of LabMachinePool %s: %w", client.ObjectKeyFromObject(pool), err)
		}
	}
	kind := ""
	if machines {
		kind = KindMachine
	}
	status := map[string]any{
		"ready":          true,
		"initialization": map[string]any{"provisioned": true},
		"replicas":       int64(len(ids)),
	}
	if kind != "" {
		status["infrastructureMachineKind"] = kind
	}
	old, _, _ := unstructured.NestedMap(pool.Object, "status")
	delete(old, "conditions")
	if fmt.Sprint(old) == fmt.Sprint(status) {
		return nil
	}
	orig := pool.DeepCopy()
	for k, v := range status {
		if err := unstructured.SetNestedField(pool.Object, v, "status", k); err != nil {
			return err
		}
	}
	if kind == "" {
		unstructured.RemoveNestedField(pool.Object, "status", "infrastructureMachineKind")
	}
	if err := r.client.Status().Patch(ctx, pool, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("writing the status of LabMachinePool %s: %w", client.ObjectKeyFromObject(pool), err)
	}
	return nil
}

// reconcileNodes keeps desired instances of a pool without Machines: kwok
// Nodes labelled with the pool. A scale down removes the newest, as a cloud's
// scale set might; nothing outside can choose which.
func (r *poolReconciler) reconcileNodes(ctx context.Context, pool *unstructured.Unstructured, spec MachineSpec, desired int) (ids []string, settled bool, err error) {
	var nodes corev1.NodeList
	if err := r.nodes.List(ctx, &nodes, client.MatchingLabels{PoolLabel: pool.GetName(), PoolNamespaceLabel: pool.GetNamespace()}); err != nil {
		return nil, false, fmt.Errorf("listing the Nodes of LabMachinePool %s: %w", client.ObjectKeyFromObject(pool), err)
	}
	var live []*corev1.Node
	settled = true
	for i := range nodes.Items {
		if nodes.Items[i].DeletionTimestamp == nil {
			live = append(live, &nodes.Items[i])
		} else {
			settled = false
		}
	}
	slices.SortFunc(live, func(a, b *corev1.Node) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	for len(live) < desired {
		name := pool.GetName() + "-" + rand.String(5)
		ns := spec.nodeSpec(name, ProviderIDPrefix+pool.GetNamespace()+"/"+name)
		ns.Labels = map[string]string{PoolLabel: pool.GetName(), PoolNamespaceLabel: pool.GetNamespace()}
		for k, v := range spec.NodeLabels {
			ns.Labels[k] = v
		}
		node := lab.Node(ns)
		if err := ensureNode(ctx, r.nodes, node); err != nil {
			return nil, false, err
		}
		ctrl.LoggerFrom(ctx).Info("LabMachinePool instance created", "node", name, "spot", spec.Spot)
		live = append(live, node)
	}
	for len(live) > desired {
		node := live[len(live)-1]
		if err := r.nodes.Delete(ctx, node, client.Preconditions{UID: &node.UID}); client.IgnoreNotFound(err) != nil {
			return nil, false, fmt.Errorf("deleting Node %s: %w", node.Name, err)
		}
		ctrl.LoggerFrom(ctx).Info("LabMachinePool instance deleted", "node", node.Name)
		live = live[:len(live)-1]
	}
	for _, n := range live {
		ids = append(ids, n.Spec.ProviderID)
	}
	return ids, settled, nil
}

// reconcileMachines keeps desired instances of a pool with Machines: a
// LabMachine each (and its kwok Node), for which Cluster API's MachinePool
// controller makes a Machine. A scale down deletes Machines, those marked
// cluster.x-k8s.io/delete-machine first, so that Cluster API drains their
// Nodes before it deletes the LabMachines; a LabMachine without a Machine yet
// is deleted directly.
func (r *poolReconciler) reconcileMachines(ctx context.Context, pool, mp *unstructured.Unstructured, spec MachineSpec, desired int) (ids []string, settled bool, err error) {
	cluster, _, _ := unstructured.NestedString(mp.Object, "spec", "clusterName")
	selector := client.MatchingLabels{ClusterNameLabel: cluster, MachinePoolNameLabel: poolLabelValue(mp.GetName())}
	lmList := &unstructured.UnstructuredList{}
	lmList.SetGroupVersionKind(LabMachineGVK.GroupVersion().WithKind(KindMachine + "List"))
	if err := r.reader.List(ctx, lmList, client.InNamespace(pool.GetNamespace()), selector); err != nil {
		return nil, false, fmt.Errorf("listing the LabMachines of LabMachinePool %s: %w", client.ObjectKeyFromObject(pool), err)
	}
	machineList := &unstructured.UnstructuredList{}
	machineList.SetGroupVersionKind(MachineGVK.GroupVersion().WithKind(MachineGVK.Kind + "List"))
	if err := r.reader.List(ctx, machineList, client.InNamespace(pool.GetNamespace()), selector); err != nil {
		return nil, false, fmt.Errorf("listing the Machines of MachinePool %s/%s: %w", mp.GetNamespace(), mp.GetName(), err)
	}
	machineOf := map[string]*unstructured.Unstructured{} // by LabMachine name
	for i := range machineList.Items {
		m := &machineList.Items[i]
		if ref, _, _ := unstructured.NestedStringMap(m.Object, "spec", "infrastructureRef"); ref["kind"] == KindMachine {
			machineOf[ref["name"]] = m
		}
	}

	settled = true
	var live []*unstructured.Unstructured
	for i := range lmList.Items {
		lm := &lmList.Items[i]
		if provisioned, _, _ := unstructured.NestedBool(lm.Object, "status", "initialization", "provisioned"); provisioned {
			ids = append(ids, providerIDOf(lm))
		}
		m := machineOf[lm.GetName()]
		if !lm.GetDeletionTimestamp().IsZero() || (m != nil && !m.GetDeletionTimestamp().IsZero()) {
			settled = false
			continue
		}
		if m == nil {
			settled = false // Cluster API makes the Machine
		}
		live = append(live, lm)
	}
	if excess := len(live) - desired; excess > 0 {
		// Those marked for deletion first, then those not provisioned, then
		// the newest.
		marked := func(lm *unstructured.Unstructured) bool {
			m := machineOf[lm.GetName()]
			if m == nil {
				return false
			}
			_, ok := m.GetAnnotations()[DeleteMachineAnnotation]
			return ok
		}
		provisioned := func(lm *unstructured.Unstructured) bool {
			p, _, _ := unstructured.NestedBool(lm.Object, "status", "initialization", "provisioned")
			return p
		}
		slices.SortStableFunc(live, func(a, b *unstructured.Unstructured) int {
			if ma, mb := marked(a), marked(b); ma != mb {
				return boolFirst(ma)
			}
			if pa, pb := provisioned(a), provisioned(b); pa != pb {
				return boolFirst(pb)
			}
			return b.GetCreationTimestamp().Compare(a.GetCreationTimestamp().Time)
		})
		for _, lm := range live[:excess] {
			var victim client.Object = lm
			if m := machineOf[lm.GetName()]; m != nil {
				victim = m // Cluster API drains the Node, then deletes the LabMachine
			}
			if err := r.client.Delete(ctx, victim); client.IgnoreNotFound(err) != nil {
				return nil, false, fmt.Errorf("deleting %s %s/%s: %w", victim.GetObjectKind().GroupVersionKind().Kind, victim.GetNamespace(), victim.GetName(), err)
			}
			ctrl.LoggerFrom(ctx).Info("LabMachinePool scaled down", "deleted", victim.GetObjectKind().GroupVersionKind().Kind, "name", victim.GetName(), "marked", marked(lm))
		}
		live = live[excess:]
		settled = false
	}
	// A LabMachine made but not provisioned (its Node refused, or the
	// provider stopped in between) is finished first.
	for _, lm := range live {
		if provisioned, _, _ := unstructured.NestedBool(lm.Object, "status", "initialization", "provisioned"); !provisioned {
			if err := provision(ctx, r.client, r.nodes, lm, spec); err != nil {
				return nil, false, err
			}
			ids = append(ids, providerIDOf(lm))
		}
	}
	for len(live) < desired {
		lm, err := r.newMachine(ctx, pool, cluster, mp.GetName(), spec)
		if err != nil {
			return nil, false, err
		}
		live = append(live, lm)
		settled = false
		if err := provision(ctx, r.client, r.nodes, lm, spec); err != nil {
			return nil, false, err
		}
		ids = append(ids, providerIDOf(lm))
	}
	return ids, settled, nil
}

// newMachine creates a LabMachine of the pool: labelled as Cluster API's
// MachinePool controller looks for them (cluster and pool names), owned by the
// LabMachinePool (not as its controller: the Machine Cluster API makes for it
// will be), with the finalizer through which its Node goes with it.
func (r *poolReconciler) newMachine(ctx context.Context, pool *unstructured.Unstructured, cluster, mpName string, spec MachineSpec) (*unstructured.Unstructured, error) {
	lm := newUnstructured(LabMachineGVK)
	lm.SetNamespace(pool.GetNamespace())
	lm.SetName(pool.GetName() + "-" + rand.String(5))
	lm.SetLabels(map[string]string{ClusterNameLabel: cluster, MachinePoolNameLabel: poolLabelValue(mpName)})
	lm.SetOwnerReferences([]metav1.OwnerReference{{
		APIVersion: LabMachinePoolGVK.GroupVersion().String(), Kind: KindMachinePool, Name: pool.GetName(), UID: pool.GetUID(),
	}})
	lm.SetFinalizers([]string{Finalizer})
	lm.Object["spec"] = spec.object()
	if err := r.client.Create(ctx, lm); err != nil {
		return nil, fmt.Errorf("creating a LabMachine of LabMachinePool %s: %w", client.ObjectKeyFromObject(pool), err)
	}
	return lm, nil
}

// delete lets a LabMachinePool go once its instances are gone.
func (r *poolReconciler) delete(ctx context.Context, pool *unstructured.Unstructured, machines bool) (reconcile.Result, error) {
	if !controllerutil.ContainsFinalizer(pool, Finalizer) {
		return reconcile.Result{}, nil
	}
	left := 0
	if machines {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(LabMachineGVK.GroupVersion().WithKind(KindMachine + "List"))
		if err := r.reader.List(ctx, list, client.InNamespace(pool.GetNamespace())); err != nil {
			return reconcile.Result{}, err
		}
		for i := range list.Items {
			lm := &list.Items[i]
			if o := ownerOfKind(lm, LabMachinePoolGVK.GroupVersion().String(), KindMachinePool); o == nil || o.UID != pool.GetUID() {
				continue
			}
			left++
			if lm.GetDeletionTimestamp().IsZero() {
				if err := r.client.Delete(ctx, lm); client.IgnoreNotFound(err) != nil {
					return reconcile.Result{}, err
				}
			}
		}
	} else {
		var nodes corev1.NodeList
		if err := r.nodes.List(ctx, &nodes, client.MatchingLabels{PoolLabel: pool.GetName(), PoolNamespaceLabel: pool.GetNamespace()}); err != nil {
			return reconcile.Result{}, err
		}
		for i := range nodes.Items {
			if err := r.nodes.Delete(ctx, &nodes.Items[i]); client.IgnoreNotFound(err) != nil {
				return reconcile.Result{}, err
			}
		}
	}
	if left > 0 {
		return reconcile.Result{RequeueAfter: unsettled}, nil
	}
	orig := pool.DeepCopy()
	controllerutil.RemoveFinalizer(pool, Finalizer)
	if err := r.client.Patch(ctx, pool, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); client.IgnoreNotFound(err) != nil {
		return reconcile.Result{}, fmt.Errorf("removing the finalizer of LabMachinePool %s: %w", client.ObjectKeyFromObject(pool), err)
	}
	return reconcile.Result{}, nil
}

// boolFirst orders a before b when a holds (a sort function's answer for two
// elements that differ in a property).
func boolFirst(a bool) int {
	if a {
		return -1
	}
	return 1
}

// ownerOfKind returns obj's owner reference of apiVersion and kind, if any.
func ownerOfKind(obj client.Object, apiVersion, kind string) *metav1.OwnerReference {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.Kind == kind && ref.APIVersion == apiVersion {
			return &ref
		}
	}
	return nil
}

// poolLabelValue is a MachinePool's name as the value of
// cluster.x-k8s.io/pool-name: the name when it is a valid label value, else a
// hash of it, as Cluster API's format.MustFormatValue makes it (its MachinePool
// controller selects the pool's infrastructure machines with this value).
func poolLabelValue(name string) string {
	if len(validation.IsValidLabelValue(name)) == 0 {
		return name
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	return "hash_" + base64.URLEncoding.WithPadding(base64.NoPadding).EncodeToString(h.Sum(nil)) + "_z"
}

// machinePoolToInfrastructure maps a MachinePool to the LabMachinePool its
// spec.template.spec.infrastructureRef names, if it names one.
func machinePoolToInfrastructure(_ context.Context, obj client.Object) []reconcile.Request {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil
	}
	ref, _, _ := unstructured.NestedStringMap(u.Object, "spec", "template", "spec", "infrastructureRef")
	if ref["apiGroup"] != Group || ref["kind"] != KindMachinePool || ref["name"] == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: u.GetNamespace(), Name: ref["name"]}}}
}

var _ handler.MapFunc = machinePoolToInfrastructure
