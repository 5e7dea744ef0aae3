package capiinfra

import "k8s.io/apimachinery/pkg/runtime/schema"

// The provider's API.
const (
	Group   = "infrastructure.lab.spotter.dev"
	Version = "v1alpha1"

	// ControlPlaneGroup is the group of LabControlPlane, apart as Cluster API's
	// own control plane kinds are.
	ControlPlaneGroup = "controlplane.lab.spotter.dev"

	KindCluster         = "LabCluster"
	KindControlPlane    = "LabControlPlane"
	KindMachine         = "LabMachine"
	KindMachineTemplate = "LabMachineTemplate"
	KindMachinePool     = "LabMachinePool"

	// Finalizer keeps a LabMachine until the provider has deleted its Node.
	Finalizer = Group + "/node"

	// ProviderIDPrefix starts the spec.providerID of a LabMachine and its Node:
	// lab://<namespace>/<name>; of an instance of a LabMachinePool too.
	ProviderIDPrefix = "lab://"

	// PoolLabel and PoolNamespaceLabel are on the Nodes a LabMachinePool
	// without Machines makes: they name the pool, and are how the provider
	// finds its instances.
	PoolLabel          = Group + "/machine-pool"
	PoolNamespaceLabel = Group + "/machine-pool-namespace"
)

// Group versions of the provider's kinds.
var (
	GroupVersion             = schema.GroupVersion{Group: Group, Version: Version}
	ControlPlaneGroupVersion = schema.GroupVersion{Group: ControlPlaneGroup, Version: Version}
)

// Kinds and resources of the provider.
var (
	LabClusterGVK          = GroupVersion.WithKind(KindCluster)
	LabMachineGVK          = GroupVersion.WithKind(KindMachine)
	LabMachineTemplateGVK  = GroupVersion.WithKind(KindMachineTemplate)
	LabMachinePoolGVK      = GroupVersion.WithKind(KindMachinePool)
	LabControlPlaneGVK     = ControlPlaneGroupVersion.WithKind(KindControlPlane)
	LabClustersGVR         = GroupVersion.WithResource("labclusters")
	LabMachinesGVR         = GroupVersion.WithResource("labmachines")
	LabMachineTemplatesGVR = GroupVersion.WithResource("labmachinetemplates")
	LabMachinePoolsGVR     = GroupVersion.WithResource("labmachinepools")
	LabControlPlanesGVR    = ControlPlaneGroupVersion.WithResource("labcontrolplanes")
)

// CAPIGroupVersion is the Cluster API version the lab reads and writes: the one
// Cluster API v1.14 stores, and the only one the lab can use, as its CRDs are
// installed without their conversion webhook.
var CAPIGroupVersion = schema.GroupVersion{Group: "cluster.x-k8s.io", Version: "v1beta2"}

// Cluster API kinds and resources.
var (
	ClusterGVK            = CAPIGroupVersion.WithKind("Cluster")
	MachineGVK            = CAPIGroupVersion.WithKind("Machine")
	MachineDeploymentGVK  = CAPIGroupVersion.WithKind("MachineDeployment")
	MachinePoolGVK        = CAPIGroupVersion.WithKind("MachinePool")
	ClustersGVR           = CAPIGroupVersion.WithResource("clusters")
	MachinesGVR           = CAPIGroupVersion.WithResource("machines")
	MachineSetsGVR        = CAPIGroupVersion.WithResource("machinesets")
	MachineDeploymentsGVR = CAPIGroupVersion.WithResource("machinedeployments")
	MachinePoolsGVR       = CAPIGroupVersion.WithResource("machinepools")
)

// Cluster API names the provider and the builders use.
const (
	ClusterNameLabel           = "cluster.x-k8s.io/cluster-name"
	MachineDeploymentNameLabel = "cluster.x-k8s.io/deployment-name"
	// MachinePoolNameLabel is on the infrastructure machines of a MachinePool
	// (and Cluster API copies it on their Machines): the pool's name, as a
	// label value (poolLabelValue).
	MachinePoolNameLabel = "cluster.x-k8s.io/pool-name"
	// DeleteMachineAnnotation marks a Machine to delete first on a scale down.
	DeleteMachineAnnotation = "cluster.x-k8s.io/delete-machine"
	// InterruptibleLabel is the label Cluster API puts (with an empty value) on
	// the Node of a Machine whose InfrastructureMachine reports
	// status.interruptible.
	InterruptibleLabel = "cluster.x-k8s.io/interruptible"

	kubeconfigSecretSuffix = "-kubeconfig"
	kubeconfigSecretKey    = "value"
	clusterSecretType      = "cluster.x-k8s.io/secret"
)
