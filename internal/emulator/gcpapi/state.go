package gcpapi

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Instance statuses, as Compute Engine names them.
const (
	StatusProvisioning = "PROVISIONING"
	StatusRunning      = "RUNNING"
	StatusStopping     = "STOPPING"
	StatusTerminated   = "TERMINATED"
)

// Current actions of a managed instance.
const (
	ActionNone       = "NONE"
	ActionCreating   = "CREATING"
	ActionRecreating = "RECREATING"
	ActionDeleting   = "DELETING"
)

// Provisioning models of Scheduling.
const (
	ProvisioningStandard = "STANDARD"
	ProvisioningSpot     = "SPOT"
)

// Operation error codes Compute Engine reports for a lack of capacity.
const (
	CodeZoneResourcePoolExhausted = "ZONE_RESOURCE_POOL_EXHAUSTED"
	CodeQuotaExceeded             = "QUOTA_EXCEEDED"
)

// MachineType is a machine type of the catalog.
type MachineType struct {
	Name      string
	GuestCPUs int32
	MemoryMB  int32
	// Architecture is X86_64 or ARM64; "" means X86_64.
	Architecture string
	// Accelerators are the GPUs built into the type (A2, G2, A3).
	Accelerators []Accelerator
}

// Accelerator is a number of GPUs of a type ("nvidia-l4").
type Accelerator struct {
	Type  string
	Count int32
}

// DefaultMachineTypes is a small catalog of real machine types and their
// sizes.
func DefaultMachineTypes() []MachineType {
	return []MachineType{
		{Name: "e2-medium", GuestCPUs: 2, MemoryMB: 4096},
		{Name: "e2-standard-2", GuestCPUs: 2, MemoryMB: 8192},
		{Name: "e2-standard-4", GuestCPUs: 4, MemoryMB: 16384},
		{Name: "e2-standard-8", GuestCPUs: 8, MemoryMB: 32768},
		{Name: "n2-standard-2", GuestCPUs: 2, MemoryMB: 8192},
		{Name: "n2-standard-4", GuestCPUs: 4, MemoryMB: 16384},
		{Name: "n2-standard-8", GuestCPUs: 8, MemoryMB: 32768},
		{Name: "n2-highmem-4", GuestCPUs: 4, MemoryMB: 32768},
		{Name: "c3-standard-4", GuestCPUs: 4, MemoryMB: 16384},
		{Name: "t2d-standard-4", GuestCPUs: 4, MemoryMB: 16384},
		{Name: "t2a-standard-4", GuestCPUs: 4, MemoryMB: 16384, Architecture: "ARM64"},
		{Name: "n1-standard-4", GuestCPUs: 4, MemoryMB: 15360},
		{Name: "g2-standard-4", GuestCPUs: 4, MemoryMB: 16384, Accelerators: []Accelerator{{Type: "nvidia-l4", Count: 1}}},
	}
}

// Scheduling is the part of an instance's scheduling the emulator keeps.
type Scheduling struct {
	// ProvisioningModel is STANDARD, SPOT or "" (unset).
	ProvisioningModel string
	// Preemptible marks a preemptible VM (the older spot).
	Preemptible bool
	// InstanceTerminationAction is STOP, DELETE or "".
	InstanceTerminationAction string
}

// InstanceTemplate is an instance template, global (Region "") or regional.
type InstanceTemplate struct {
	Project string
	Region  string
	Name    string
	// MachineType is a name, as in a template ("e2-standard-4").
	MachineType string
	Scheduling  Scheduling
	Labels      map[string]string
	// Metadata items, such as the kube-env GKE writes.
	Metadata map[string]string
	// GuestAccelerators are GPUs attached to the template's instances (an
	// N1 machine's).
	GuestAccelerators []Accelerator
}

// Path is the template's resource path within the API,
// projects/<p>/global/instanceTemplates/<n> or
// projects/<p>/regions/<r>/instanceTemplates/<n>.
func (t InstanceTemplate) Path() string {
	if t.Region == "" {
		return fmt.Sprintf("projects/%s/global/instanceTemplates/%s", t.Project, t.Name)
	}
	return fmt.Sprintf("projects/%s/regions/%s/instanceTemplates/%s", t.Project, t.Region, t.Name)
}

// Group is a managed instance group: zonal (Zone set) or regional (Region
// and the Zones it spreads over set).
type Group struct {
	Project string
	Zone    string
	Region  string
	// Zones of a regional group; at least one.
	Zones []string
	Name  string
	// BaseInstanceName starts the names of its instances; default Name.
	BaseInstanceName string
	// InstanceTemplate is the template's Path.
	InstanceTemplate string
	TargetSize       int32
}

// Path is the group's resource path,
// projects/<p>/zones/<z>/instanceGroupManagers/<n> or the regions/ form.
func (g Group) Path() string {
	if g.Region != "" {
		return fmt.Sprintf("projects/%s/regions/%s/instanceGroupManagers/%s", g.Project, g.Region, g.Name)
	}
	return fmt.Sprintf("projects/%s/zones/%s/instanceGroupManagers/%s", g.Project, g.Zone, g.Name)
}

// Instance is a Compute Engine instance. The emulator hands out copies.
type Instance struct {
	Project string
	Zone    string
	Name    string
	ID      uint64
	// MachineType is a name ("e2-standard-4").
	MachineType string
	// Status is PROVISIONING, RUNNING, STOPPING or TERMINATED.
	Status     string
	Scheduling Scheduling
	Labels     map[string]string
	Metadata   map[string]string
	// Group is the Path of its managed instance group, "" for none.
	Group   string
	Created time.Time
}

// Path is the instance's resource path, projects/<p>/zones/<z>/instances/<n>.
func (i Instance) Path() string {
	return fmt.Sprintf("projects/%s/zones/%s/instances/%s", i.Project, i.Zone, i.Name)
}

// ProviderID is the spec.providerID of the instance's Node,
// gce://<project>/<zone>/<name>.
func (i Instance) ProviderID() string { return "gce://" + i.Project + "/" + i.Zone + "/" + i.Name }

// Member is a managed instance of a group, as listManagedInstances shows it.
type Member struct {
	Name           string
	Zone           string
	CurrentAction  string
	InstanceStatus string // "" while its instance does not exist
	// LastError is the code of its last failed creation attempt, "" for
	// none.
	LastError string
}

// GroupStatus is a group with its members.
type GroupStatus struct {
	Group
	Members []Member
}

type instance struct {
	Instance
	readyAt  time.Time // PROVISIONING until then
	deleteAt time.Time // STOPPING until then
	deleting bool
}

type member struct {
	name, zone string
	action     string
	inst       *instance // nil while not created
	lastError  *OperationError
}

type group struct {
	Group
	id      uint64
	created time.Time
	members []*member
}

// CreateInstanceTemplate adds a template and returns its Path.
func (s *Server) CreateInstanceTemplate(t InstanceTemplate) (string, error) {
	if t.Project == "" || t.Name == "" || t.MachineType == "" {
		return "", errors.New("an instance template needs a project, a name and a machine type")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.machineTypes[t.MachineType]; !ok {
		return "", fmt.Errorf("machine type %s is not in the catalog", t.MachineType)
	}
	path := t.Path()
	if _, ok := s.templates[path]; ok {
		return "", fmt.Errorf("instance template %s exists", path)
	}
	t.Labels, t.Metadata = maps.Clone(t.Labels), maps.Clone(t.Metadata)
	s.templates[path] = &t
	return path, nil
}

// CreateGroup adds a managed instance group; its members come at the next
// Step.
func (s *Server) CreateGroup(g Group) error {
	if g.Project == "" || g.Name == "" || (g.Zone == "") == (g.Region == "") {
		return errors.New("a group needs a project, a name and either a zone or a region")
	}
	if g.Region != "" && len(g.Zones) == 0 {
		return errors.New("a regional group needs its zones")
	}
	if g.TargetSize < 0 {
		return errors.New("a target size is at least 0")
	}
	if g.BaseInstanceName == "" {
		g.BaseInstanceName = g.Name
	}
	g.Zones = slices.Clone(g.Zones)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.templates[g.InstanceTemplate]; !ok {
		return fmt.Errorf("instance template %q does not exist", g.InstanceTemplate)
	}
	path := g.Path()
	if _, ok := s.groups[path]; ok {
		return fmt.Errorf("group %s exists", path)
	}
	s.groups[path] = &group{Group: g, id: s.nextID(), created: s.clock.Now()}
	s.reconcileMembers(s.groups[path])
	return nil
}

// SetTargetSize changes a group's target size, as a resize would, at once.
func (s *Server) SetTargetSize(groupPath string, size int32) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.groups[groupPath]
	if !ok {
		return fmt.Errorf("group %s does not exist", groupPath)
	}
	g.TargetSize = size
	s.reconcileMembers(g)
	return nil
}

// AddInstance adds an instance outside any group (Group is ignored) and
// returns it; Status defaults to RUNNING, Project and Zone are required, a
// Name is made up when empty.
func (s *Server) AddInstance(i Instance) (Instance, error) {
	if i.Project == "" || i.Zone == "" || i.MachineType == "" {
		return Instance{}, errors.New("an instance needs a project, a zone and a machine type")
	}
	s.mu.Lock()
	if i.Name == "" {
		i.Name = "vm-" + s.suffix(8)
	}
	if i.Status == "" {
		i.Status = StatusRunning
	}
	i.Group = ""
	i.ID = s.nextID()
	i.Created = s.clock.Now()
	i.Labels, i.Metadata = maps.Clone(i.Labels), maps.Clone(i.Metadata)
	if _, ok := s.instances[i.Path()]; ok {
		s.mu.Unlock()
		return Instance{}, fmt.Errorf("instance %s exists", i.Path())
	}
	in := &instance{Instance: i}
	s.instances[i.Path()] = in
	out := in.copy()
	hooks := slices.Clone(s.onRunning)
	s.mu.Unlock()
	if out.Status == StatusRunning {
		for _, f := range hooks {
			f(out)
		}
	}
	return out, nil
}

// Instances returns every instance, by path.
func (s *Server) Instances() []Instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Instance, 0, len(s.instances))
	for _, k := range slices.Sorted(maps.Keys(s.instances)) {
		out = append(out, s.instances[k].copy())
	}
	return out
}

// Instance returns the instance at path (Instance.Path), if it exists.
func (s *Server) Instance(path string) (Instance, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, ok := s.instances[path]
	if !ok {
		return Instance{}, false
	}
	return i.copy(), true
}

// GroupStatus returns the group at path (Group.Path) with its members.
func (s *Server) GroupStatus(path string) (GroupStatus, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.groups[path]
	if !ok {
		return GroupStatus{}, false
	}
	st := GroupStatus{Group: g.Group}
	st.Zones = slices.Clone(g.Zones)
	for _, m := range g.members {
		st.Members = append(st.Members, m.view())
	}
	return st, true
}

func (m *member) view() Member {
	v := Member{Name: m.name, Zone: m.zone, CurrentAction: m.action}
	if m.inst != nil {
		v.InstanceStatus = m.inst.Status
	}
	if m.lastError != nil {
		v.LastError = m.lastError.Code
	}
	return v
}

func (i *instance) copy() Instance {
	c := i.Instance
	c.Labels, c.Metadata = maps.Clone(i.Labels), maps.Clone(i.Metadata)
	return c
}

// suffix returns n random lowercase letters and digits, as Compute Engine
// appends to a group's base instance name; the caller holds s.mu.
func (s *Server) suffix(n int) string {
	const chars = "abcdefghijklmnopqrstuvwxyz0123456789"
	var b strings.Builder
	for range n {
		b.WriteByte(chars[s.rand.IntN(len(chars))])
	}
	return b.String()
}

// reconcileMembers adds CREATING members up to the target size and removes
// those above it (members not yet created first, then the newest); the
// caller holds s.mu. Instances are created and deleted by Step.
func (s *Server) reconcileMembers(g *group) {
	now := s.clock.Now()
	active := 0
	for _, m := range g.members {
		if m.action != ActionDeleting {
			active++
		}
	}
	for ; active < int(g.TargetSize); active++ {
		name := g.BaseInstanceName + "-" + s.suffix(4)
		for s.memberNamed(name) {
			name = g.BaseInstanceName + "-" + s.suffix(4)
		}
		g.members = append(g.members, &member{name: name, zone: s.zoneFor(g), action: ActionCreating})
	}
	for active > int(g.TargetSize) {
		victim := -1
		for i := len(g.members) - 1; i >= 0; i-- {
			m := g.members[i]
			if m.action == ActionCreating && m.inst == nil {
				victim = i
				break
			}
			if victim < 0 && m.action != ActionDeleting {
				victim = i
			}
		}
		if victim < 0 {
			break
		}
		s.deleteMember(g, victim, now)
		active--
	}
}

// deleteMember removes the member at i: at once when it has no instance,
// else by deleting its instance; the caller holds s.mu.
func (s *Server) deleteMember(g *group, i int, now time.Time) {
	m := g.members[i]
	if m.inst == nil {
		g.members = slices.Delete(g.members, i, i+1)
		return
	}
	m.action = ActionDeleting
	s.startDelete(m.inst, now)
}

// startDelete puts an instance in STOPPING until DeleteDelay passes; the
// caller holds s.mu.
func (s *Server) startDelete(i *instance, now time.Time) {
	if i.deleting {
		return
	}
	i.deleting, i.Status, i.deleteAt = true, StatusStopping, now.Add(s.deleteDelay)
}

// memberNamed reports whether an instance or member has name in any group;
// the caller holds s.mu.
func (s *Server) memberNamed(name string) bool {
	for _, g := range s.groups {
		for _, m := range g.members {
			if m.name == name {
				return true
			}
		}
	}
	return false
}

// zoneFor picks the zone of a new member: a zonal group's zone, else the
// zone of a regional group with fewest members that is not short of
// capacity (the first zone when all are); the caller holds s.mu.
func (s *Server) zoneFor(g *group) string {
	if g.Region == "" {
		return g.Zone
	}
	count := map[string]int{}
	for _, m := range g.members {
		if m.action != ActionDeleting {
			count[m.zone]++
		}
	}
	best := ""
	for _, z := range g.Zones {
		if s.zoneShortage[z] {
			continue
		}
		if best == "" || count[z] < count[best] {
			best = z
		}
	}
	if best == "" {
		best = g.Zones[0]
	}
	return best
}

// Preempt takes back the spot (or preemptible) instance at path, a member of
// a managed instance group, as Compute Engine does: the instance is
// TERMINATED and gone, OnDeleted runs for it, and its group recreates it
// under the same name (currentAction RECREATING, lastAttempt errors while
// its zone is short), as it creates a new member.
func (s *Server) Preempt(path string) error {
	s.mu.Lock()
	i, ok := s.instances[path]
	if !ok {
		s.mu.Unlock()
		return fmt.Errorf("instance %s: not found", path)
	}
	if i.Scheduling.ProvisioningModel != ProvisioningSpot && !i.Scheduling.Preemptible {
		s.mu.Unlock()
		return fmt.Errorf("instance %s is not spot or preemptible", path)
	}
	g, ok := s.groups[i.Group]
	if !ok {
		s.mu.Unlock()
		return fmt.Errorf("instance %s is in no managed instance group", path)
	}
	delete(s.instances, path)
	for _, m := range g.members {
		if m.inst == i {
			m.inst, m.action = nil, ActionRecreating
		}
	}
	gone := i.copy()
	gone.Status = StatusTerminated
	onDeleted := slices.Clone(s.onDeleted)
	s.mu.Unlock()
	for _, f := range onDeleted {
		f(gone)
	}
	return nil
}
