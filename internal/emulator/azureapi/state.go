package azureapi

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Provisioning states, as ARM names them.
const (
	StateCreating  = "Creating"
	StateSucceeded = "Succeeded"
	StateFailed    = "Failed"
	StateDeleting  = "Deleting"
	StateUpdating  = "Updating"
)

// Power states (the part after "PowerState/" of an instance view status).
const (
	PowerStarting     = "starting"
	PowerRunning      = "running"
	PowerDeallocating = "deallocating"
	PowerDeallocated  = "deallocated"
)

// Priorities and eviction policies.
const (
	PriorityRegular = "Regular"
	PrioritySpot    = "Spot"
	EvictDelete     = "Delete"
	EvictDeallocate = "Deallocate"
)

// SKU is a VM size of the catalog.
type SKU struct {
	Name     string
	Family   string
	VCPUs    int
	MemoryGB float64
	// GPUs is the capability GPUs; 0 leaves it out.
	GPUs int
	// Arch is the capability CpuArchitectureType: x64 (default) or Arm64.
	Arch string
}

// DefaultSKUs is a small catalog of real VM sizes and their sizes.
func DefaultSKUs() []SKU {
	return []SKU{
		{Name: "Standard_B2s", Family: "standardBSFamily", VCPUs: 2, MemoryGB: 4},
		{Name: "Standard_DS2_v2", Family: "standardDSv2Family", VCPUs: 2, MemoryGB: 7},
		{Name: "Standard_D2s_v5", Family: "standardDSv5Family", VCPUs: 2, MemoryGB: 8},
		{Name: "Standard_D4s_v5", Family: "standardDSv5Family", VCPUs: 4, MemoryGB: 16},
		{Name: "Standard_D8s_v5", Family: "standardDSv5Family", VCPUs: 8, MemoryGB: 32},
		{Name: "Standard_D4as_v5", Family: "standardDASv5Family", VCPUs: 4, MemoryGB: 16},
		{Name: "Standard_D4s_v3", Family: "standardDSv3Family", VCPUs: 4, MemoryGB: 16},
		{Name: "Standard_E4s_v5", Family: "standardESv5Family", VCPUs: 4, MemoryGB: 32},
		{Name: "Standard_F4s_v2", Family: "standardFSv2Family", VCPUs: 4, MemoryGB: 8},
		{Name: "Standard_D4ps_v5", Family: "standardDPSv5Family", VCPUs: 4, MemoryGB: 16, Arch: "Arm64"},
		{Name: "Standard_NC4as_T4_v3", Family: "standardNCASv3_T4Family", VCPUs: 4, MemoryGB: 28, GPUs: 1},
	}
}

// ScaleSet is a VM scale set as it is set up.
type ScaleSet struct {
	Subscription  string
	ResourceGroup string
	Name          string
	Location      string
	// Zones the VMs are spread over, round robin; none for a regional set.
	Zones []string
	// Flexible is the orchestration mode Flexible (VMs are virtualMachines
	// resources named <name>_<8 hex>); false is Uniform (VMs are
	// <name>/virtualMachines/<instance ID>).
	Flexible bool
	SKU      string
	Capacity int64
	// Priority is Regular (default) or Spot.
	Priority string
	// EvictionPolicy of a spot set: Delete or Deallocate.
	EvictionPolicy string
	// MaxPrice is billingProfile.maxPrice: -1 for up to the on-demand price,
	// 0 for none set.
	MaxPrice float64
	Tags     map[string]string
	// PodIPs is the number of secondary IP configurations of the VMs'
	// primary NIC, one per pod, as AKS writes them for Azure CNI (pods take
	// the subnet's addresses); 0 (kubenet, Azure CNI Overlay) gives the NIC
	// its primary configuration only.
	PodIPs int
	// ComputerNamePrefix starts the VMs' computer names (Uniform: followed by
	// the instance ID in base 36 on six characters, as AKS's node names);
	// default Name.
	ComputerNamePrefix string
}

// ID is the scale set's resource ID.
func (s ScaleSet) ID() string {
	return fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/virtualMachineScaleSets/%s", s.Subscription, s.ResourceGroup, s.Name)
}

// VM is a virtual machine: of a Uniform scale set, of a Flexible one, or
// standalone. The emulator hands out copies.
type VM struct {
	Subscription  string
	ResourceGroup string
	// ScaleSet is the name of its scale set, "" for a standalone VM.
	ScaleSet string
	Flexible bool
	// Name is the VM's resource name: <scale set>_<instance ID> for a
	// Uniform VM.
	Name string
	// InstanceID is a Uniform VM's instance ID; a Flexible VM's is its Name.
	InstanceID        string
	ComputerName      string
	Location          string
	Zone              string
	Size              string
	Priority          string
	EvictionPolicy    string
	MaxPrice          float64
	ProvisioningState string
	// PowerState is starting, running, deallocating, deallocated or "".
	PowerState string
	// FailureCode is why a Failed VM failed (AllocationFailed, ...).
	FailureCode string
	Created     time.Time
}

// ID is the VM's resource ID.
func (v VM) ID() string {
	rg := fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/", v.Subscription, v.ResourceGroup)
	if v.ScaleSet != "" && !v.Flexible {
		return rg + "virtualMachineScaleSets/" + v.ScaleSet + "/virtualMachines/" + v.InstanceID
	}
	return rg + "virtualMachines/" + v.Name
}

// ProviderID is the spec.providerID of the VM's Node: azure:// and its
// resource ID.
func (v VM) ProviderID() string { return "azure://" + v.ID() }

type scaleSet struct {
	ScaleSet
	uniqueID string
	created  time.Time
	nextInst int // Uniform: the next instance ID
	nextZone int
}

type vm struct {
	VM
	vmID     string
	readyAt  time.Time // Creating until then
	deleteAt time.Time // Deleting until then
	set      *scaleSet // nil for a standalone VM
}

func (v *vm) copy() VM { return v.VM }

func (v *vm) deleting() bool { return v.ProvisioningState == StateDeleting }

func key(id string) string { return strings.ToLower(id) }

// CreateScaleSet adds a scale set; its VMs come at once, Creating.
func (s *Server) CreateScaleSet(ss ScaleSet) error {
	if ss.Subscription == "" || ss.ResourceGroup == "" || ss.Name == "" || ss.Location == "" || ss.SKU == "" {
		return errors.New("a scale set needs a subscription, a resource group, a name, a location and a SKU")
	}
	if ss.Capacity < 0 {
		return errors.New("a capacity is at least 0")
	}
	if ss.Priority == "" {
		ss.Priority = PriorityRegular
	}
	if ss.Priority == PrioritySpot && ss.EvictionPolicy == "" {
		ss.EvictionPolicy = EvictDeallocate
	}
	if ss.ComputerNamePrefix == "" {
		ss.ComputerNamePrefix = ss.Name
	}
	ss.Zones, ss.Tags = clone(ss.Zones), maps.Clone(ss.Tags)
	s.mu.Lock()
	defer s.unlock()
	if _, ok := s.skus[strings.ToLower(ss.SKU)]; !ok {
		return fmt.Errorf("SKU %s is not in the catalog", ss.SKU)
	}
	k := key(ss.ID())
	if _, ok := s.scaleSets[k]; ok {
		return fmt.Errorf("scale set %s exists", ss.ID())
	}
	n := s.nextID()
	set := &scaleSet{ScaleSet: ss, created: s.clock.Now(), uniqueID: fmt.Sprintf("00000000-0000-4000-8000-%012d", n)}
	s.scaleSets[k] = set
	s.reconcile(set, s.clock.Now())
	return nil
}

// AddVM adds a standalone VM (ScaleSet is ignored), running, and returns it.
func (s *Server) AddVM(v VM) (VM, error) {
	if v.Subscription == "" || v.ResourceGroup == "" || v.Name == "" || v.Location == "" || v.Size == "" {
		return VM{}, errors.New("a VM needs a subscription, a resource group, a name, a location and a size")
	}
	v.ScaleSet, v.Flexible, v.InstanceID = "", false, ""
	if v.Priority == "" {
		v.Priority = PriorityRegular
	}
	if v.ComputerName == "" {
		v.ComputerName = v.Name
	}
	s.mu.Lock()
	defer s.unlock()
	k := key(v.ID())
	if _, ok := s.vms[k]; ok {
		return VM{}, fmt.Errorf("VM %s exists", v.ID())
	}
	v.ProvisioningState, v.PowerState, v.Created = StateSucceeded, PowerRunning, s.clock.Now()
	in := &vm{VM: v, vmID: fmt.Sprintf("00000000-0000-4000-9000-%012d", s.nextID())}
	s.vms[k] = in
	s.queue(s.onRunning, in.copy())
	return in.copy(), nil
}

// SetCapacity changes a scale set's capacity at once, as an update would.
func (s *Server) SetCapacity(scaleSetID string, capacity int64) error {
	s.mu.Lock()
	defer s.unlock()
	set, ok := s.scaleSets[key(scaleSetID)]
	if !ok {
		return fmt.Errorf("scale set %s does not exist", scaleSetID)
	}
	set.Capacity = capacity
	s.reconcile(set, s.clock.Now())
	return nil
}

// GetScaleSet returns the scale set with resource ID id.
func (s *Server) GetScaleSet(id string) (ScaleSet, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	set, ok := s.scaleSets[key(id)]
	if !ok {
		return ScaleSet{}, false
	}
	out := set.ScaleSet
	out.Zones, out.Tags = clone(out.Zones), maps.Clone(out.Tags)
	return out, true
}

// VMs returns every VM, ordered by resource ID.
func (s *Server) VMs() []VM {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]VM, 0, len(s.vms))
	for _, k := range slices.Sorted(maps.Keys(s.vms)) {
		out = append(out, s.vms[k].copy())
	}
	return out
}

// ScaleSetVMs returns the VMs of the scale set with resource ID id, ordered
// by resource ID.
func (s *Server) ScaleSetVMs(id string) []VM {
	s.mu.Lock()
	defer s.mu.Unlock()
	set := s.scaleSets[key(id)]
	var out []VM
	for _, k := range slices.Sorted(maps.Keys(s.vms)) {
		if v := s.vms[k]; v.set != nil && v.set == set {
			out = append(out, v.copy())
		}
	}
	return out
}

// GetVM returns the VM with resource ID id (or its providerID).
func (s *Server) GetVM(id string) (VM, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.vms[key(strings.TrimPrefix(id, "azure://"))]
	if !ok {
		return VM{}, false
	}
	return v.copy(), true
}

// Evict evicts the running spot VM with resource ID (or providerID) id, as
// Azure does when it needs the capacity back: with eviction policy
// Deallocate the VM stays, deallocated (and OnEvicted hooks run); with
// Delete it is deleted and its scale set's capacity lowered by one.
func (s *Server) Evict(id string) error {
	s.mu.Lock()
	defer s.unlock()
	v, ok := s.vms[key(strings.TrimPrefix(id, "azure://"))]
	switch {
	case !ok:
		return fmt.Errorf("VM %s does not exist", id)
	case v.Priority != PrioritySpot:
		return fmt.Errorf("VM %s is not a spot VM", id)
	case v.PowerState != PowerRunning:
		return fmt.Errorf("VM %s is %s, not running", id, v.PowerState)
	}
	now := s.clock.Now()
	if v.EvictionPolicy == EvictDelete {
		if v.set != nil {
			v.set.Capacity--
		}
		s.startDelete(v, now)
		return nil
	}
	v.PowerState = PowerDeallocated
	s.queue(s.onEvicted, v.copy())
	return nil
}

// reconcile adds Creating VMs to set up to its capacity and deletes those
// above it (Creating and Failed ones first, then the newest); the caller
// holds s.mu.
func (s *Server) reconcile(set *scaleSet, now time.Time) {
	var live []*vm
	for _, k := range slices.Sorted(maps.Keys(s.vms)) {
		if v := s.vms[k]; v.set == set && !v.deleting() {
			live = append(live, v)
		}
	}
	for n := int64(len(live)); n < set.Capacity; n++ {
		live = append(live, s.createVM(set, now))
	}
	for int64(len(live)) > set.Capacity {
		victim := len(live) - 1
		for i := len(live) - 1; i >= 0; i-- {
			if st := live[i].ProvisioningState; st == StateCreating || st == StateFailed {
				victim = i
				break
			}
		}
		newest := live[victim]
		if newest.ProvisioningState != StateCreating && newest.ProvisioningState != StateFailed {
			for _, v := range live {
				if v.Created.After(newest.Created) || (v.Created.Equal(newest.Created) && v.Name > newest.Name) {
					newest = v
				}
			}
		}
		s.startDelete(newest, now)
		live = deleteVM(live, newest)
	}
}

func deleteVM(vms []*vm, v *vm) []*vm {
	out := vms[:0]
	for _, x := range vms {
		if x != v {
			out = append(out, x)
		}
	}
	return out
}

// createVM adds a Creating VM to set; the caller holds s.mu.
func (s *Server) createVM(set *scaleSet, now time.Time) *vm {
	n := s.nextID()
	v := &vm{VM: VM{Subscription: set.Subscription, ResourceGroup: set.ResourceGroup, ScaleSet: set.Name, Flexible: set.Flexible,
		Location: set.Location, Size: set.SKU, Priority: set.Priority, EvictionPolicy: set.EvictionPolicy, MaxPrice: set.MaxPrice,
		ProvisioningState: StateCreating, PowerState: PowerStarting, Created: now},
		vmID: fmt.Sprintf("00000000-0000-4000-a000-%012d", n), readyAt: now.Add(s.createDelay), set: set}
	if len(set.Zones) > 0 {
		v.Zone = set.Zones[set.nextZone%len(set.Zones)]
		set.nextZone++
	}
	if set.Flexible {
		v.Name = fmt.Sprintf("%s_%08x", set.Name, uint32(n*2654435761))
		v.InstanceID = v.Name
		v.ComputerName = fmt.Sprintf("%s%06x", set.ComputerNamePrefix, uint32(n*2654435761)&0xffffff)
	} else {
		id := set.nextInst
		set.nextInst++
		v.InstanceID = strconv.Itoa(id)
		v.Name = set.Name + "_" + v.InstanceID
		v.ComputerName = set.ComputerNamePrefix + fmt.Sprintf("%06s", strconv.FormatInt(int64(id), 36))
	}
	s.vms[key(v.ID())] = v
	return v
}

// startDelete puts a VM in Deleting until the delete delay passes; the
// caller holds s.mu.
func (s *Server) startDelete(v *vm, now time.Time) {
	if v.deleting() {
		return
	}
	v.ProvisioningState, v.deleteAt = StateDeleting, now.Add(s.deleteDelay)
	if v.PowerState != PowerDeallocated {
		v.PowerState = PowerDeallocating
	}
}

// advance moves the world to now; the caller holds s.mu.
func (s *Server) advance(now time.Time) {
	for _, k := range slices.Sorted(maps.Keys(s.scaleSets)) {
		s.reconcile(s.scaleSets[k], now)
	}
	for _, k := range slices.Sorted(maps.Keys(s.vms)) {
		v := s.vms[k]
		switch {
		case v.ProvisioningState == StateCreating && v.set != nil && s.allocFailure[strings.ToLower(v.set.Name)] != "":
			v.ProvisioningState, v.PowerState, v.FailureCode = StateFailed, "", s.allocFailure[strings.ToLower(v.set.Name)]
		case v.ProvisioningState == StateCreating && !now.Before(v.readyAt):
			v.ProvisioningState, v.PowerState = StateSucceeded, PowerRunning
			s.queue(s.onRunning, v.copy())
		case v.deleting() && !now.Before(v.deleteAt):
			delete(s.vms, k)
			s.queue(s.onDeleted, v.copy())
		}
	}
	for _, k := range slices.Sorted(maps.Keys(s.operations)) {
		s.settle(s.operations[k], now)
	}
}
