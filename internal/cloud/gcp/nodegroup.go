package gcp

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/api/iterator"
	corev1 "k8s.io/api/core/v1"

	"spotter.dev/spotter/internal/cloud"
	"spotter.dev/spotter/internal/cloud/internal/providerkit"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// NodeGroup is a managed instance group, zonal or regional.
type NodeGroup struct {
	p   *Provider
	ref groupRef
	// From the configuration entry that selected it.
	min, max int
	// What the read of the group and its template said.
	zones    []string // a zonal group's zone, a regional group's zones
	template *templateFacts
}

// Managed instance actions (currentAction) that Spotter reads.
const (
	actionCreating               = "CREATING"
	actionCreatingWithoutRetries = "CREATING_WITHOUT_RETRIES"
	actionRecreating             = "RECREATING"
	actionVerifying              = "VERIFYING"
	actionDeleting               = "DELETING"
	actionAbandoning             = "ABANDONING"
)

// readGroups returns the groups, read at most every GroupTTL.
func (p *Provider) readGroups(ctx context.Context) ([]*NodeGroup, error) {
	p.mu.Lock()
	if p.groups != nil && p.clock.Since(p.groupsAt) < p.opts.GroupTTL {
		defer p.mu.Unlock()
		return p.groups, nil
	}
	p.mu.Unlock()
	migs, err := p.listGroups(ctx)
	if err != nil {
		return nil, err
	}
	groups := []*NodeGroup{}
	var leftOut []cloud.LeftOut
	seen := map[string]bool{}
	for _, entry := range p.opts.NodeGroups {
		for _, m := range migs {
			ref, ok := parseGroupRef(m.GetSelfLink())
			if !ok || seen[ref.id()] {
				continue
			}
			ref.project = p.opts.Project
			if entry.NodePool == "" && !p.selects(entry, ref, nil) {
				// Chosen by name: another group's template is not read.
				continue
			}
			tmpl, err := p.template(ctx, m.GetInstanceTemplate())
			switch {
			case err == nil:
			case cloud.IsThrottled(err) || ctx.Err() != nil:
				// Nothing is known of the group: no list without it.
				return nil, fmt.Errorf("managed instance group %s: %w", ref.id(), err)
			default:
				// A group whose template cannot be read (deleted, not
				// readable, another cluster's) is left out; the others
				// are Spotter's still.
				seen[ref.id()] = true
				leftOut = append(leftOut, cloud.LeftOut{Group: ref.id(), Err: err})
				continue
			}
			if !p.selects(entry, ref, tmpl) {
				continue
			}
			seen[ref.id()] = true
			g := &NodeGroup{p: p, ref: ref, min: int(entry.MinSize), max: int(entry.MaxSize), template: tmpl}
			if ref.zone != "" {
				g.zones = []string{ref.zone}
			}
			for _, z := range m.GetDistributionPolicy().GetZones() {
				g.zones = append(g.zones, last(z.GetZone()))
			}
			groups = append(groups, g)
		}
	}
	slices.SortFunc(groups, func(a, b *NodeGroup) int { return strings.Compare(a.ID(), b.ID()) })
	slices.SortFunc(leftOut, func(a, b cloud.LeftOut) int { return strings.Compare(a.Group, b.Group) })
	p.mu.Lock()
	defer p.mu.Unlock()
	p.groups, p.groupsAt, p.leftOut = groups, p.clock.Now(), leftOut
	return groups, nil
}

// LeftOut implements cloud.LeftOutReporter: the groups the last read left
// out (an instance template that cannot be read). A group chosen by a
// nodePool entry is left out, and reported, whatever cluster its template
// would have named.
func (p *Provider) LeftOut() []cloud.LeftOut {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.leftOut)
}

// selects reports whether a configuration entry selects the group.
func (p *Provider) selects(entry v1alpha1.GCPNodeGroup, ref groupRef, tmpl *templateFacts) bool {
	switch {
	case entry.InstanceGroupManager != "":
		want, ok := parseGroupRef(entry.InstanceGroupManager)
		return ok && want.path() == ref.path() && (want.project == "" || want.project == p.opts.Project)
	case entry.NamePrefix != "":
		return strings.HasPrefix(ref.name, entry.NamePrefix)
	case entry.NodePool != "":
		return tmpl.labels[NodePoolNameLabel] == entry.NodePool &&
			(p.opts.ClusterName == "" || tmpl.labels[ClusterNameLabel] == p.opts.ClusterName)
	}
	return false
}

// listGroups reads the groups the configuration may select: with one
// aggregated list of the project's groups when an entry selects by prefix
// or node pool, else with a get of each named group (a group that does not
// exist is left out).
func (p *Provider) listGroups(ctx context.Context) ([]*computepb.InstanceGroupManager, error) {
	named := true
	for _, e := range p.opts.NodeGroups {
		named = named && e.InstanceGroupManager != ""
	}
	if !named {
		it := p.c.Groups.AggregatedList(ctx, &computepb.AggregatedListInstanceGroupManagersRequest{Project: p.opts.Project, MaxResults: ptr(uint32(pageSize))})
		var out []*computepb.InstanceGroupManager
		for {
			pair, err := it.Next()
			if errors.Is(err, iterator.Done) {
				return out, nil
			}
			if err != nil {
				return nil, fmt.Errorf("listing the managed instance groups of project %s: %w", p.opts.Project, mapError("", err))
			}
			out = append(out, pair.Value.GetInstanceGroupManagers()...)
		}
	}
	var out []*computepb.InstanceGroupManager
	for _, e := range p.opts.NodeGroups {
		ref, _ := parseGroupRef(e.InstanceGroupManager)
		ref.project = p.opts.Project
		m, err := (&NodeGroup{p: p, ref: ref}).current(ctx)
		if cloud.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// invalidate makes the next read of the groups ask Compute Engine.
func (p *Provider) invalidate() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.groups = nil
}

// ID implements cloud.NodeGroup: <zone>/<name> for a zonal group,
// <region>/<name> for a regional one.
func (g *NodeGroup) ID() string { return g.ref.id() }

// what names the group in errors.
func (g *NodeGroup) what() string { return "managed instance group " + g.ID() }

// Spot implements cloud.NodeGroup: its template asks for spot (or
// preemptible) VMs.
func (g *NodeGroup) Spot() bool { return g.template.spot }

// MinSize implements cloud.NodeGroup, from the configuration.
func (g *NodeGroup) MinSize() int { return g.min }

// MaxSize implements cloud.NodeGroup, from the configuration.
func (g *NodeGroup) MaxSize() int { return g.max }

// current reads the group now.
func (g *NodeGroup) current(ctx context.Context) (*computepb.InstanceGroupManager, error) {
	var m *computepb.InstanceGroupManager
	var err error
	if g.ref.region != "" {
		m, err = g.p.c.RegionalGroups.Get(ctx, &computepb.GetRegionInstanceGroupManagerRequest{Project: g.ref.project, Region: g.ref.region, InstanceGroupManager: g.ref.name})
	} else {
		m, err = g.p.c.Groups.Get(ctx, &computepb.GetInstanceGroupManagerRequest{Project: g.ref.project, Zone: g.ref.zone, InstanceGroupManager: g.ref.name})
	}
	if err != nil {
		return nil, fmt.Errorf("reading managed instance group %s: %w", g.ID(), mapError(g.ID(), err))
	}
	return m, nil
}

// managed lists the group's managed instances, every page.
func (g *NodeGroup) managed(ctx context.Context) ([]*computepb.ManagedInstance, error) {
	var it *compute.ManagedInstanceIterator
	if g.ref.region != "" {
		it = g.p.c.RegionalGroups.ListManagedInstances(ctx, &computepb.ListManagedInstancesRegionInstanceGroupManagersRequest{
			Project: g.ref.project, Region: g.ref.region, InstanceGroupManager: g.ref.name, MaxResults: ptr(uint32(pageSize))})
	} else {
		it = g.p.c.Groups.ListManagedInstances(ctx, &computepb.ListManagedInstancesInstanceGroupManagersRequest{
			Project: g.ref.project, Zone: g.ref.zone, InstanceGroupManager: g.ref.name, MaxResults: ptr(uint32(pageSize))})
	}
	var out []*computepb.ManagedInstance
	for {
		mi, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("listing the managed instances of group %s: %w", g.ID(), mapError(g.ID(), err))
		}
		out = append(out, mi)
	}
}

// TargetSize implements cloud.NodeGroup: the group's targetSize.
func (g *NodeGroup) TargetSize(ctx context.Context) (int, error) {
	m, err := g.current(ctx)
	if err != nil {
		return 0, err
	}
	return int(m.GetTargetSize()), nil
}

// PricePerHour implements cloud.NodeGroup: the price of its template's
// machine type, spot or on-demand, in its (first) zone's region: configured,
// else from the catalog as last read (Provider.RefreshPrices).
func (g *NodeGroup) PricePerHour() (float64, bool) {
	region := ""
	if len(g.zones) > 0 {
		region = regionOf(g.zones[0])
	}
	return g.p.InstanceTypePrice(g.template.machineType, region, "", g.template.spot)
}

// IncreaseSize implements cloud.NodeGroup: resize to the target size plus
// delta, and wait for the operation.
func (g *NodeGroup) IncreaseSize(ctx context.Context, delta int) error {
	if err := providerkit.CheckIncrease(delta); err != nil {
		return err
	}
	m, err := g.current(ctx)
	if err != nil {
		return err
	}
	want := int(m.GetTargetSize()) + delta
	if err := providerkit.CheckMax(g.what(), delta, want, g.max); err != nil {
		return err
	}
	return g.resize(ctx, want)
}

func (g *NodeGroup) resize(ctx context.Context, size int) error {
	defer g.p.invalidate()
	var op *compute.Operation
	var err error
	if g.ref.region != "" {
		op, err = g.p.c.RegionalGroups.Resize(ctx, &computepb.ResizeRegionInstanceGroupManagerRequest{Project: g.ref.project, Region: g.ref.region, InstanceGroupManager: g.ref.name, Size: int32(size)})
	} else {
		op, err = g.p.c.Groups.Resize(ctx, &computepb.ResizeInstanceGroupManagerRequest{Project: g.ref.project, Zone: g.ref.zone, InstanceGroupManager: g.ref.name, Size: int32(size)})
	}
	what := fmt.Sprintf("resizing managed instance group %s to %d", g.ID(), size)
	if err != nil {
		return fmt.Errorf("%s: %w", what, mapError(g.ID(), err))
	}
	return g.p.wait(ctx, op, what, g.ID())
}

// deleteInstances deletes instances of the group with deleteInstances,
// which lowers its target size by as many, and waits for the operation.
func (g *NodeGroup) deleteInstances(ctx context.Context, keys []instanceKey) error {
	defer g.p.invalidate()
	urls := make([]string, len(keys))
	for i, k := range keys {
		urls[i] = k.url()
	}
	var op *compute.Operation
	var err error
	if g.ref.region != "" {
		op, err = g.p.c.RegionalGroups.DeleteInstances(ctx, &computepb.DeleteInstancesRegionInstanceGroupManagerRequest{Project: g.ref.project, Region: g.ref.region,
			InstanceGroupManager: g.ref.name, RegionInstanceGroupManagersDeleteInstancesRequestResource: &computepb.RegionInstanceGroupManagersDeleteInstancesRequest{Instances: urls}})
	} else {
		op, err = g.p.c.Groups.DeleteInstances(ctx, &computepb.DeleteInstancesInstanceGroupManagerRequest{Project: g.ref.project, Zone: g.ref.zone,
			InstanceGroupManager: g.ref.name, InstanceGroupManagersDeleteInstancesRequestResource: &computepb.InstanceGroupManagersDeleteInstancesRequest{Instances: urls}})
	}
	what := fmt.Sprintf("deleting %d instance(s) of managed instance group %s", len(keys), g.ID())
	if err != nil {
		return fmt.Errorf("%s: %w", what, mapError(g.ID(), err))
	}
	if err := g.p.wait(ctx, op, what, g.ID()); err != nil {
		return err
	}
	for _, k := range keys {
		g.p.forget(k)
	}
	return nil
}

// live is the managed instances that count towards the target size: not
// being deleted or abandoned.
func live(mis []*computepb.ManagedInstance) []*computepb.ManagedInstance {
	return slices.DeleteFunc(slices.Clone(mis), func(mi *computepb.ManagedInstance) bool {
		a := mi.GetCurrentAction()
		return a == actionDeleting || a == actionAbandoning
	})
}

// creating reports whether a managed instance is still being created,
// RECREATING included: the group makes it again after its VM was preempted
// or failed, and its Node is not back (the cluster autoscaler's gce
// provider counts it as creating too).
func creating(mi *computepb.ManagedInstance) bool {
	a := mi.GetCurrentAction()
	return a == actionCreating || a == actionCreatingWithoutRetries || a == actionVerifying || a == actionRecreating
}

// keyOfManaged is the instance of a managed instance.
func (g *NodeGroup) keyOfManaged(mi *computepb.ManagedInstance) instanceKey {
	zone := ""
	if parts := strings.Split(mi.GetInstance(), "/"); len(parts) >= 4 && parts[len(parts)-4] == "zones" {
		zone = parts[len(parts)-3]
	}
	return instanceKey{g.ref.project, zone, last(mi.GetInstance())}
}

// DecreaseTargetSize implements cloud.NodeGroup: it cancels only instances
// still being created. Target size not yet listed as managed instances goes
// first (a resize down); then the CREATING instances, those whose instance
// does not exist yet first, go with deleteInstances, which lowers the target
// size by as many. An instance that turns RUNNING between the list and the
// call is deleted all the same: the caller asked for it not to exist.
func (g *NodeGroup) DecreaseTargetSize(ctx context.Context, delta int) error {
	if err := providerkit.CheckDecrease(delta); err != nil {
		return err
	}
	m, err := g.current(ctx)
	if err != nil {
		return err
	}
	mis, err := g.managed(ctx)
	if err != nil {
		return err
	}
	target := int(m.GetTargetSize())
	alive := live(mis)
	unlisted := max(target-len(alive), 0)
	var pending []*computepb.ManagedInstance
	for _, mi := range alive {
		if creating(mi) {
			pending = append(pending, mi)
		}
	}
	if err := providerkit.CheckCancel(g.what(), delta, unlisted+len(pending), "instance(s) still being created", target, g.min); err != nil {
		return err
	}
	if n := min(delta, unlisted); n > 0 {
		if err := g.resize(ctx, target-n); err != nil {
			return err
		}
		delta -= n
	}
	if delta == 0 {
		return nil
	}
	// Not created yet first, then the newest (last listed).
	slices.SortStableFunc(pending, func(a, b *computepb.ManagedInstance) int {
		switch ea, eb := a.GetInstanceStatus() == "", b.GetInstanceStatus() == ""; {
		case ea && !eb:
			return -1
		case eb && !ea:
			return 1
		}
		return 0
	})
	keys := make([]instanceKey, 0, delta)
	for _, mi := range pending[:delta] {
		keys = append(keys, g.keyOfManaged(mi))
	}
	return g.deleteInstances(ctx, keys)
}

// DeleteNodes implements cloud.NodeGroup: it checks every node first (a
// managed instance of the group, not control plane, the target not below
// the minimum), then deletes the instances with one deleteInstances, which
// lowers the target size, and deletes the Node objects.
func (g *NodeGroup) DeleteNodes(ctx context.Context, nodes []*corev1.Node) error {
	m, err := g.current(ctx)
	if err != nil {
		return err
	}
	mis, err := g.managed(ctx)
	if err != nil {
		return err
	}
	in := map[instanceKey]bool{}
	for _, mi := range live(mis) {
		in[g.keyOfManaged(mi)] = true
	}
	keys, err := providerkit.Members(g.what(), nodes, func(n *corev1.Node) instanceKey { k, _ := keyOf(n); return k }, in)
	if err != nil {
		return err
	}
	if err := providerkit.CheckDelete(g.what(), len(nodes), int(m.GetTargetSize()), g.min); err != nil {
		return err
	}
	if err := g.deleteInstances(ctx, keys); err != nil {
		return err
	}
	return providerkit.DeleteNodes(ctx, g.p.kube, nodes)
}

// Nodes implements cloud.NodeGroup: the group's managed instances (not
// being deleted) with their Node names, CREATING ones as InstanceCreating
// with the error of their last attempt (a stock-out is a
// *cloud.CapacityUnavailableError), and one InstanceCreating per unit of
// target size not yet listed.
func (g *NodeGroup) Nodes(ctx context.Context) ([]cloud.Instance, error) {
	m, err := g.current(ctx)
	if err != nil {
		return nil, err
	}
	mis, err := g.managed(ctx)
	if err != nil {
		return nil, err
	}
	alive := live(mis)
	byID := map[string]string{}
	if slices.ContainsFunc(alive, func(mi *computepb.ManagedInstance) bool { return mi.GetInstanceStatus() != "" }) {
		byID, err = providerkit.NodeNames(ctx, g.p.kube, func(n *corev1.Node) (string, bool) { return n.Spec.ProviderID, true })
		if err != nil {
			return nil, err
		}
	}
	out := make([]cloud.Instance, 0, len(alive))
	for _, mi := range alive {
		k := g.keyOfManaged(mi)
		inst := cloud.Instance{ID: k.providerID(), NodeName: byID[k.providerID()], NodeGroup: g.ID(), Spot: g.Spot(),
			InstanceType: g.template.machineType, Zone: k.zone, State: cloud.InstanceRunning}
		if creating(mi) {
			inst.State = cloud.InstanceCreating
			inst.Err = errorsOf(g.ID(), mi.GetLastAttempt().GetErrors().GetErrors())
		}
		out = append(out, inst)
	}
	for range int(m.GetTargetSize()) - len(alive) {
		out = append(out, cloud.Instance{NodeGroup: g.ID(), Spot: g.Spot(), InstanceType: g.template.machineType, State: cloud.InstanceCreating})
	}
	return out, nil
}
