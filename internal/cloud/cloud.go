// Package cloud is Spotter's seam to whatever runs its nodes: the instance
// behind a node (spot or not, type, zone, price, node group), deleting an
// instance, and node groups that can grow and shrink. Controllers depend on
// these interfaces only; each cloud lives in its own package
// (internal/cloud/<provider>), with a fake (internal/cloud/fake) for unit tests
// and a metrics decorator (internal/cloud/metrics) for production.
//
// # Contract for implementations
//
//   - Batching: Instances takes every node a caller cares about at once and
//     answers with as few cloud calls as the API allows (for example one
//     DescribeInstances per 1000 IDs on AWS, one aggregated list per project on
//     GCP). Callers call it once per loop with all their nodes, never once per
//     node.
//   - Caching: what never changes for an instance (type, zone, spot or not, node
//     group) is cached for the instance's life; what does change (prices, target
//     sizes) is cached with a TTL, so that a loop that runs every few seconds
//     does not turn into a cloud call every few seconds.
//   - Rate limits: implementations rate-limit their own calls and, when the
//     cloud throttles them anyway, return a *ThrottledError, with RetryAfter
//     when the cloud says how long to wait.
//   - Errors are typed (*NotFoundError, *ThrottledError,
//     *CapacityUnavailableError, *ControlPlaneError) or wrap one of the
//     sentinel errors below, so that callers decide with errors.As / errors.Is
//     (or IsNotFound, IgnoreNotFound, IsThrottled, IsCapacityUnavailable,
//     IsControlPlane), never by reading messages.
//   - Safety: a provider never deletes a control-plane node, and Spotter never
//     uses a node group that would put the control plane on spot
//     (ValidateNodeGroup, UsableNodeGroups).
//
// All methods are safe for concurrent use.
package cloud

import (
	"context"

	corev1 "k8s.io/api/core/v1"
)

// Provider is one cloud (or stand-in for one) that Spotter asks about the
// instances behind its nodes and, when it has node groups, asks for capacity.
type Provider interface {
	// Name is the provider's short name ("kwok", "kubernetes", "aws", ...), used
	// in logs and as the provider label of metrics.
	Name() string

	// Instances returns the instance behind each of nodes that the provider
	// knows, keyed by node name. Nodes the provider does not know, or cannot
	// tell about, are absent from the map: that is not an error. An error means
	// the provider could not answer at all (for example *ThrottledError); the
	// map is then nil. See the package documentation for batching and caching.
	Instances(ctx context.Context, nodes []*corev1.Node) (map[string]Instance, error)

	// DeleteInstance terminates the instance behind node and deletes its Node
	// object, or makes sure that something does. When the instance belongs to a
	// node group, the group's target size goes down by one, as with
	// NodeGroup.DeleteNodes (and it fails with ErrBelowMinSize where that
	// would). It returns a *NotFoundError when the instance is already gone, a
	// *ControlPlaneError for a control-plane node and ErrProtected for a
	// protected instance (Instance.Protected), these touching nothing.
	DeleteInstance(ctx context.Context, node *corev1.Node) error

	// NodeGroups lists the node groups Spotter may scale, in a stable order. A
	// provider without node groups returns none and no error. Callers that scale
	// groups filter them with UsableNodeGroups.
	NodeGroups(ctx context.Context) ([]NodeGroup, error)

	// NodeGroupForNode returns the node group that node belongs to, or a
	// *NotFoundError when it belongs to none.
	NodeGroupForNode(ctx context.Context, node *corev1.Node) (NodeGroup, error)
}

// PriceReader is a Provider that reads prices from the cloud (or from a
// table it ships), beyond the configuration's pricing section. spotter plan
// and spotter simulate --from-cluster call it after Instances, with every
// instance type of the cluster's nodes.
type PriceReader interface {
	// RefreshPrices reads the current prices (spot and on-demand) of
	// instanceTypes that were read longer ago than the provider's price TTL
	// (an hour by default: list prices change rarely), in as few calls as
	// the cloud allows, never one per node. Afterwards Instances, node
	// groups and InstanceTypePrice use them. An error leaves the prices read
	// before in place.
	RefreshPrices(ctx context.Context, instanceTypes []string) error

	// InstanceTypePrice returns the hourly price of instanceType in region
	// and zone (as an Instance names them; a provider derives the one it
	// needs from the other where it can), spot or on-demand, as Instances
	// prices an instance there: from the configuration's pricing and what
	// RefreshPrices read. It calls nothing.
	InstanceTypePrice(instanceType, region, zone string, spot bool) (price float64, known bool)
}

// LeftOut is a node group a provider's NodeGroups left out because it
// could not read or use it, and why.
type LeftOut struct {
	// Group is the group's ID, as NodeGroup.ID would give it.
	Group string
	// Err says why, with the fix where there is one (a launch template
	// that cannot be read, a launch configuration).
	Err error
}

// LeftOutReporter is a Provider whose NodeGroups leaves out the groups it
// cannot read or use rather than failing for all of them: a bad group is
// never fatal to the others. LeftOut returns those its last read of the
// groups left out, in ID order, and calls nothing.
type LeftOutReporter interface {
	LeftOut() []LeftOut
}

// Replacer is a Provider that can ask for a node's replacement at once, once
// its pods are gone: ReplaceNode deletes the node's machine and leaves its
// group's size as it is, so that the group makes a new one now rather than
// when a health check notices the machine is gone (a Cluster API Machine of
// an interrupted spot instance, deleted; its MachineSet creates another). A
// node of the control plane gets a *ControlPlaneError, one without a machine
// in a node group a *NotFoundError; a machine already being deleted is no
// error.
type Replacer interface {
	ReplaceNode(ctx context.Context, node *corev1.Node) error
}

// NodeGroup is a set of nodes with the same template (capacity, labels, taints,
// spot or not) whose size the cloud keeps at a target: an AWS Auto Scaling
// group, a GCP managed instance group, an Azure VM scale set, a Cluster API
// MachineDeployment. Its methods follow the cluster-autoscaler's
// cloudprovider.NodeGroup (cluster-autoscaler/cloudprovider/cloud_provider.go),
// with contexts and positive deltas.
//
// Sizes are counts of instances, registered as nodes or not. The target size is
// what the cloud works towards: instances that exist plus requests not yet
// fulfilled.
type NodeGroup interface {
	// ID identifies the group within its provider.
	ID() string

	// Spot reports whether the group's instances are spot (preemptible)
	// capacity.
	Spot() bool

	// MinSize is the smallest target size the group accepts.
	MinSize() int

	// MaxSize is the largest target size the group accepts.
	MaxSize() int

	// TargetSize is the number of instances the group currently works
	// towards: running ones plus requests not yet fulfilled.
	TargetSize(ctx context.Context) (int, error)

	// PricePerHour is the price of one of the group's instances for an hour, in
	// the currency of Spotter's pricing configuration, and whether it is known.
	PricePerHour() (price float64, known bool)

	// IncreaseSize asks for delta (> 0) more instances. It returns when the
	// request is recorded, not when the instances run: watch Nodes for them.
	// Above MaxSize it fails with ErrAboveMaxSize and changes nothing. A cloud
	// that refuses at once for lack of capacity returns a
	// *CapacityUnavailableError; one that accepts and cannot deliver reports it
	// on the unfulfilled instances of Nodes (Instance.Err).
	IncreaseSize(ctx context.Context, delta int) error

	// DecreaseTargetSize cancels delta (> 0) requested instances that are not
	// yet fulfilled: it never deletes an instance that exists, as the
	// cluster-autoscaler defines it (where delta is negative; here it is the
	// positive number of requests to cancel). Asking to cancel more than are
	// unfulfilled fails with ErrNotUnfulfilled, and going below MinSize with
	// ErrBelowMinSize; both change nothing. This is how a caller gives up on
	// capacity that does not come.
	DecreaseTargetSize(ctx context.Context, delta int) error

	// DeleteNodes terminates the instances behind nodes, deletes their Node
	// objects and lowers the target size by as many, so that the cloud does not
	// replace them. It checks everything first and changes nothing when a node
	// is not in the group (ErrNotInNodeGroup), is part of the control plane
	// (*ControlPlaneError), is protected (ErrProtected) or when the target
	// would fall below MinSize (ErrBelowMinSize). A node may stand for an
	// instance whose Node never registered: a Node with no name and
	// spec.providerID set to the instance's ID (Instance.ID); its instance
	// is deleted, and there is no Node object to delete.
	DeleteNodes(ctx context.Context, nodes []*corev1.Node) error

	// TemplateNode returns what a new node of the group will look like: its
	// labels, taints, capacity and allocatable resources. It lets a caller plan
	// against a group of size 0. The Node is a fresh copy the caller may change.
	TemplateNode(ctx context.Context) (*corev1.Node, error)

	// Nodes returns the group's instances: running ones (with NodeName set once
	// known) and, as InstanceCreating, requests not yet fulfilled, whose Err
	// says why they are late (for example a *CapacityUnavailableError).
	Nodes(ctx context.Context) ([]Instance, error)
}

// Instance is a cloud instance, as far as Spotter needs to know it.
type Instance struct {
	// ID is the provider's identity of the instance, the node's
	// spec.providerID where there is one ("aws:///us-east-1a/i-0abc",
	// "kwok://spot-a/spot-a-x7k2p").
	ID string
	// NodeName is the Node of the instance; empty while it has not registered.
	NodeName string
	// NodeGroup is the ID of the instance's node group; empty for none.
	NodeGroup string
	// Spot reports whether the instance is spot (preemptible) capacity.
	Spot bool
	// InstanceType is the cloud's machine type ("m5.xlarge"), when known.
	InstanceType string
	// Zone is the instance's availability zone, when known.
	Zone string
	// Region is the instance's region (an Azure VM's location), when the
	// provider knows it.
	Region string
	// PricePerHour is the hourly price of the instance; meaningful only when
	// PriceKnown.
	PricePerHour float64
	// PriceKnown reports whether PricePerHour is known.
	PriceKnown bool
	// State is the instance's life-cycle state.
	State InstanceState
	// Protected, when set, says why Spotter must not delete the instance:
	// the group protects it from scale-in, or it is in no group and the
	// configuration does not let Spotter terminate such instances.
	// DeleteInstance and DeleteNodes refuse it (ErrProtected); the migrator
	// does not drain its node. A provider says it as far as its last read of
	// the instance's group knows.
	Protected string
	// Err, for an instance that is not running, says what holds it up, for
	// example a *CapacityUnavailableError for a request the cloud cannot
	// fulfil.
	Err error
}

// InstanceState is where an instance is in its life.
type InstanceState string

// Instance states, as the cluster-autoscaler's cloudprovider.InstanceState.
const (
	// InstanceRunning: the instance exists (its node may still be joining).
	InstanceRunning InstanceState = "Running"
	// InstanceCreating: requested, not yet running.
	InstanceCreating InstanceState = "Creating"
	// InstanceDeleting: being terminated.
	InstanceDeleting InstanceState = "Deleting"
)
