// Package kwok is a cloud.Provider whose instances are kwok Node objects: node
// groups that create Nodes from their template after a provisioning delay,
// within a spot capacity that is fixed or replayed from a measured trace, and
// delete them again. It is the cloud of the lab and of the e2e tests: the
// lab's kwok (lab.KwokNodeAnnotation) makes the Nodes Ready and runs their pods.
//
// # Model
//
// Each group has a target size: its nodes plus its unfulfilled requests.
// IncreaseSize adds requests; a request is fulfilled, by creating a Node, once
// its ProvisioningDelay has passed and while the group's capacity (CapacityLimit
// and the Trace value at the current time, the lower of the two) is above its
// node count. Otherwise it waits, and Nodes reports it as InstanceCreating with
// a *cloud.CapacityUnavailableError, as a cloud reports a stock-out, until
// capacity returns or DecreaseTargetSize cancels it. DeleteNodes (and
// DeleteInstance) delete Nodes and lower the target. A Node deleted by anyone
// else is replaced, as an auto-scaling group replaces a terminated instance.
//
// # Running it
//
// New builds the provider from a Config (LoadConfig reads one from YAML).
// Start runs it: it adopts the Nodes an earlier run left, then reconciles every
// Config.Interval, and at once after a change, until its context ends. It is a
// controller-runtime manager.Runnable that needs leader election, so one
// replica plays the cloud. Reconcile runs one pass; tests that drive a fake
// clock call it directly.
//
// All times come from the injected clock.
package kwok

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"spotter.dev/spotter/internal/cloud"
)

// ProviderName is the provider's Name.
const ProviderName = "kwok"

// NodeGroupLabel marks the nodes of a group with the group's ID.
const NodeGroupLabel = "spotter.dev/node-group"

// ProviderIDPrefix starts the spec.providerID of the provider's nodes:
// kwok://<group>/<node>.
const ProviderIDPrefix = "kwok://"

// Provider is the kwok cloud provider. Build it with New.
type Provider struct {
	client   kubernetes.Interface
	clock    clock.Clock
	interval time.Duration
	groups   []*NodeGroup
	byID     map[string]*NodeGroup
	wake     chan struct{}
	synced   chan struct{}

	// mu guards the state of every group; it is held across the API calls of
	// one operation so that operations apply one after the other.
	mu  sync.Mutex
	log klog.Logger
}

var (
	_ cloud.Provider  = (*Provider)(nil)
	_ cloud.NodeGroup = (*NodeGroup)(nil)
)

// New validates cfg, reads its trace files and returns a provider that creates
// Nodes through client, on clk's time. A group that would put the control plane
// on spot is refused with a *cloud.ControlPlaneError. Trace replays start now.
func New(client kubernetes.Interface, clk clock.Clock, cfg Config) (*Provider, error) {
	if errs := cfg.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("kwok provider config: %w", errs.ToAggregate())
	}
	p := &Provider{
		client:   client,
		clock:    clk,
		interval: cfg.Interval.Duration,
		byID:     map[string]*NodeGroup{},
		wake:     make(chan struct{}, 1),
		synced:   make(chan struct{}),
		log:      klog.Background().WithName("kwok-provider"),
	}
	if p.interval == 0 {
		p.interval = DefaultInterval
	}
	now := clk.Now()
	var errs []error
	for i, gc := range cfg.NodeGroups {
		g, err := newNodeGroup(p, gc, now)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", field.NewPath("nodeGroups").Index(i), err))
			continue
		}
		if err := cloud.ValidateNodeGroup(context.Background(), g); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", field.NewPath("nodeGroups").Index(i), err))
			continue
		}
		p.groups = append(p.groups, g)
		p.byID[g.cfg.ID] = g
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("kwok provider config: %w", err)
	}
	return p, nil
}

// Name implements cloud.Provider.
func (p *Provider) Name() string { return ProviderName }

// NeedLeaderElection makes a controller-runtime manager run Start on the leader
// only: two replicas playing the same cloud would both create nodes.
func (p *Provider) NeedLeaderElection() bool { return true }

// Start runs the provider until ctx ends: it watches the Nodes labelled
// spotter.dev/node-group, adopts those of its groups that exist (so that a
// restart neither forgets nor duplicates nodes; adopted nodes fulfil requests,
// such as the initial size, first), then reconciles every Config.Interval and
// after each change. A Node of a group deleted behind the provider's back is
// replaced. Start returns nil when ctx ends, an error when it cannot start.
// Call it once.
func (p *Provider) Start(ctx context.Context) error {
	p.log = klog.FromContext(ctx).WithName("kwok-provider")
	factory := informers.NewSharedInformerFactoryWithOptions(p.client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = NodeGroupLabel }))
	informer := factory.Core().V1().Nodes().Informer()
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: p.nodeDeleted}); err != nil {
		return fmt.Errorf("watching nodes: %w", err)
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		if ctx.Err() != nil {
			return nil
		}
		return errors.New("kwok provider: node cache did not sync")
	}
	p.adopt(informer.GetStore().List())
	close(p.synced)

	for {
		if err := p.Reconcile(ctx); err != nil && ctx.Err() == nil {
			p.log.Error(err, "Reconciling node groups")
		}
		timer := p.clock.NewTimer(p.interval)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-p.wake:
			timer.Stop()
		case <-timer.C():
		}
	}
}

// Synced is closed once Start has adopted the existing Nodes.
func (p *Provider) Synced() <-chan struct{} { return p.synced }

// Reconcile runs one pass over every group at the clock's current time:
// preempts nodes above capacity (groups with Preempt), then fulfils the
// requests whose delay has passed while capacity allows and marks the others
// capacity-unavailable. It returns the API errors it met; the requests they
// hit stay and are retried on the next pass.
func (p *Provider) Reconcile(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock.Now()
	var errs []error
	for _, g := range p.groups {
		if err := g.reconcile(ctx, now); err != nil {
			errs = append(errs, fmt.Errorf("node group %s: %w", g.cfg.ID, err))
		}
	}
	return errors.Join(errs...)
}

// poke makes Start reconcile soon.
func (p *Provider) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// adopt takes the listed Nodes of known groups as the groups' nodes.
func (p *Provider) adopt(objs []any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, obj := range objs {
		node, ok := obj.(*corev1.Node)
		if !ok || node.DeletionTimestamp != nil {
			continue
		}
		g := p.byID[node.Labels[NodeGroupLabel]]
		if g == nil {
			p.log.V(1).Info("Ignoring a node of an unknown node group", "node", klog.KObj(node), "nodeGroup", node.Labels[NodeGroupLabel])
			continue
		}
		if _, known := g.nodes[node.Name]; known {
			continue
		}
		g.nodes[node.Name] = node.CreationTimestamp.Time
		if len(g.requests) > 0 {
			g.requests = g.requests[1:]
		}
		p.log.Info("Adopted a node", "node", klog.KObj(node), "nodeGroup", g.cfg.ID)
	}
}

// nodeDeleted replaces a group's Node that someone else deleted.
func (p *Provider) nodeDeleted(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	node, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	p.mu.Lock()
	g := p.byID[node.Labels[NodeGroupLabel]]
	replaced := false
	if g != nil {
		if _, ok := g.nodes[node.Name]; ok {
			delete(g.nodes, node.Name)
			g.request(p.clock.Now())
			replaced = true
		}
	}
	p.mu.Unlock()
	if replaced {
		p.log.Info("A node was deleted outside the provider; replacing it", "node", klog.KObj(node), "nodeGroup", g.cfg.ID)
		p.poke()
	}
}

// groupOf returns the group node is labelled with, or nil.
func (p *Provider) groupOf(node *corev1.Node) *NodeGroup {
	return p.byID[node.Labels[NodeGroupLabel]]
}

// NodeGroup returns the group with the given ID, or nil.
func (p *Provider) NodeGroup(id string) *NodeGroup { return p.byID[id] }

// Instances implements cloud.Provider from the nodes' labels: it makes no API
// call. Nodes not labelled with one of the provider's groups are absent.
func (p *Provider) Instances(_ context.Context, nodes []*corev1.Node) (map[string]cloud.Instance, error) {
	out := map[string]cloud.Instance{}
	for _, n := range nodes {
		g := p.groupOf(n)
		if g == nil {
			continue
		}
		inst := g.instance(n.Name)
		if n.Spec.ProviderID != "" {
			inst.ID = n.Spec.ProviderID
		}
		if n.DeletionTimestamp != nil {
			inst.State = cloud.InstanceDeleting
		}
		out[n.Name] = inst
	}
	return out, nil
}

// DeleteInstance implements cloud.Provider: DeleteNodes of the node's group.
// A node of no group is a *cloud.NotFoundError.
func (p *Provider) DeleteInstance(ctx context.Context, node *corev1.Node) error {
	if err := cloud.CheckDeletable(node); err != nil {
		return err
	}
	g := p.groupOf(node)
	if g == nil {
		return cloud.NewNotFoundError(fmt.Errorf("node %s is in no kwok node group", node.Name))
	}
	return g.DeleteNodes(ctx, []*corev1.Node{node})
}

// NodeGroups implements cloud.Provider: the configured groups, in order.
func (p *Provider) NodeGroups(context.Context) ([]cloud.NodeGroup, error) {
	out := make([]cloud.NodeGroup, len(p.groups))
	for i, g := range p.groups {
		out[i] = g
	}
	return out, nil
}

// NodeGroupForNode implements cloud.Provider, from the node's
// spotter.dev/node-group label.
func (p *Provider) NodeGroupForNode(_ context.Context, node *corev1.Node) (cloud.NodeGroup, error) {
	if g := p.groupOf(node); g != nil {
		return g, nil
	}
	return nil, cloud.NewNotFoundError(fmt.Errorf("node %s is in no kwok node group", node.Name))
}

// providerID is the spec.providerID of a group's node.
func providerID(group, name string) string {
	return ProviderIDPrefix + group + "/" + name
}

// ParseProviderID splits a kwok provider ID into group and node name.
func ParseProviderID(id string) (group, name string, ok bool) {
	rest, ok := strings.CutPrefix(id, ProviderIDPrefix)
	if !ok {
		return "", "", false
	}
	group, name, ok = strings.Cut(rest, "/")
	return group, name, ok && group != "" && name != ""
}
