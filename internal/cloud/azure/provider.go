// Package azure is the cloud.Provider of Azure virtual machines (and AKS):
// the VM behind each node, listed a scale set (or a resource group) at a
// time, and node groups that are VM scale sets, Uniform or Flexible, named
// in the configuration or selected there by name prefix or AKS node pool. It
// speaks to Azure Resource Manager through the official SDK
// (github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute)
// only, with workload identity or a managed identity (azidentity); the
// configuration's endpoint (cloud.azure.endpoint) is how the tests point it
// at the project's emulator (internal/emulator/azureapi).
//
// # Calls
//
// Instances takes every node at once. A node of a Uniform scale set
// (providerID .../virtualMachineScaleSets/<set>/virtualMachines/<instance
// ID>) whose VM is not known yet costs one paged list of that scale set's
// VMs, with their instance views; any other node (.../virtualMachines/<name>:
// a Flexible scale set's VM or a standalone one) one paged list of its
// resource group's VMs. What never changes for a VM (size, zone, priority,
// scale set) is cached for its life, and the VMs a list did not have are
// taken as gone for GoneTTL. Scale sets are read with one paged list per
// resource group and cached for GroupTTL; SKU sizes with one list of the
// resource SKUs per location, for good. Every write reads its scale set
// afresh and drops the cache; writes are long-running operations followed
// through the SDK's pollers.
//
// # Spot or not
//
// A VM is spot when its priority (a Uniform set's: the set's
// virtualMachineProfile) is Spot; a scale set likewise. A spot VM evicted
// with evictionPolicy Deallocate stays in its scale set, deallocated, and
// its Node stays NotReady: Instances and Nodes report it InstanceDeleting
// with an *EvictedError, and the provider's sweep (SweepEvicted, run every
// EvictedSweep by Start) deletes such VMs of the configured scale sets and
// their Nodes, as the Cluster API spot proposal asks.
//
// # Errors
//
// HTTP 429 and ARM's throttling codes become *cloud.ThrottledError (the SDK
// does not retry them); AllocationFailed, ZonalAllocationFailed,
// OverconstrainedAllocationRequest, SkuNotAvailable and quota errors, on a
// call, an operation or a VM's failed provisioning,
// *cloud.CapacityUnavailableError; 404 *cloud.NotFoundError.
//
// # Prices
//
// A VM size's price is the configuration's (pricing.instanceTypes) where it
// gives one, else the Linux pay-as-you-go price of the public Retail Prices
// API in the VM's location, on-demand or Spot (RefreshPrices reads it, at
// most every PriceTTL, through an azcore pipeline: Azure ships no SDK for
// it; see retailprices.go); a spot VM without either is priced at its
// billingProfile.maxPrice when that is set.
package azure

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v6"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"spotter.dev/spotter/internal/cloud"
	"spotter.dev/spotter/internal/cloud/internal/instancecache"
	"spotter.dev/spotter/internal/cloud/internal/providerkit"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// ProviderName is the provider's Name.
const ProviderName = "azure"

// Labels AKS puts on nodes, and tags AKS and the cluster autoscaler put on
// scale sets, which the provider reads (and puts on template nodes).
const (
	// AgentPoolLabel is the Node label of an AKS node's pool.
	AgentPoolLabel = "kubernetes.azure.com/agentpool"
	// LegacyAgentPoolLabel is the older label of the same.
	LegacyAgentPoolLabel = "agentpool"
	// ScaleSetPriorityLabel is the Node label (and taint) of an AKS spot
	// node: "spot".
	ScaleSetPriorityLabel = "kubernetes.azure.com/scalesetpriority"
	// PoolNameTag is the tag AKS puts on a node pool's scale set: the pool.
	PoolNameTag = "aks-managed-poolName"
	// LegacyPoolNameTag is the older tag of the same.
	LegacyPoolNameTag = "poolName"
	// NodeTemplateLabelTag, NodeTemplateTaintTag and NodeTemplateResourcesTag
	// start the scale set tags that describe its nodes for scale from zero,
	// as the cluster autoscaler's Azure provider reads them: a label's key
	// follows ('_' for '/', "~2" for '_'), a taint's value is value:effect.
	NodeTemplateLabelTag     = "k8s.io_cluster-autoscaler_node-template_label_"
	NodeTemplateTaintTag     = "k8s.io_cluster-autoscaler_node-template_taint_"
	NodeTemplateResourcesTag = "k8s.io_cluster-autoscaler_node-template_resources_"
)

// Options configure the provider.
type Options struct {
	// SubscriptionID is the subscription of the scale sets. Required.
	SubscriptionID string
	// ResourceGroup is the resource group of entries that name none.
	ResourceGroup string
	// NodeGroups selects the scale sets and gives their sizes. At least one.
	NodeGroups []v1alpha1.AzureNodeGroup
	// Pricing gives on-demand and spot prices per VM size.
	Pricing v1alpha1.PricingConfig
	// GroupTTL is how long a read of the scale sets serves. Default 30s.
	GroupTTL time.Duration
	// GoneTTL is how long a VM a list did not have is taken as gone before
	// it is looked for again. Default 5m.
	GoneTTL time.Duration
	// OperationPoll is the first wait between two polls of an operation; it
	// doubles up to OperationPollMax. Defaults 1s and 15s.
	OperationPoll, OperationPollMax time.Duration
	// OperationTimeout bounds the wait for an operation. Default 10m.
	OperationTimeout time.Duration
	// EvictedSweep is how often Start looks for evicted, deallocated spot
	// VMs to delete. Default 1m.
	EvictedSweep time.Duration
	// PriceTTL is how long a VM size's retail prices serve. Default 1h.
	PriceTTL time.Duration
}

// Provider is the Azure cloud provider. Build it with New or FromConfig.
type Provider struct {
	c     Clients
	kube  kubernetes.Interface
	clock clock.Clock
	opts  Options

	mu       sync.Mutex
	vms      map[vmKey]vmFacts              // for the VM's life
	sets     map[setKey]*setFacts           // every scale set read; immutable facts
	groups   []*NodeGroup                   // the selected ones
	groupsAt time.Time                      // when groups were read
	skus     map[string]map[string]skuFacts // by location, then lowercase size
	live     *providerkit.LiveTemplates

	retail       *RetailPrices // nil: configured prices only
	retailPrices map[retailKey]retailEntry
}

var (
	_ cloud.Provider    = (*Provider)(nil)
	_ cloud.PriceReader = (*Provider)(nil)
	_ cloud.NodeGroup   = (*NodeGroup)(nil)
)

// vmFacts is what never changes for a VM (and, updated at each list,
// whether it is deallocated), or, for one a list did not have, since when
// it is taken as gone.
type vmFacts struct {
	key         vmKey
	set         setKey // name "" for none
	size        string
	spot        bool
	maxPrice    float64
	zone        string
	location    string // lowercase
	deallocated bool
	gone        bool
	seen        time.Time
}

// Gone implements instancecache.Facts.
func (f vmFacts) Gone() (time.Time, bool) { return f.seen, f.gone }

// setFacts is what the provider keeps of a scale set (its capacity is read
// afresh when it matters).
type setFacts struct {
	key            setKey
	name           string // as ARM spells it
	flexible       bool
	sku            string
	spot           bool
	evictionPolicy string
	maxPrice       float64 // billingProfile.maxPrice; 0 when unset
	location       string
	zones          []string
	tags           map[string]string
	// podIPs is the secondary IP configurations of the VMs' primary NIC:
	// with Azure CNI, AKS gives each VM one per pod it may run.
	podIPs int
}

// EvictedError is the Err of a spot VM Azure evicted and deallocated: it
// stays in its scale set, its Node NotReady, until deleted.
type EvictedError struct{ VM string }

// Error implements error.
func (e *EvictedError) Error() string {
	return "spot VM " + e.VM + " was evicted and is deallocated; Spotter deletes it and its Node"
}

// New returns the provider. kube deletes the Node objects of deleted VMs
// and names the nodes of a scale set's VMs.
func New(c Clients, kube kubernetes.Interface, clk clock.Clock, opts Options) (*Provider, error) {
	if opts.SubscriptionID == "" {
		return nil, errors.New("cloud.azure: set subscriptionID")
	}
	if len(opts.NodeGroups) == 0 {
		return nil, errors.New("cloud.azure: set nodeGroups (scaleSet, namePrefix or nodePool, with maxSize)")
	}
	for i, g := range opts.NodeGroups {
		if g.ResourceGroup == "" && opts.ResourceGroup == "" {
			return nil, fmt.Errorf("cloud.azure: nodeGroups[%d] has no resource group, and resourceGroup is not set", i)
		}
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&opts.GroupTTL, 30*time.Second)
	def(&opts.GoneTTL, 5*time.Minute)
	def(&opts.OperationPoll, time.Second)
	def(&opts.OperationPollMax, 15*time.Second)
	def(&opts.OperationTimeout, 10*time.Minute)
	def(&opts.EvictedSweep, time.Minute)
	def(&opts.PriceTTL, time.Hour)
	return &Provider{c: c, kube: kube, clock: clk, opts: opts, vms: map[vmKey]vmFacts{}, sets: map[setKey]*setFacts{},
		skus: map[string]map[string]skuFacts{}, retailPrices: map[retailKey]retailEntry{}, live: providerkit.NewLiveTemplates(kube, clk)}, nil
}

// WithRetailPrices makes the provider read prices from the Retail Prices
// API through c (see RefreshPrices), and returns it.
func (p *Provider) WithRetailPrices(c *RetailPrices) *Provider {
	p.retail = c
	return p
}

// Name implements cloud.Provider.
func (p *Provider) Name() string { return ProviderName }

// Instances implements cloud.Provider: one list of a Uniform scale set's VMs
// (paged) per scale set with a node whose VM is not known yet, one list of a
// resource group's VMs per resource group with another such node, nothing
// otherwise.
func (p *Provider) Instances(ctx context.Context, nodes []*corev1.Node) (map[string]cloud.Instance, error) {
	keys := make([]vmKey, 0, len(nodes))
	for _, n := range nodes {
		if k, ok := keyOf(n); ok {
			keys = append(keys, k)
		}
	}
	if err := p.learn(ctx, keys); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]cloud.Instance, len(nodes))
	for _, n := range nodes {
		k, _ := keyOf(n)
		f, ok := p.vms[k]
		if !ok || f.gone {
			continue
		}
		inst := cloud.Instance{ID: n.Spec.ProviderID, NodeName: n.Name, Spot: f.spot, InstanceType: f.size, Zone: f.zone, Region: f.location,
			State: cloud.InstanceRunning}
		if f.set.name != "" {
			inst.NodeGroup = f.set.id()
		}
		if f.deallocated {
			inst.State, inst.Err = cloud.InstanceDeleting, &EvictedError{VM: n.Spec.ProviderID}
		}
		inst.PricePerHour, inst.PriceKnown = p.priceLocked(f.size, f.location, f.spot, f.maxPrice)
		out[n.Name] = inst
	}
	return out, nil
}

// learn lists the VMs of every Uniform scale set and resource group where
// keys names one not known (or gone for longer than GoneTTL).
func (p *Provider) learn(ctx context.Context, keys []vmKey) error {
	now := p.clock.Now()
	p.mu.Lock()
	var sets []setKey
	var rgs [][2]string
	for _, k := range instancecache.Stale(p.vms, keys, now, p.opts.GoneTTL) {
		if k.uniform() {
			if !slices.Contains(sets, k.set) {
				sets = append(sets, k.set)
			}
		} else if rg := [2]string{k.sub, k.rg}; !slices.Contains(rgs, rg) {
			rgs = append(rgs, rg)
		}
	}
	p.mu.Unlock()
	slices.SortFunc(sets, func(a, b setKey) int { return strings.Compare(a.resourceID(), b.resourceID()) })
	for _, s := range sets {
		facts, err := p.scaleSet(ctx, s)
		if cloud.IsNotFound(err) {
			p.settle(keys, func(k vmKey) bool { return k.set == s }, nil, now)
			continue
		}
		if err != nil {
			return err
		}
		recs, err := (&NodeGroup{p: p, facts: facts}).listVMs(ctx)
		if err != nil {
			return err
		}
		p.settle(keys, func(k vmKey) bool { return k.set == s }, recs, now)
	}
	slices.SortFunc(rgs, func(a, b [2]string) int { return strings.Compare(a[0]+"/"+a[1], b[0]+"/"+b[1]) })
	for _, rg := range rgs {
		recs, err := p.listGroupVMs(ctx, rg[0], rg[1])
		if err != nil {
			return err
		}
		p.settle(keys, func(k vmKey) bool { return !k.uniform() && k.sub == rg[0] && k.rg == rg[1] }, recs, now)
	}
	return nil
}

// settle records a list: it is the truth about the VMs in scope (what it
// lacks is gone), and the keys in scope it does not have are taken as gone.
func (p *Provider) settle(keys []vmKey, inScope func(vmKey) bool, recs []vmRecord, now time.Time) {
	found := make(map[vmKey]vmFacts, len(recs))
	for _, r := range recs {
		found[r.facts.key] = r.facts
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	instancecache.Settle(p.vms, inScope, found, keys, func(k vmKey) vmFacts { return vmFacts{key: k, gone: true, seen: now} })
}

// remember records what a list of a scale set's VMs said (for the VMs it
// had; a list of one set says nothing about others).
func (p *Provider) remember(recs []vmRecord) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range recs {
		p.vms[r.facts.key] = r.facts
	}
}

// listGroupVMs lists the VMs of a resource group (without instance views:
// ARM gives them only with a scale set filter).
func (p *Provider) listGroupVMs(ctx context.Context, sub, rg string) ([]vmRecord, error) {
	var out []vmRecord
	for pager := p.c.VMs.NewListPager(rg, nil); pager.More(); {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing the VMs of resource group %s: %w", rg, mapError("", err))
		}
		for _, v := range page.Value {
			if r, ok := recordOfVM(v); ok && r.facts.key.sub == sub {
				out = append(out, r)
			}
		}
	}
	return out, nil
}

// scaleSet returns the facts of a scale set: from a list of its resource
// group already read, else with a get (then kept for good).
func (p *Provider) scaleSet(ctx context.Context, k setKey) (*setFacts, error) {
	p.mu.Lock()
	f, ok := p.sets[k]
	p.mu.Unlock()
	if ok {
		return f, nil
	}
	resp, err := p.c.ScaleSets.Get(ctx, k.rg, k.name, nil)
	if err != nil {
		return nil, fmt.Errorf("reading scale set %s: %w", k.id(), mapError(k.id(), err))
	}
	f, ok = factsOfSet(&resp.VirtualMachineScaleSet)
	if !ok {
		return nil, fmt.Errorf("scale set %s: ARM answered without an ID", k.id())
	}
	p.mu.Lock()
	p.sets[k] = f
	p.mu.Unlock()
	return f, nil
}

// factsOfSet reads a scale set.
func factsOfSet(s *armcompute.VirtualMachineScaleSet) (*setFacts, bool) {
	k, ok := setKeyOfID(str(s.ID))
	if !ok {
		return nil, false
	}
	f := &setFacts{key: k, name: str(s.Name), location: str(s.Location), tags: map[string]string{}}
	if s.SKU != nil {
		f.sku = str(s.SKU.Name)
	}
	for _, z := range s.Zones {
		f.zones = append(f.zones, str(z))
	}
	for k, v := range s.Tags {
		f.tags[k] = str(v)
	}
	if props := s.Properties; props != nil {
		f.flexible = props.OrchestrationMode != nil && *props.OrchestrationMode == armcompute.OrchestrationModeFlexible
		if vp := props.VirtualMachineProfile; vp != nil {
			f.spot = vp.Priority != nil && *vp.Priority == armcompute.VirtualMachinePriorityTypesSpot
			if vp.EvictionPolicy != nil {
				f.evictionPolicy = string(*vp.EvictionPolicy)
			}
			if vp.BillingProfile != nil && vp.BillingProfile.MaxPrice != nil {
				f.maxPrice = *vp.BillingProfile.MaxPrice
			}
			f.podIPs = podIPsOf(vp.NetworkProfile)
		}
	}
	return f, true
}

// DeleteInstance implements cloud.Provider: a VM of one of Spotter's scale
// sets is deleted through the set (NodeGroup.DeleteNodes); one of another
// scale set through that set too, its capacity lowered so that it is not
// recreated; a standalone VM with a delete of the VM. The Node object is
// deleted too.
func (p *Provider) DeleteInstance(ctx context.Context, node *corev1.Node) error {
	if err := cloud.CheckDeletable(node); err != nil {
		return err
	}
	k, ok := keyOf(node)
	if !ok {
		return cloud.NewNotFoundError(fmt.Errorf("node %s has no Azure VM (spec.providerID %q)", node.Name, node.Spec.ProviderID))
	}
	if err := p.learn(ctx, []vmKey{k}); err != nil {
		return err
	}
	p.mu.Lock()
	f := p.vms[k]
	p.mu.Unlock()
	if f.gone {
		return cloud.NewNotFoundError(fmt.Errorf("VM %s of node %s is gone", node.Spec.ProviderID, node.Name))
	}
	if f.set.name != "" {
		g, err := p.group(ctx, f.set.id())
		switch {
		case err == nil:
			return g.DeleteNodes(ctx, []*corev1.Node{node})
		case !cloud.IsNotFound(err):
			return err
		}
		facts, err := p.scaleSet(ctx, f.set)
		if err != nil {
			return err
		}
		if err := (&NodeGroup{p: p, facts: facts}).deleteInstances(ctx, []vmKey{k}); err != nil {
			return err
		}
		return providerkit.DeleteNode(ctx, p.kube, node.Name)
	}
	poller, err := p.c.VMs.BeginDelete(ctx, k.rg, k.name, nil)
	what := fmt.Sprintf("deleting VM %s of node %s", k.name, node.Name)
	if err != nil {
		return fmt.Errorf("%s: %w", what, mapError("", err))
	}
	if err := wait(ctx, p, poller, what, ""); err != nil {
		return err
	}
	p.forget(k)
	return providerkit.DeleteNode(ctx, p.kube, node.Name)
}

// forget marks a VM gone once it is deleted.
func (p *Provider) forget(k vmKey) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.vms[k] = vmFacts{key: k, gone: true, seen: p.clock.Now()}
}

// NodeGroups implements cloud.Provider: the selected scale sets, by ID.
func (p *Provider) NodeGroups(ctx context.Context) ([]cloud.NodeGroup, error) {
	return providerkit.NodeGroups(p.readGroups(ctx))
}

// NodeGroupForNode implements cloud.Provider.
func (p *Provider) NodeGroupForNode(ctx context.Context, node *corev1.Node) (cloud.NodeGroup, error) {
	k, ok := keyOf(node)
	if !ok {
		return nil, cloud.NewNotFoundError(fmt.Errorf("node %s has no Azure VM", node.Name))
	}
	if err := p.learn(ctx, []vmKey{k}); err != nil {
		return nil, err
	}
	p.mu.Lock()
	f := p.vms[k]
	p.mu.Unlock()
	if f.gone || f.set.name == "" {
		return nil, cloud.NewNotFoundError(fmt.Errorf("VM %s of node %s is in no scale set", node.Spec.ProviderID, node.Name))
	}
	return p.group(ctx, f.set.id())
}

// group returns the group with ID id among the provider's groups.
func (p *Provider) group(ctx context.Context, id string) (*NodeGroup, error) {
	groups, err := p.readGroups(ctx)
	if err != nil {
		return nil, err
	}
	for _, g := range groups {
		if g.ID() == id {
			return g, nil
		}
	}
	return nil, cloud.NewNotFoundError(fmt.Errorf("the scale set %s is not one cloud.azure.nodeGroups selects", id))
}
