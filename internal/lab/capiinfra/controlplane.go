package capiinfra

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// controlPlaneReconciler makes a LabControlPlane what Cluster API expects of an
// externally managed control plane that is up: the Cluster's kubeconfig Secret
// written, status.initialization.controlPlaneInitialized and
// status.externalManagedControlPlane true.
type controlPlaneReconciler struct {
	client     client.Client
	reader     client.Reader
	kubeconfig []byte
}

func (r *controlPlaneReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	cp := newUnstructured(LabControlPlaneGVK)
	if err := r.reader.Get(ctx, req.NamespacedName, cp); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !cp.GetDeletionTimestamp().IsZero() {
		return reconcile.Result{}, nil // the Secret is the Cluster's, and goes with it
	}
	owner := ownerOf(cp, ClusterGVK.Kind)
	if owner == nil {
		log.V(1).Info("waiting for the Cluster to own the LabControlPlane")
		return reconcile.Result{}, nil
	}
	cluster := newUnstructured(ClusterGVK)
	if err := r.reader.Get(ctx, client.ObjectKey{Namespace: cp.GetNamespace(), Name: owner.Name}, cluster); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if err := r.ensureKubeconfig(ctx, cluster); err != nil {
		return reconcile.Result{}, err
	}
	initialized, _, _ := unstructured.NestedBool(cp.Object, "status", "initialization", "controlPlaneInitialized")
	managed, _, _ := unstructured.NestedBool(cp.Object, "status", "externalManagedControlPlane")
	if initialized && managed {
		return reconcile.Result{}, nil
	}
	orig := cp.DeepCopy()
	if err := unstructured.SetNestedField(cp.Object, true, "status", "initialization", "controlPlaneInitialized"); err != nil {
		return reconcile.Result{}, err
	}
	if err := unstructured.SetNestedField(cp.Object, true, "status", "externalManagedControlPlane"); err != nil {
		return reconcile.Result{}, err
	}
	if err := r.client.Status().Patch(ctx, cp, client.MergeFrom(orig)); err != nil {
		return reconcile.Result{}, fmt.Errorf("marking LabControlPlane %s initialized: %w", req, err)
	}
	log.Info("LabControlPlane initialized", "cluster", owner.Name)
	return reconcile.Result{}, nil
}

// ensureKubeconfig writes the Secret through which Cluster API reaches the
// workload cluster, as a control plane provider does: <cluster>-kubeconfig, key
// value, owned by the Cluster. Cluster API's cache holds only Secrets labelled
// with a cluster name.
func (r *controlPlaneReconciler) ensureKubeconfig(ctx context.Context, cluster *unstructured.Unstructured) error {
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:      cluster.GetName() + kubeconfigSecretSuffix,
			Namespace: cluster.GetNamespace(),
			Labels:    map[string]string{ClusterNameLabel: cluster.GetName()},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: ClusterGVK.GroupVersion().String(), Kind: ClusterGVK.Kind,
				Name: cluster.GetName(), UID: cluster.GetUID(), Controller: ptr.To(true),
			}},
		},
		Type: clusterSecretType,
		Data: map[string][]byte{kubeconfigSecretKey: r.kubeconfig},
	}
	err := r.client.Create(ctx, secret)
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating Secret %s/%s: %w", secret.Namespace, secret.Name, err)
	}
	return nil
}
