// Package gcp is the cloud.Provider of Google Compute Engine (and GKE): the
// instance behind each node from one aggregated list of the project's
// instances (spot or not, machine type, zone, managed instance group), and
// node groups that are managed instance groups, zonal or regional, named in
// the configuration or selected there by name prefix or GKE node pool. It
// speaks to Compute Engine through the official Go client
// (cloud.google.com/go/compute/apiv1, REST transport) only, with Application
// Default Credentials; the configuration's endpoint (cloud.gcp.endpoint) is
// how the tests point it at the project's emulator
// (internal/emulator/gcpapi).
//
// # Calls
//
// Instances takes every node at once. The instances of up to ten nodes not
// known yet are read one by one (instances.get, by the name and zone of the
// node's providerID); more, as at start, with one paged aggregatedList of
// the project (500 a page). What never changes for an instance (machine
// type, zone, provisioning model, group) is cached for its life, and the
// instances Compute Engine does not have are taken as gone for GoneTTL. Groups are read with one
// paged aggregatedList of the project's managed instance groups (or a get
// per group, when the configuration names them all) and cached for
// GroupTTL; templates (immutable) and machine types are cached for good.
// Every write reads its group afresh and drops the cache. Writes return
// long-running operations, polled with backoff until they are done.
//
// # Spot or not
//
// An instance is spot when its scheduling says so: provisioningModel SPOT,
// or preemptible (the older preemptible VMs). A group is spot when its
// instance template's scheduling does.
//
// # Errors
//
// HTTP 429 and the rateLimitExceeded reasons become *cloud.ThrottledError;
// ZONE_RESOURCE_POOL_EXHAUSTED (a stock-out) and QUOTA_EXCEEDED, on a call,
// an operation or a managed instance's last attempt,
// *cloud.CapacityUnavailableError; 404 *cloud.NotFoundError.
//
// # Prices
//
// A machine type's price is the configuration's (pricing.instanceTypes)
// where it gives one, else Compute Engine's list price from the Cloud
// Billing Catalog API (cloud.google.com/go/billing/apiv1, REST transport,
// the same endpoint and credentials): its family's per-vCPU and per-GiB
// prices in the region, on-demand or spot, times the type's size (from
// machineTypes.get). RefreshPrices reads the catalog (one paged list of the
// Compute Engine service's SKUs) at most every PriceTTL; see prices.go.
package gcp

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/api/iterator"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"spotter.dev/spotter/internal/cloud"
	"spotter.dev/spotter/internal/cloud/internal/instancecache"
	"spotter.dev/spotter/internal/cloud/internal/providerkit"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// ProviderName is the provider's Name.
const ProviderName = "gcp"

// Labels and metadata GKE and Compute Engine put on instances, templates
// and nodes, which the provider reads (and puts on template nodes).
const (
	// NodePoolLabel is the Node label of a GKE node's pool.
	NodePoolLabel = "cloud.google.com/gke-nodepool"
	// SpotLabel is the Node label of a GKE spot node ("true").
	SpotLabel = "cloud.google.com/gke-spot"
	// PreemptibleLabel is the Node label of a GKE preemptible node ("true").
	PreemptibleLabel = "cloud.google.com/gke-preemptible"
	// ClusterNameLabel is the Compute Engine label of a GKE cluster's
	// instances and templates.
	ClusterNameLabel = "goog-k8s-cluster-name"
	// NodePoolNameLabel is the Compute Engine label naming the GKE node pool
	// of an instance or template.
	NodePoolNameLabel = "goog-k8s-node-pool-name"
	// CreatedByKey is the metadata key Compute Engine sets on the instances
	// of a managed instance group: the group's path.
	CreatedByKey = "created-by"
	// KubeEnvKey is the metadata key of the environment GKE gives its
	// nodes' bootstrap (labels, taints, reserved resources).
	KubeEnvKey = "kube-env"
)

// pageSize is the most results Compute Engine returns per page.
const pageSize = 500

// Options configure the provider.
type Options struct {
	// Project is the project of the instances and groups. Required.
	Project string
	// ClusterName keeps, of the groups a NodePool entry selects, those of
	// this GKE cluster.
	ClusterName string
	// NodeGroups selects the groups and gives their sizes. At least one.
	NodeGroups []v1alpha1.GCPNodeGroup
	// Pricing gives on-demand and spot prices per machine type.
	Pricing v1alpha1.PricingConfig
	// GroupTTL is how long a read of the groups serves. Default 30s.
	GroupTTL time.Duration
	// GoneTTL is how long an instance the project's list did not have is
	// taken as gone before it is looked for again. Default 5m.
	GoneTTL time.Duration
	// OperationPoll is the first wait between two polls of an operation;
	// it doubles up to OperationPollMax. Defaults 500ms and 10s.
	OperationPoll, OperationPollMax time.Duration
	// OperationTimeout bounds the wait for an operation. Default 5m.
	OperationTimeout time.Duration
	// PriceTTL is how long a read of the Cloud Billing Catalog serves.
	// Default 1h.
	PriceTTL time.Duration
	// CatalogRetryWait is the first wait before a throttled page of the
	// catalog is asked again (without the cloud's Retry-After); it doubles.
	// Default 1s.
	CatalogRetryWait time.Duration
}

// Provider is the GCP cloud provider. Build it with New or FromConfig.
type Provider struct {
	c     Clients
	kube  kubernetes.Interface
	clock clock.Clock
	opts  Options

	mu           sync.Mutex
	instances    map[instanceKey]instanceFacts // for the instance's life
	groups       []*NodeGroup
	groupsAt     time.Time
	leftOut      []cloud.LeftOut           // by the last read of the groups
	templates    map[string]*templateFacts // by templateRef.key(), for good
	machineTypes map[string]machineFacts   // by machine type name, for good
	live         *providerkit.LiveTemplates
	prices       *priceTable          // the catalog's rates, for PriceTTL; nil before the first read
	unknownTypes map[string]time.Time // machine types Compute Engine did not know, and when
}

var (
	_ cloud.Provider        = (*Provider)(nil)
	_ cloud.PriceReader     = (*Provider)(nil)
	_ cloud.LeftOutReporter = (*Provider)(nil)
	_ cloud.NodeGroup       = (*NodeGroup)(nil)
)

// instanceFacts is what never changes for an instance, or, for one the
// project's list did not have, since when it is taken as gone.
type instanceFacts struct {
	key         instanceKey
	machineType string
	spot        bool
	group       groupRef // name "" for none
	gone        bool
	seen        time.Time
}

// Gone implements instancecache.Facts.
func (f instanceFacts) Gone() (time.Time, bool) { return f.seen, f.gone }

// machineFacts is a machine type's size.
type machineFacts struct {
	cpus  int32
	memMB int32
	arch  string // amd64 or arm64, as kubernetes.io/arch says it
	gpus  int64  // built in (A2, G2, A3)
}

// New returns the provider. kube deletes the Node objects of deleted
// instances and names the nodes of a group's instances.
func New(c Clients, kube kubernetes.Interface, clk clock.Clock, opts Options) (*Provider, error) {
	if opts.Project == "" {
		return nil, errors.New("cloud.gcp: set project")
	}
	if len(opts.NodeGroups) == 0 {
		return nil, errors.New("cloud.gcp: set nodeGroups (instanceGroupManager, namePrefix or nodePool, with maxSize)")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&opts.GroupTTL, 30*time.Second)
	def(&opts.GoneTTL, 5*time.Minute)
	def(&opts.OperationPoll, 500*time.Millisecond)
	def(&opts.OperationPollMax, 10*time.Second)
	def(&opts.OperationTimeout, 5*time.Minute)
	def(&opts.PriceTTL, time.Hour)
	def(&opts.CatalogRetryWait, time.Second)
	return &Provider{c: c, kube: kube, clock: clk, opts: opts, instances: map[instanceKey]instanceFacts{},
		templates: map[string]*templateFacts{}, machineTypes: map[string]machineFacts{}, unknownTypes: map[string]time.Time{},
		live: providerkit.NewLiveTemplates(kube, clk)}, nil
}

// Name implements cloud.Provider.
func (p *Provider) Name() string { return ProviderName }

// Instances implements cloud.Provider: a get of each instance not known yet,
// or one aggregated list of a project's instances (paged) when more than
// maxGets are not, nothing otherwise.
func (p *Provider) Instances(ctx context.Context, nodes []*corev1.Node) (map[string]cloud.Instance, error) {
	keys := make([]instanceKey, 0, len(nodes))
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
		f, ok := p.instances[k]
		if !ok || f.gone {
			continue
		}
		inst := cloud.Instance{ID: k.providerID(), NodeName: n.Name, Spot: f.spot, InstanceType: f.machineType, Zone: k.zone,
			Region: regionOf(k.zone), State: cloud.InstanceRunning}
		if f.group.name != "" {
			inst.NodeGroup = f.group.id()
		}
		inst.PricePerHour, inst.PriceKnown = p.priceLocked(f.machineType, inst.Region, f.spot)
		out[n.Name] = inst
	}
	return out, nil
}

// maxGets is the most instances not known yet that learn reads one by one
// (instances.get, by the name and zone of the node's providerID); with
// more, as at start, one paged aggregatedList of the project is fewer calls.
const maxGets = 10

// learn reads the instances keys names that are not known (or gone for
// longer than GoneTTL): one get each when there are at most maxGets of them,
// else a list of the instances of every project they are in.
func (p *Provider) learn(ctx context.Context, keys []instanceKey) error {
	now := p.clock.Now()
	p.mu.Lock()
	stale := instancecache.Stale(p.instances, keys, now, p.opts.GoneTTL)
	p.mu.Unlock()
	if len(stale) <= maxGets {
		return p.getInstances(ctx, stale, now)
	}
	var projects []string
	for _, k := range stale {
		if !slices.Contains(projects, k.project) {
			projects = append(projects, k.project)
		}
	}
	slices.Sort(projects)
	for _, project := range projects {
		found, err := p.listInstances(ctx, project)
		if err != nil {
			return err
		}
		// The list is the project's truth: what it lacks is gone.
		p.mu.Lock()
		instancecache.Settle(p.instances, func(k instanceKey) bool { return k.project == project }, found, keys,
			func(k instanceKey) instanceFacts { return instanceFacts{key: k, gone: true, seen: now} })
		p.mu.Unlock()
	}
	return nil
}

// getInstances reads the instances of keys one by one; one Compute Engine
// does not have (404) is gone as of now.
func (p *Provider) getInstances(ctx context.Context, keys []instanceKey, now time.Time) error {
	for _, k := range keys {
		i, err := p.c.Instances.Get(ctx, &computepb.GetInstanceRequest{Project: k.project, Zone: k.zone, Instance: k.name})
		f := instanceFacts{key: k, gone: true, seen: now}
		switch err := mapError("", err); {
		case err == nil:
			f = factsOf(k.project, i)
		case !cloud.IsNotFound(err):
			return fmt.Errorf("reading instance %s in %s: %w", k.name, k.zone, err)
		}
		p.mu.Lock()
		p.instances[k] = f
		p.mu.Unlock()
	}
	return nil
}

// listInstances reads every instance of project with aggregatedList.
func (p *Provider) listInstances(ctx context.Context, project string) (map[instanceKey]instanceFacts, error) {
	it := p.c.Instances.AggregatedList(ctx, &computepb.AggregatedListInstancesRequest{Project: project, MaxResults: ptr(uint32(pageSize))})
	out := map[instanceKey]instanceFacts{}
	for {
		pair, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("listing the instances of project %s: %w", project, mapError("", err))
		}
		for _, i := range pair.Value.GetInstances() {
			f := factsOf(project, i)
			out[f.key] = f
		}
	}
}

func factsOf(project string, i *computepb.Instance) instanceFacts {
	f := instanceFacts{key: instanceKey{project, last(i.GetZone()), i.GetName()}, machineType: last(i.GetMachineType()), spot: isSpot(i.GetScheduling())}
	for _, item := range i.GetMetadata().GetItems() {
		if item.GetKey() == CreatedByKey {
			if r, ok := parseGroupRef(item.GetValue()); ok {
				// created-by names the project by number: the instance's
				// project is the group's.
				r.project = project
				f.group = r
			}
		}
	}
	return f
}

// isSpot reports whether scheduling asks for spot (or preemptible)
// capacity.
func isSpot(s *computepb.Scheduling) bool {
	return s.GetProvisioningModel() == "SPOT" || s.GetPreemptible()
}

// DeleteInstance implements cloud.Provider: an instance of one of Spotter's
// groups is deleted through the group (NodeGroup.DeleteNodes); one of
// another managed instance group through that group too, with its target
// size lowered so that it is not recreated; another with instances.delete.
// The Node object is deleted too.
func (p *Provider) DeleteInstance(ctx context.Context, node *corev1.Node) error {
	if err := cloud.CheckDeletable(node); err != nil {
		return err
	}
	k, ok := keyOf(node)
	if !ok {
		return cloud.NewNotFoundError(fmt.Errorf("node %s has no Compute Engine instance (spec.providerID %q)", node.Name, node.Spec.ProviderID))
	}
	if err := p.learn(ctx, []instanceKey{k}); err != nil {
		return err
	}
	p.mu.Lock()
	f := p.instances[k]
	p.mu.Unlock()
	if f.gone {
		return cloud.NewNotFoundError(fmt.Errorf("instance %s of node %s is gone", k.url(), node.Name))
	}
	if f.group.name != "" {
		g, err := p.group(ctx, f.group.id())
		switch {
		case err == nil:
			return g.DeleteNodes(ctx, []*corev1.Node{node})
		case !cloud.IsNotFound(err):
			return err
		}
		other := &NodeGroup{p: p, ref: f.group}
		if err := other.deleteInstances(ctx, []instanceKey{k}); err != nil {
			return err
		}
		return providerkit.DeleteNode(ctx, p.kube, node.Name)
	}
	op, err := p.c.Instances.Delete(ctx, &computepb.DeleteInstanceRequest{Project: k.project, Zone: k.zone, Instance: k.name})
	if err != nil {
		return fmt.Errorf("deleting instance %s of node %s: %w", k.url(), node.Name, mapError("", err))
	}
	if err := p.wait(ctx, op, "deleting instance "+k.url(), ""); err != nil {
		return err
	}
	p.forget(k)
	return providerkit.DeleteNode(ctx, p.kube, node.Name)
}

// forget marks an instance gone once it is deleted.
func (p *Provider) forget(k instanceKey) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.instances[k] = instanceFacts{key: k, gone: true, seen: p.clock.Now()}
}

// NodeGroups implements cloud.Provider: the selected groups, by ID.
func (p *Provider) NodeGroups(ctx context.Context) ([]cloud.NodeGroup, error) {
	return providerkit.NodeGroups(p.readGroups(ctx))
}

// NodeGroupForNode implements cloud.Provider.
func (p *Provider) NodeGroupForNode(ctx context.Context, node *corev1.Node) (cloud.NodeGroup, error) {
	k, ok := keyOf(node)
	if !ok {
		return nil, cloud.NewNotFoundError(fmt.Errorf("node %s has no Compute Engine instance", node.Name))
	}
	if err := p.learn(ctx, []instanceKey{k}); err != nil {
		return nil, err
	}
	p.mu.Lock()
	f := p.instances[k]
	p.mu.Unlock()
	if f.gone || f.group.name == "" {
		return nil, cloud.NewNotFoundError(fmt.Errorf("instance %s of node %s is in no managed instance group", k.url(), node.Name))
	}
	return p.group(ctx, f.group.id())
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
	return nil, cloud.NewNotFoundError(fmt.Errorf("the managed instance group %s is not one cloud.gcp.nodeGroups selects", id))
}

func ptr[T any](v T) *T { return &v }
