// Package clusterapi is the cloud.Provider of Cluster API: node groups are
// MachineDeployments, MachineSets that no MachineDeployment owns, and
// MachinePools, that carry the cluster autoscaler's min and max size
// annotations; instances are Machines, and the instances of MachinePools. It
// reads and writes Cluster API objects as unstructured ones
// (cluster.x-k8s.io/v1beta2, the version Cluster API v1.11 and later store, or
// v1beta1 where the management cluster serves no other: APIVersions),
// through client-go's dynamic client, so Spotter needs no Cluster API Go
// module and works with any infrastructure provider.
//
// It follows the cluster autoscaler's clusterapi provider
// (cluster-autoscaler/cloudprovider/clusterapi) and uses its annotation names,
// so that one set of annotations serves both tools:
//
//   - A MachineDeployment, MachineSet or MachinePool is a node group when it
//     carries both cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size
//     and ...-max-size (integers, 0 <= min <= max). The configuration can narrow the
//     groups down to one Cluster, one namespace and a label selector.
//   - A group whose Machines are control plane (label
//     cluster.x-k8s.io/control-plane on the Machine template) is never a node
//     group, and its nodes are refused with a *cloud.ControlPlaneError. A
//     KubeadmControlPlane whose machines' infrastructure template asks for spot
//     capacity is refused too (SpotControlPlanes), with a Warning Event on it
//     when the provider records Events.
//   - Sizes go through the scale subresource, with the resourceVersion read, so
//     that a concurrent change (the autoscaler's, a user's) makes the write fail
//     rather than be lost.
//   - To delete given nodes, their Machines are annotated
//     cluster.x-k8s.io/delete-machine and the replicas lowered by as many in one
//     write: Cluster API's MachineSet deletes annotated Machines before any
//     other, so it deletes exactly those (when the MachineDeployment is not in
//     the middle of a rollout, which may scale down an older MachineSet first),
//     draining their Nodes and deleting them.
//   - A MachinePool's instances are its spec.providerIDList; their Nodes are
//     its status.nodeRefs. When its infrastructure machine pool makes a
//     Machine per instance (status.infrastructureMachineKind, Cluster API's
//     MachinePool Machines), a node is deleted as above: its Machine
//     annotated, the replicas lowered in one write, and the infrastructure
//     removes the annotated Machine first, as the MachinePool Machines
//     proposal asks of it. An instance without a Machine is never deleted:
//     lowering the replicas would remove one of the infrastructure's choosing,
//     so the delete is refused with a *NotDeletableError, as the cluster
//     autoscaler refuses it.
//   - Scale from zero reads the capacity annotations
//     (capacity.cluster-autoscaler.kubernetes.io/cpu, memory, ephemeral-disk,
//     maxPods, gpu-type, gpu-count, labels, taints), else the infrastructure
//     machine template's status.capacity of Cluster API's opt-in autoscaling
//     from zero contract.
//
// # Nodes and Machines
//
// The management cluster, where the Cluster API objects are, may be another
// apiserver than the workload cluster, where the Nodes are. A Node is matched
// to its Machine by the annotations Cluster API puts on it
// (cluster.x-k8s.io/machine and cluster.x-k8s.io/cluster-namespace), else by
// spec.providerID against the Machines' spec.providerID and the
// MachinePools' spec.providerIDList.
//
// # Spot or not
//
// A group is spot when its infrastructure machine template asks for spot
// capacity: spec.template.spec.spotMarketOptions (AWSMachineTemplate, and the
// lab's LabMachineTemplate), spec.template.spec.spotVMOptions
// (AzureMachineTemplate), spec.template.spec.preemptible or provisioningModel
// Spot (GCPMachineTemplate); a MachinePool when its infrastructure machine
// pool does, with the same fields where its kind keeps one instance's spec
// (spec.awsLaunchTemplate of an AWSMachinePool, spec.template of an
// AzureMachinePool and the lab's LabMachinePool, spec of a GCPMachinePool),
// or with a mixed instances policy of no on-demand capacity (AWSMachinePool)
// or capacityType spot (AWSManagedMachinePool). An instance is spot when its
// group is, or when its Node has the label cluster.x-k8s.io/interruptible,
// which Cluster API writes (with an empty value) for Machines whose
// infrastructure reports them interruptible.
//
// # Calls
//
// One read is one List each of MachineDeployments, MachineSets, MachinePools,
// Machines and KubeadmControlPlanes, and one List per kind of infrastructure
// machine template or machine pool the groups and control planes use; it
// serves every call for TTL (default 5s), whatever the number of nodes, and a
// write drops it. Instances never reads a single object; TemplateNode reads
// one Node of the group once per read (it copies a live node); Nodes of a
// MachinePool reads each Node of an instance without a Machine once in the
// Node's life, to learn its providerID (status.nodeRefs has only names).
package clusterapi

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"spotter.dev/spotter/internal/cloud"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// ProviderName is the provider's Name.
const ProviderName = "clusterapi"

// Names of Cluster API and of the cluster autoscaler's clusterapi provider that
// the provider reads or writes.
const (
	// MinSizeAnnotation and MaxSizeAnnotation, on a MachineDeployment,
	// MachineSet or MachinePool, make it a node group and bound its replicas.
	MinSizeAnnotation = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size"
	MaxSizeAnnotation = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size"
	// DeleteMachineAnnotation marks a Machine that its MachineSet deletes
	// first when it scales down.
	DeleteMachineAnnotation = "cluster.x-k8s.io/delete-machine"
	// MachineAnnotation and ClusterNamespaceAnnotation are Cluster API's on a
	// Node: the name and namespace of its Machine.
	MachineAnnotation          = "cluster.x-k8s.io/machine"
	ClusterNamespaceAnnotation = "cluster.x-k8s.io/cluster-namespace"
	// ControlPlaneLabel marks a control-plane Machine.
	ControlPlaneLabel = "cluster.x-k8s.io/control-plane"
	// ClusterNameLabel names the Cluster of a Cluster API object.
	ClusterNameLabel = "cluster.x-k8s.io/cluster-name"
	// InterruptibleLabel is Cluster API's label (empty value) on the Node of an
	// interruptible (spot) Machine.
	InterruptibleLabel = "cluster.x-k8s.io/interruptible"
	// CapacityTypeLabel is put on template nodes (spot or on-demand) so that
	// the planner classifies them.
	CapacityTypeLabel = "karpenter.sh/capacity-type"
	// PendingIDPrefix starts the Instance.ID of a Machine that has no
	// spec.providerID yet: clusterapi://<namespace>/<machine>.
	PendingIDPrefix = "clusterapi://"
)

// GroupVersion is the newest Cluster API version the provider reads and
// writes; it speaks v1beta1 too (APIVersions).
var GroupVersion = schema.GroupVersion{Group: "cluster.x-k8s.io", Version: "v1beta2"}

// Resources of Cluster API the provider uses.
var (
	MachinesGVR           = GroupVersion.WithResource("machines")
	MachineSetsGVR        = GroupVersion.WithResource("machinesets")
	MachineDeploymentsGVR = GroupVersion.WithResource("machinedeployments")
	MachinePoolsGVR       = GroupVersion.WithResource("machinepools")
)

// Kinds of node groups.
const (
	KindMachineDeployment = "MachineDeployment"
	KindMachineSet        = "MachineSet"
	KindMachinePool       = "MachinePool"
)

// Options configure the provider.
type Options struct {
	// ClusterName keeps the groups of this Cluster only; empty: all.
	ClusterName string
	// Namespace keeps the groups of this namespace only; empty: all.
	Namespace string
	// Selector keeps the groups whose labels it selects; nil: all.
	Selector labels.Selector
	// Pricing gives prices per instance type.
	Pricing v1alpha1.PricingConfig
	// TTL is how long one read of the Cluster API objects serves. Default 5s.
	TTL time.Duration
}

// Provider is the Cluster API cloud provider. Build it with New.
type Provider struct {
	mgmt   *rest.Config      // the management cluster
	dyn    dynamic.Interface // the management cluster
	mapper *restmapper.DeferredDiscoveryRESTMapper
	kube   kubernetes.Interface // the workload cluster
	clock  clock.Clock
	opts   Options

	state   stateCache
	events  eventLog
	nodeIDs nodeIDCache
	// versions is, by Cluster API group, the version its last List used
	// (see APIVersions).
	versions sync.Map
}

var (
	_ cloud.Provider            = (*Provider)(nil)
	_ cloud.NodeGroup           = (*NodeGroup)(nil)
	_ cloud.ControlPlaneChecker = (*Provider)(nil)
)

// New returns the provider: Cluster API objects are read from the management
// cluster mgmt, Nodes from the workload cluster kube.
func New(mgmt *rest.Config, kube kubernetes.Interface, clk clock.Clock, opts Options) (*Provider, error) {
	dyn, err := dynamic.NewForConfig(mgmt)
	if err != nil {
		return nil, fmt.Errorf("cloud.clusterAPI: dynamic client: %w", err)
	}
	disco, err := discovery.NewDiscoveryClientForConfig(mgmt)
	if err != nil {
		return nil, fmt.Errorf("cloud.clusterAPI: discovery client: %w", err)
	}
	if opts.TTL <= 0 {
		opts.TTL = 5 * time.Second
	}
	if opts.Selector == nil {
		opts.Selector = labels.Everything()
	}
	return &Provider{mgmt: rest.CopyConfig(mgmt), dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disco)),
		kube: kube, clock: clk, opts: opts}, nil
}

// FromConfig builds the provider from Spotter's configuration; workload is the
// configuration of the cluster Spotter runs in, also the management cluster
// unless cfg.ManagementKubeconfig names another.
func FromConfig(workload *rest.Config, kube kubernetes.Interface, clk clock.Clock, cfg v1alpha1.ClusterAPIConfig, pricing v1alpha1.PricingConfig) (*Provider, error) {
	mgmt := rest.CopyConfig(workload)
	if cfg.ManagementKubeconfig != "" {
		c, err := clientcmd.BuildConfigFromFlags("", cfg.ManagementKubeconfig)
		if err != nil {
			return nil, fmt.Errorf("cloud.clusterAPI.managementKubeconfig %s: %w", cfg.ManagementKubeconfig, err)
		}
		mgmt = c
	}
	opts := Options{ClusterName: cfg.ClusterName, Namespace: cfg.Namespace, Pricing: pricing}
	if cfg.LabelSelector != "" {
		sel, err := labels.Parse(cfg.LabelSelector)
		if err != nil {
			return nil, fmt.Errorf("cloud.clusterAPI.labelSelector: %w", err)
		}
		opts.Selector = sel
	}
	return New(mgmt, kube, clk, opts)
}

// Name implements cloud.Provider.
func (p *Provider) Name() string { return ProviderName }

// Instances implements cloud.Provider: the nodes whose Machines belong to a
// node group, from one read of the Cluster API objects. A Machine outside
// every node group is not Spotter's to delete, so its node is absent; so is
// the node of a MachinePool instance without a Machine (NodeGroupForNode
// still finds its group), which Spotter cannot delete either: the migrator
// takes a node's presence here as leave to drain it, and must not drain a
// node whose delete would then be refused.
func (p *Provider) Instances(ctx context.Context, nodes []*corev1.Node) (map[string]cloud.Instance, error) {
	s, err := p.read(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]cloud.Instance, len(nodes))
	for _, n := range nodes {
		m := s.machineOf(n)
		if m == nil || m.group == nil || m.noMachine {
			continue
		}
		inst := m.instance(p)
		inst.NodeName = n.Name
		if n.Spec.ProviderID != "" {
			inst.ID = n.Spec.ProviderID
		}
		inst.Spot = inst.Spot || interruptible(n)
		if t := n.Labels[corev1.LabelInstanceTypeStable]; t != "" {
			inst.InstanceType = t
		}
		if z := n.Labels[corev1.LabelTopologyZone]; z != "" {
			inst.Zone = z
		}
		inst.PricePerHour, inst.PriceKnown = p.price(inst.InstanceType, inst.Spot)
		out[n.Name] = inst
	}
	return out, nil
}

// interruptible reports whether node has Cluster API's interruptible label.
// Cluster API writes it with an empty value; any value but "false" counts.
func interruptible(node *corev1.Node) bool {
	v, ok := node.Labels[InterruptibleLabel]
	return ok && v != "false"
}

// price is an instance type's hourly price from the pricing configuration.
func (p *Provider) price(typ string, spot bool) (float64, bool) {
	conf, ok := p.opts.Pricing.InstanceTypes[typ]
	if !ok {
		return 0, false
	}
	if spot {
		return conf.Spot, conf.Spot > 0
	}
	return conf.OnDemand, conf.OnDemand > 0
}

// DeleteInstance implements cloud.Provider: the node's group deletes it
// (NodeGroup.DeleteNodes). A node without a Machine is a *cloud.NotFoundError,
// unless it is an instance of a MachinePool node group (refused with a
// *NotDeletableError); one whose Machine is in no node group is refused, as
// Spotter may lower the replicas of node groups only.
func (p *Provider) DeleteInstance(ctx context.Context, node *corev1.Node) error {
	if err := cloud.CheckDeletable(node); err != nil {
		return err
	}
	g, err := p.NodeGroupForNode(ctx, node)
	var nf *cloud.NotFoundError
	if errors.As(err, &nf) && !errors.Is(err, errNoMachine) {
		// The Machine exists: it is not gone, only not Spotter's to delete.
		return fmt.Errorf("not deleting node %s: %w", node.Name, nf.Unwrap())
	}
	if err != nil {
		return err
	}
	return g.DeleteNodes(ctx, []*corev1.Node{node})
}

// ReplaceNode implements cloud.Replacer: it deletes the node's Machine, and
// its MachineSet (or MachinePool) creates a new one, the group's replicas
// unchanged. The Machine must be a worker of a node group in scope; a
// MachinePool instance without a Machine is refused with a *NotDeletableError
// that wraps errors.ErrUnsupported.
func (p *Provider) ReplaceNode(ctx context.Context, node *corev1.Node) error {
	s, err := p.read(ctx)
	if err != nil {
		return err
	}
	m := s.machineOf(node)
	switch {
	case m != nil && m.controlPlane:
		return &cloud.ControlPlaneError{Kind: "node", Name: node.Name,
			Reason: fmt.Sprintf("its Machine %s/%s has label %s; Spotter never deletes it", m.namespace, m.name, ControlPlaneLabel)}
	case m == nil || m.group == nil:
		return cloud.NewNotFoundError(fmt.Errorf("node %s has no Machine in a node group in scope", node.Name))
	case m.noMachine:
		return fmt.Errorf("%w: %w", errors.ErrUnsupported, m.group.notDeletable(node.Name))
	case m.deleting:
		return nil
	}
	err = p.dyn.Resource(p.gvr(MachinesGVR)).Namespace(m.namespace).Delete(ctx, m.name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting Machine %s/%s of node %s: %w", m.namespace, m.name, node.Name, cloud.FromAPIError(err))
	}
	p.invalidate()
	klog.FromContext(ctx).Info("Deleted the Machine of a drained node for its group to replace", "node", node.Name, "machine", klog.KRef(m.namespace, m.name), "group", m.group.id)
	return nil
}

// NodeGroups implements cloud.Provider: the annotated MachineDeployments,
// MachineSets and MachinePools in scope, by ID.
func (p *Provider) NodeGroups(ctx context.Context) ([]cloud.NodeGroup, error) {
	s, err := p.read(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]cloud.NodeGroup, len(s.groups))
	for i, g := range s.groups {
		out[i] = g
	}
	return out, nil
}

// NodeGroupForNode implements cloud.Provider. The node of a control-plane
// Machine gets a *cloud.ControlPlaneError, one of a Machine outside every node
// group a *cloud.NotFoundError.
func (p *Provider) NodeGroupForNode(ctx context.Context, node *corev1.Node) (cloud.NodeGroup, error) {
	s, err := p.read(ctx)
	if err != nil {
		return nil, err
	}
	m := s.machineOf(node)
	switch {
	case m == nil:
		return nil, cloud.NewNotFoundError(fmt.Errorf("node %s (annotation %s, spec.providerID %q): %w",
			node.Name, MachineAnnotation, node.Spec.ProviderID, errNoMachine))
	case m.controlPlane:
		return nil, &cloud.ControlPlaneError{Kind: "node", Name: node.Name,
			Reason: fmt.Sprintf("its Machine %s/%s has label %s; Spotter never scales the control plane", m.namespace, m.name, ControlPlaneLabel)}
	case m.group == nil:
		return nil, cloud.NewNotFoundError(fmt.Errorf("machine %s/%s of node %s is in no node group: its MachineDeployment, MachineSet or MachinePool needs the annotations %s and %s (and to be in cloud.clusterAPI's scope)",
			m.namespace, m.name, node.Name, MinSizeAnnotation, MaxSizeAnnotation))
	}
	return m.group, nil
}

// errNoMachine says that a node has no Machine.
var errNoMachine = errors.New("no Cluster API Machine")

// errBadScale is returned when a scale subresource cannot be read.
var errBadScale = errors.New("unreadable scale subresource")
