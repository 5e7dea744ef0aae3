package azure

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v6"
	corev1 "k8s.io/api/core/v1"

	"spotter.dev/spotter/internal/cloud"
	"spotter.dev/spotter/internal/cloud/internal/providerkit"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// NodeGroup is a VM scale set, Uniform or Flexible.
type NodeGroup struct {
	p     *Provider
	facts *setFacts
	// From the configuration entry that selected it.
	min, max int
}

// Provisioning states ARM reports for a VM.
const (
	stateCreating = "Creating"
	stateFailed   = "Failed"
	stateDeleting = "Deleting"
)

// vmRecord is a VM as a list showed it.
type vmRecord struct {
	facts vmFacts
	armID string
	// instanceID is what deleteInstances takes: a Uniform VM's instance ID,
	// a Flexible VM's name.
	instanceID string
	state      string // provisioning state
	power      string // after PowerState/, "" when not shown
	failure    *statusError
}

// live reports whether the VM counts towards its set's capacity: it is not
// being deleted.
func (r vmRecord) live() bool { return r.state != stateDeleting }

// unfulfilled reports whether the VM is a request not yet met: still being
// created, or failed to be created (Failed and not running, as the cluster
// autoscaler's Azure provider reads it).
func (r vmRecord) unfulfilled() bool {
	return r.state == stateCreating || (r.state == stateFailed && r.power != "running")
}

// readStatuses reads the provisioning failure and power state of an
// instance view.
func readStatuses(statuses []*armcompute.InstanceViewStatus, r *vmRecord) {
	for _, s := range statuses {
		code := str(s.Code)
		switch {
		case strings.HasPrefix(code, "PowerState/"):
			r.power = strings.TrimPrefix(code, "PowerState/")
		case strings.HasPrefix(code, "ProvisioningState/failed/"):
			r.failure = &statusError{Code: strings.TrimPrefix(code, "ProvisioningState/failed/"), Message: str(s.Message)}
		}
	}
	r.facts.deallocated = r.power == "deallocated" || r.power == "deallocating"
}

// zoneOf is a VM's zone as Kubernetes names it (<location>-<zone>), "" for
// a VM in no zone.
func zoneOf(location string, zones []*string) string {
	if len(zones) == 0 || str(zones[0]) == "" {
		return ""
	}
	return strings.ToLower(location) + "-" + str(zones[0])
}

// recordOfSetVM reads a Uniform scale set's VM.
func recordOfSetVM(set *setFacts, v *armcompute.VirtualMachineScaleSetVM) (vmRecord, bool) {
	k, ok := keyOfID(str(v.ID))
	if !ok || !k.uniform() {
		return vmRecord{}, false
	}
	r := vmRecord{armID: str(v.ID), instanceID: str(v.InstanceID),
		facts: vmFacts{key: k, set: set.key, size: set.sku, spot: set.spot, maxPrice: set.maxPrice, zone: zoneOf(str(v.Location), v.Zones),
			location: strings.ToLower(cmp.Or(str(v.Location), set.location))}}
	if v.SKU != nil && v.SKU.Name != nil {
		r.facts.size = *v.SKU.Name
	}
	if props := v.Properties; props != nil {
		r.state = str(props.ProvisioningState)
		if props.InstanceView != nil {
			readStatuses(props.InstanceView.Statuses, &r)
		}
	}
	return r, true
}

// recordOfVM reads a virtual machine (a Flexible set's or a standalone one).
func recordOfVM(v *armcompute.VirtualMachine) (vmRecord, bool) {
	k, ok := keyOfID(str(v.ID))
	if !ok || k.uniform() {
		return vmRecord{}, false
	}
	r := vmRecord{armID: str(v.ID), instanceID: str(v.Name), facts: vmFacts{key: k, zone: zoneOf(str(v.Location), v.Zones), location: strings.ToLower(str(v.Location))}}
	if props := v.Properties; props != nil {
		r.state = str(props.ProvisioningState)
		r.facts.spot = props.Priority != nil && *props.Priority == armcompute.VirtualMachinePriorityTypesSpot
		if props.HardwareProfile != nil && props.HardwareProfile.VMSize != nil {
			r.facts.size = string(*props.HardwareProfile.VMSize)
		}
		if props.BillingProfile != nil && props.BillingProfile.MaxPrice != nil {
			r.facts.maxPrice = *props.BillingProfile.MaxPrice
		}
		if props.VirtualMachineScaleSet != nil {
			if s, ok := setKeyOfID(str(props.VirtualMachineScaleSet.ID)); ok {
				r.facts.set = s
			}
		}
		if props.InstanceView != nil {
			readStatuses(props.InstanceView.Statuses, &r)
		}
	}
	return r, true
}

// listVMs lists the set's VMs with their instance views, every page: a
// Uniform set's through its virtualMachines, a Flexible set's as the
// resource group's VMs filtered by the set. The provider's cache learns
// what the list says.
func (g *NodeGroup) listVMs(ctx context.Context) ([]vmRecord, error) {
	var out []vmRecord
	k := g.facts.key
	if g.facts.flexible {
		filter := "'virtualMachineScaleSet/id' eq '" + g.armID() + "'"
		pager := g.p.c.VMs.NewListPager(k.rg, &armcompute.VirtualMachinesClientListOptions{Filter: &filter, Expand: to.Ptr(armcompute.ExpandTypeForListVMsInstanceView)})
		for pager.More() {
			page, err := pager.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("listing the VMs of scale set %s: %w", g.ID(), mapError(g.ID(), err))
			}
			for _, v := range page.Value {
				if r, ok := recordOfVM(v); ok {
					r.facts.set = k
					out = append(out, r)
				}
			}
		}
	} else {
		pager := g.p.c.ScaleSetVMs.NewListPager(k.rg, k.name, &armcompute.VirtualMachineScaleSetVMsClientListOptions{Expand: to.Ptr("instanceView")})
		for pager.More() {
			page, err := pager.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("listing the VMs of scale set %s: %w", g.ID(), mapError(g.ID(), err))
			}
			for _, v := range page.Value {
				if r, ok := recordOfSetVM(g.facts, v); ok {
					out = append(out, r)
				}
			}
		}
	}
	g.p.remember(out)
	return out, nil
}

// armID is the scale set's resource ID as the list filter takes it.
func (g *NodeGroup) armID() string {
	k := g.facts.key
	return "/subscriptions/" + k.sub + "/resourceGroups/" + k.rg + "/providers/Microsoft.Compute/virtualMachineScaleSets/" + g.facts.name
}

// readGroups returns the selected scale sets, read at most every GroupTTL:
// one paged list of the scale sets of each resource group the
// configuration names.
func (p *Provider) readGroups(ctx context.Context) ([]*NodeGroup, error) {
	p.mu.Lock()
	if p.groups != nil && p.clock.Since(p.groupsAt) < p.opts.GroupTTL {
		defer p.mu.Unlock()
		return p.groups, nil
	}
	p.mu.Unlock()
	var rgs []string
	for _, e := range p.opts.NodeGroups {
		if rg := strings.ToLower(p.resourceGroup(e)); !slices.Contains(rgs, rg) {
			rgs = append(rgs, rg)
		}
	}
	var all []*setFacts
	for _, rg := range rgs {
		for pager := p.c.ScaleSets.NewListPager(rg, nil); pager.More(); {
			page, err := pager.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("listing the scale sets of resource group %s: %w", rg, mapError("", err))
			}
			for _, s := range page.Value {
				if f, ok := factsOfSet(s); ok {
					all = append(all, f)
				}
			}
		}
	}
	slices.SortFunc(all, func(a, b *setFacts) int { return strings.Compare(a.key.id(), b.key.id()) })
	groups := []*NodeGroup{}
	seen := map[setKey]bool{}
	for _, e := range p.opts.NodeGroups {
		for _, f := range all {
			if seen[f.key] || !p.selects(e, f) {
				continue
			}
			seen[f.key] = true
			groups = append(groups, &NodeGroup{p: p, facts: f, min: int(e.MinSize), max: int(e.MaxSize)})
		}
	}
	slices.SortFunc(groups, func(a, b *NodeGroup) int { return strings.Compare(a.ID(), b.ID()) })
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, f := range all {
		p.sets[f.key] = f
	}
	p.groups, p.groupsAt = groups, p.clock.Now()
	return groups, nil
}

func (p *Provider) resourceGroup(e v1alpha1.AzureNodeGroup) string {
	if e.ResourceGroup != "" {
		return e.ResourceGroup
	}
	return p.opts.ResourceGroup
}

// selects reports whether a configuration entry selects a scale set.
func (p *Provider) selects(e v1alpha1.AzureNodeGroup, f *setFacts) bool {
	if f.key.sub != strings.ToLower(p.opts.SubscriptionID) || f.key.rg != strings.ToLower(p.resourceGroup(e)) {
		return false
	}
	switch {
	case e.ScaleSet != "":
		return strings.EqualFold(f.name, e.ScaleSet)
	case e.NamePrefix != "":
		return strings.HasPrefix(strings.ToLower(f.name), strings.ToLower(e.NamePrefix))
	case e.NodePool != "":
		return poolOf(f.tags) == e.NodePool
	}
	return false
}

// poolOf is the AKS node pool of a scale set, from its tags.
func poolOf(tags map[string]string) string {
	if p := tags[PoolNameTag]; p != "" {
		return p
	}
	return tags[LegacyPoolNameTag]
}

// invalidate makes the next read of the scale sets ask ARM.
func (p *Provider) invalidate() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.groups = nil
}

// ID implements cloud.NodeGroup: <resource group>/<name>, lowercase.
func (g *NodeGroup) ID() string { return g.facts.key.id() }

// what names the scale set in errors.
func (g *NodeGroup) what() string { return "scale set " + g.ID() }

// Spot implements cloud.NodeGroup: its VMs' priority is Spot.
func (g *NodeGroup) Spot() bool { return g.facts.spot }

// MinSize implements cloud.NodeGroup, from the configuration.
func (g *NodeGroup) MinSize() int { return g.min }

// MaxSize implements cloud.NodeGroup, from the configuration.
func (g *NodeGroup) MaxSize() int { return g.max }

// capacity reads the set's capacity now.
func (g *NodeGroup) capacity(ctx context.Context) (int, error) {
	k := g.facts.key
	resp, err := g.p.c.ScaleSets.Get(ctx, k.rg, k.name, nil)
	if err != nil {
		return 0, fmt.Errorf("reading scale set %s: %w", g.ID(), mapError(g.ID(), err))
	}
	if resp.SKU == nil || resp.SKU.Capacity == nil {
		return 0, nil
	}
	return int(*resp.SKU.Capacity), nil
}

// TargetSize implements cloud.NodeGroup: the set's sku.capacity.
func (g *NodeGroup) TargetSize(ctx context.Context) (int, error) { return g.capacity(ctx) }

// PricePerHour implements cloud.NodeGroup: the price of its VM size in its
// location, spot or on-demand: configured, else the Retail Prices API's as
// last read (Provider.RefreshPrices); a spot set without either, its
// billingProfile.maxPrice, when set.
func (g *NodeGroup) PricePerHour() (float64, bool) {
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	return g.p.priceLocked(g.facts.sku, g.facts.location, g.facts.spot, g.facts.maxPrice)
}

// IncreaseSize implements cloud.NodeGroup: an update of the set's
// sku.capacity to the capacity plus delta. It returns once ARM accepted it
// (the set's capacity is the new one), without waiting for the operation,
// which ends only when the new VMs are provisioned: a VM Azure cannot
// allocate shows as Failed with its error code, which Nodes reports as an
// unfulfilled request (a *cloud.CapacityUnavailableError) for the caller
// to cancel. A refusal on the spot (SkuNotAvailable, a quota) changes
// nothing and is returned typed.
func (g *NodeGroup) IncreaseSize(ctx context.Context, delta int) error {
	if err := providerkit.CheckIncrease(delta); err != nil {
		return err
	}
	current, err := g.capacity(ctx)
	if err != nil {
		return err
	}
	want := current + delta
	if err := providerkit.CheckMax(g.what(), delta, want, g.max); err != nil {
		return err
	}
	_, err = g.update(ctx, want)
	return err
}

// update asks ARM for capacity size and returns the operation's poller.
func (g *NodeGroup) update(ctx context.Context, size int) (func(context.Context) error, error) {
	defer g.p.invalidate()
	k := g.facts.key
	what := fmt.Sprintf("setting the capacity of scale set %s to %d", g.ID(), size)
	poller, err := g.p.c.ScaleSets.BeginUpdate(ctx, k.rg, k.name, armcompute.VirtualMachineScaleSetUpdate{
		SKU: &armcompute.SKU{Name: to.Ptr(g.facts.sku), Capacity: to.Ptr(int64(size))}}, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, mapError(g.ID(), err))
	}
	return func(ctx context.Context) error { return wait(ctx, g.p, poller, what, g.ID()) }, nil
}

// deleteInstances deletes VMs of the set with the set's delete instances,
// which lowers its capacity by as many, and waits for the operation.
func (g *NodeGroup) deleteInstances(ctx context.Context, keys []vmKey) error {
	defer g.p.invalidate()
	ids := make([]*string, len(keys))
	for i, k := range keys {
		ids[i] = to.Ptr(k.name)
	}
	what := fmt.Sprintf("deleting %d VM(s) of scale set %s", len(keys), g.ID())
	sk := g.facts.key
	poller, err := g.p.c.ScaleSets.BeginDeleteInstances(ctx, sk.rg, sk.name, armcompute.VirtualMachineScaleSetVMInstanceRequiredIDs{InstanceIDs: ids}, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", what, mapError(g.ID(), err))
	}
	if err := wait(ctx, g.p, poller, what, g.ID()); err != nil {
		return err
	}
	for _, k := range keys {
		g.p.forget(k)
	}
	return nil
}

// DecreaseTargetSize implements cloud.NodeGroup: it cancels only requests
// not yet fulfilled. Capacity not yet listed as VMs goes first (an update
// down); then the VMs still Creating or Failed to be created (the failed
// ones first, then the newest) go with delete instances, which lowers the
// capacity by as many. A VM that finishes its creation between the list and
// the call is deleted all the same: the caller asked for it not to exist.
func (g *NodeGroup) DecreaseTargetSize(ctx context.Context, delta int) error {
	if err := providerkit.CheckDecrease(delta); err != nil {
		return err
	}
	capacity, err := g.capacity(ctx)
	if err != nil {
		return err
	}
	recs, err := g.listVMs(ctx)
	if err != nil {
		return err
	}
	var pending []vmRecord
	live := 0
	for _, r := range recs {
		if !r.live() {
			continue
		}
		live++
		if r.unfulfilled() {
			pending = append(pending, r)
		}
	}
	unlisted := max(capacity-live, 0)
	if err := providerkit.CheckCancel(g.what(), delta, unlisted+len(pending), "request(s) not yet fulfilled", capacity, g.min); err != nil {
		return err
	}
	if n := min(delta, unlisted); n > 0 {
		done, err := g.update(ctx, capacity-n)
		if err != nil {
			return err
		}
		if err := done(ctx); err != nil {
			return err
		}
		delta -= n
	}
	if delta == 0 {
		return nil
	}
	// Failed first, then the newest (ARM lists Uniform VMs by instance ID,
	// the newest last).
	slices.Reverse(pending)
	slices.SortStableFunc(pending, func(a, b vmRecord) int {
		switch fa, fb := a.state == stateFailed, b.state == stateFailed; {
		case fa && !fb:
			return -1
		case fb && !fa:
			return 1
		}
		return 0
	})
	keys := make([]vmKey, 0, delta)
	for _, r := range pending[:delta] {
		keys = append(keys, r.facts.key)
	}
	return g.deleteInstances(ctx, keys)
}

// DeleteNodes implements cloud.NodeGroup: it checks every node first (a VM
// of the set, not control plane, the capacity not below the minimum), then
// deletes the VMs with one delete instances, which lowers the capacity, and
// deletes the Node objects.
func (g *NodeGroup) DeleteNodes(ctx context.Context, nodes []*corev1.Node) error {
	capacity, err := g.capacity(ctx)
	if err != nil {
		return err
	}
	recs, err := g.listVMs(ctx)
	if err != nil {
		return err
	}
	in := map[vmKey]bool{}
	for _, r := range recs {
		if r.live() {
			in[r.facts.key] = true
		}
	}
	keys, err := providerkit.Members(g.what(), nodes, func(n *corev1.Node) vmKey { k, _ := keyOf(n); return k }, in)
	if err != nil {
		return err
	}
	if err := providerkit.CheckDelete(g.what(), len(nodes), capacity, g.min); err != nil {
		return err
	}
	if err := g.deleteInstances(ctx, keys); err != nil {
		return err
	}
	return providerkit.DeleteNodes(ctx, g.p.kube, nodes)
}

// nodeNames maps the lowercase resource IDs of VMs to the names of their
// Nodes (one list of the Nodes), when any of recs may have one.
func (p *Provider) nodeNames(ctx context.Context, recs []vmRecord) (map[string]string, error) {
	if !slices.ContainsFunc(recs, func(r vmRecord) bool { return r.state != stateCreating }) {
		return map[string]string{}, nil
	}
	return providerkit.NodeNames(ctx, p.kube, func(n *corev1.Node) (string, bool) {
		k, ok := keyOf(n)
		return k.resourceID(), ok
	})
}

// Nodes implements cloud.NodeGroup: the set's VMs (not being deleted) with
// their Node names; Creating ones, and those that failed to be created
// (with their error: an allocation failure is a
// *cloud.CapacityUnavailableError), as InstanceCreating; evicted,
// deallocated spot VMs as InstanceDeleting with an *EvictedError; and one
// InstanceCreating per unit of capacity not yet listed.
func (g *NodeGroup) Nodes(ctx context.Context) ([]cloud.Instance, error) {
	capacity, err := g.capacity(ctx)
	if err != nil {
		return nil, err
	}
	recs, err := g.listVMs(ctx)
	if err != nil {
		return nil, err
	}
	names, err := g.p.nodeNames(ctx, recs)
	if err != nil {
		return nil, err
	}
	out := make([]cloud.Instance, 0, len(recs))
	for _, r := range recs {
		if !r.live() {
			continue
		}
		inst := cloud.Instance{ID: "azure://" + r.armID, NodeName: names[r.facts.key.resourceID()], NodeGroup: g.ID(), Spot: r.facts.spot,
			InstanceType: r.facts.size, Zone: r.facts.zone, Region: r.facts.location, State: cloud.InstanceRunning}
		g.p.mu.Lock()
		inst.PricePerHour, inst.PriceKnown = g.p.priceLocked(r.facts.size, r.facts.location, r.facts.spot, r.facts.maxPrice)
		g.p.mu.Unlock()
		switch {
		case r.unfulfilled():
			inst.State = cloud.InstanceCreating
			if r.failure != nil {
				inst.Err = r.failure.typed(g.ID())
			} else if r.state == stateFailed {
				inst.Err = fmt.Errorf("VM %s failed to be created", r.armID)
			}
		case r.facts.deallocated:
			inst.State, inst.Err = cloud.InstanceDeleting, &EvictedError{VM: inst.ID}
		}
		out = append(out, inst)
	}
	for range capacity - len(out) {
		out = append(out, cloud.Instance{NodeGroup: g.ID(), Spot: g.Spot(), InstanceType: g.facts.sku, State: cloud.InstanceCreating})
	}
	return out, nil
}
