package capiinfra

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// clusterReconciler provisions LabClusters: there is nothing to make, the
// workload apiserver is the endpoint.
type clusterReconciler struct {
	client   client.Client
	reader   client.Reader
	endpoint endpoint
}

type endpoint struct {
	host string
	port int64
}

// endpointOf returns the apiserver address of the kubeconfig's current context.
func endpointOf(kubeconfig []byte) (endpoint, error) {
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return endpoint{}, fmt.Errorf("capiinfra: reading the kubeconfig: %w", err)
	}
	ctx, ok := cfg.Contexts[cfg.CurrentContext]
	if !ok || cfg.Clusters[ctx.Cluster] == nil {
		return endpoint{}, fmt.Errorf("capiinfra: the kubeconfig has no cluster for its current context %q", cfg.CurrentContext)
	}
	u, err := url.Parse(cfg.Clusters[ctx.Cluster].Server)
	if err != nil {
		return endpoint{}, fmt.Errorf("capiinfra: the kubeconfig's server: %w", err)
	}
	host, portStr, err := net.SplitHostPort(u.Host)
	if err != nil {
		host, portStr = u.Host, "443"
	}
	port, err := strconv.ParseInt(portStr, 10, 32)
	if err != nil {
		return endpoint{}, fmt.Errorf("capiinfra: the kubeconfig's server port: %w", err)
	}
	return endpoint{host: host, port: port}, nil
}

func (r *clusterReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	lc := newUnstructured(LabClusterGVK)
	if err := r.reader.Get(ctx, req.NamespacedName, lc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !lc.GetDeletionTimestamp().IsZero() {
		return reconcile.Result{}, nil // nothing was made for it that the Cluster does not own
	}
	// Cluster API sets the owner reference when it first reconciles the Cluster.
	owner := ownerOf(lc, ClusterGVK.Kind)
	if owner == nil {
		log.V(1).Info("waiting for the Cluster to own the LabCluster")
		return reconcile.Result{}, nil
	}

	if host, _, _ := unstructured.NestedString(lc.Object, "spec", "controlPlaneEndpoint", "host"); host == "" {
		orig := lc.DeepCopy()
		ep := map[string]any{"host": r.endpoint.host, "port": r.endpoint.port}
		if err := unstructured.SetNestedMap(lc.Object, ep, "spec", "controlPlaneEndpoint"); err != nil {
			return reconcile.Result{}, err
		}
		if err := r.client.Patch(ctx, lc, client.MergeFrom(orig)); err != nil {
			return reconcile.Result{}, fmt.Errorf("setting the endpoint of LabCluster %s: %w", req, err)
		}
	}
	if provisioned, _, _ := unstructured.NestedBool(lc.Object, "status", "initialization", "provisioned"); !provisioned {
		orig := lc.DeepCopy()
		if err := unstructured.SetNestedField(lc.Object, true, "status", "initialization", "provisioned"); err != nil {
			return reconcile.Result{}, err
		}
		if err := r.client.Status().Patch(ctx, lc, client.MergeFrom(orig)); err != nil {
			return reconcile.Result{}, fmt.Errorf("marking LabCluster %s provisioned: %w", req, err)
		}
		log.Info("LabCluster provisioned", "endpoint", fmt.Sprintf("%s:%d", r.endpoint.host, r.endpoint.port))
	}
	return reconcile.Result{}, nil
}

// ownerOf returns obj's owner reference of the Cluster API kind, if any.
func ownerOf(obj client.Object, kind string) *metav1.OwnerReference {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.Kind == kind && isCAPI(ref.APIVersion) {
			return &ref
		}
	}
	return nil
}

func isCAPI(apiVersion string) bool {
	gv, err := schema.ParseGroupVersion(apiVersion)
	return err == nil && gv.Group == CAPIGroupVersion.Group
}
