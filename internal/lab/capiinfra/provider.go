package capiinfra

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Options configure the provider.
type Options struct {
	// Kubeconfig is the kubeconfig of the workload cluster: the lab itself,
	// or another apiserver when the management cluster is apart. It is
	// written into each Cluster's <cluster>-kubeconfig Secret for Cluster API,
	// its server is the endpoint set on LabClusters, and the provider creates
	// and deletes the Nodes of LabMachines there.
	Kubeconfig []byte
	// Logger receives the provider's logs. Default: klog.
	Logger logr.Logger
}

// Provider runs the LabCluster, LabControlPlane, LabMachine and LabMachinePool
// controllers in a controller-runtime manager of its own.
type Provider struct {
	mgr manager.Manager
}

// New builds the provider for the management cluster whose admin
// configuration is cfg. Its CRDs must be installed there (InstallCRDs with
// CRDs()), and Cluster API's.
func New(cfg *rest.Config, opts Options) (*Provider, error) {
	if len(opts.Kubeconfig) == 0 {
		return nil, errors.New("capiinfra: Options.Kubeconfig is empty")
	}
	endpoint, err := endpointOf(opts.Kubeconfig)
	if err != nil {
		return nil, err
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = klog.Background()
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Logger:                 opts.Logger.WithName("capiinfra"),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// Tests run several providers in one process; controller names are
		// otherwise unique per process.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, fmt.Errorf("capiinfra: manager: %w", err)
	}
	// Reads go to the apiserver: the provider acts on few objects, and a read
	// after its own write must see it.
	c := client.WithFieldOwner(mgr.GetClient(), "spotter-lab-capiinfra")
	reader := mgr.GetAPIReader()
	clusters := &clusterReconciler{client: c, reader: reader, endpoint: endpoint}
	if err := ctrl.NewControllerManagedBy(mgr).Named("labcluster").
		For(newUnstructured(LabClusterGVK)).
		Complete(clusters); err != nil {
		return nil, err
	}
	controlPlanes := &controlPlaneReconciler{client: c, reader: reader, kubeconfig: opts.Kubeconfig}
	if err := ctrl.NewControllerManagedBy(mgr).Named("labcontrolplane").
		For(newUnstructured(LabControlPlaneGVK)).
		Complete(controlPlanes); err != nil {
		return nil, err
	}
	workload, err := clientcmd.RESTConfigFromKubeConfig(opts.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("capiinfra: the workload cluster's kubeconfig: %w", err)
	}
	nodes, err := client.New(workload, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("capiinfra: workload cluster client: %w", err)
	}
	machines := &machineReconciler{client: c, reader: reader, nodes: client.WithFieldOwner(nodes, "spotter-lab-capiinfra")}
	if err := ctrl.NewControllerManagedBy(mgr).Named("labmachine").
		For(newUnstructured(LabMachineGVK)).
		Watches(newUnstructured(MachineGVK), handler.EnqueueRequestsFromMapFunc(infrastructureRefTo(KindMachine))).
		Complete(machines); err != nil {
		return nil, err
	}
	pools := &poolReconciler{client: c, reader: reader, nodes: machines.nodes}
	if err := ctrl.NewControllerManagedBy(mgr).Named("labmachinepool").
		For(newUnstructured(LabMachinePoolGVK)).
		Watches(newUnstructured(MachinePoolGVK), handler.EnqueueRequestsFromMapFunc(machinePoolToInfrastructure)).
		Watches(newUnstructured(LabMachineGVK), handler.EnqueueRequestForOwner(scheme, mgr.GetRESTMapper(), newUnstructured(LabMachinePoolGVK))).
		Complete(pools); err != nil {
		return nil, err
	}
	return &Provider{mgr: mgr}, nil
}

// Start runs the controllers until ctx ends.
func (p *Provider) Start(ctx context.Context) error {
	return p.mgr.Start(ctx)
}

// infrastructureRefTo maps a Cluster API object to the provider object its
// spec.infrastructureRef names, if it names one of kind.
func infrastructureRefTo(kind string) handler.MapFunc {
	return func(_ context.Context, obj client.Object) []reconcile.Request {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return nil
		}
		ref, _, _ := unstructured.NestedStringMap(u.Object, "spec", "infrastructureRef")
		if ref["apiGroup"] != Group || ref["kind"] != kind || ref["name"] == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: u.GetNamespace(), Name: ref["name"]}}}
	}
}

func newUnstructured(gvk schema.GroupVersionKind) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u
}
