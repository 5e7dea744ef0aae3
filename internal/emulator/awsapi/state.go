package awsapi

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"
)

// EC2 instance states.
const (
	StatePending      = "pending"
	StateRunning      = "running"
	StateShuttingDown = "shutting-down"
	StateTerminated   = "terminated"
)

// Auto Scaling lifecycle states of a group's instances.
const (
	LifecyclePending     = "Pending"
	LifecycleInService   = "InService"
	LifecycleTerminating = "Terminating"
)

// GroupNameTag is the tag Auto Scaling puts on the instances of a group.
const GroupNameTag = "aws:autoscaling:groupName"

// Instance is an EC2 instance, with its Auto Scaling view when it belongs to
// a group. The emulator hands out copies.
type Instance struct {
	ID               string
	InstanceType     string
	AvailabilityZone string
	// State is the EC2 state: pending, running, shutting-down, terminated.
	State string
	// Spot is true for a spot instance (InstanceLifecycle "spot"); false
	// for on-demand (no InstanceLifecycle).
	Spot           bool
	ImageID        string
	PrivateIP      string
	PrivateDNSName string
	LaunchTime     time.Time
	Tags           map[string]string

	// Group is the Auto Scaling group, "" for none.
	Group string
	// LifecycleState is the Auto Scaling state: Pending, InService,
	// Terminating; "" outside a group.
	LifecycleState string
	// HealthStatus is Healthy or Unhealthy; "" outside a group.
	HealthStatus         string
	ProtectedFromScaleIn bool
	LaunchTemplate       LaunchTemplateRef
}

// LaunchTemplateRef points at a launch template by ID or name, and a version
// (a number, $Latest or $Default; "" means $Default).
type LaunchTemplateRef struct {
	ID      string
	Name    string
	Version string
}

// MixedInstancesPolicy is a group's mix of instance types and purchase
// options.
type MixedInstancesPolicy struct {
	LaunchTemplate LaunchTemplateRef
	// InstanceTypes are the launch template overrides, in priority order.
	// Empty means Requirements, else the launch template's instance type.
	InstanceTypes []string
	// Requirements is an override of attribute-based instance type
	// selection: the group launches the catalog's types that meet them for
	// its image's architecture, in name order.
	Requirements *InstanceRequirements
	// InstancesDistribution splits the group between on-demand and spot.
	InstancesDistribution InstancesDistribution
}

// InstanceRequirements are the attributes an override asks of an instance
// type (a subset of Auto Scaling's InstanceRequirements); a zero maximum is
// no maximum.
type InstanceRequirements struct {
	VCPUMin, VCPUMax           int32
	MemoryMiBMin, MemoryMiBMax int64
}

// InstancesDistribution splits a group between on-demand and spot capacity.
// The fields are used as given: the zero value means all spot, where Auto
// Scaling's API would default OnDemandPercentageAboveBaseCapacity to 100.
type InstancesDistribution struct {
	OnDemandAllocationStrategy          string // default prioritized
	OnDemandBaseCapacity                int32
	OnDemandPercentageAboveBaseCapacity int32
	SpotAllocationStrategy              string // default lowest-price
	SpotMaxPrice                        string
}

// Group is an Auto Scaling group as created by CreateGroup.
type Group struct {
	Name            string
	MinSize         int32
	MaxSize         int32
	DesiredCapacity int32
	// AvailabilityZones the group launches in; at least one.
	AvailabilityZones []string
	// Tags of the group; all propagate at launch.
	Tags map[string]string
	// LaunchTemplate or MixedInstancesPolicy, exactly one; or, instead,
	// LaunchConfigurationName: the emulator describes such a group but
	// launches nothing for it.
	LaunchTemplate                   *LaunchTemplateRef
	MixedInstancesPolicy             *MixedInstancesPolicy
	LaunchConfigurationName          string
	NewInstancesProtectedFromScaleIn bool
}

// GroupStatus is a group with its instances (terminated ones gone).
type GroupStatus struct {
	Group
	ARN         string
	CreatedTime time.Time
	Instances   []Instance
}

// LaunchTemplateData is the content of a launch template version that the
// emulator models.
type LaunchTemplateData struct {
	InstanceType string
	ImageID      string
	// Spot sets InstanceMarketOptions.MarketType to spot.
	Spot         bool
	SpotMaxPrice string
}

// InstanceTypeInfo describes an instance type for DescribeInstanceTypes.
type InstanceTypeInfo struct {
	Name         string
	VCPUs        int32
	MemoryMiB    int64
	Architecture string // x86_64 or arm64; "" means x86_64
	GPUs         int32
	GPUName      string
	GPUMaker     string
	// ENIs and IPv4PerENI are the type's network interfaces and the IPv4
	// addresses each takes (networkInfo); 0 leaves them out.
	ENIs, IPv4PerENI int32
}

// SpotPrice is one entry of the spot price history.
type SpotPrice struct {
	InstanceType       string
	AvailabilityZone   string
	ProductDescription string // default Linux/UNIX
	Price              float64
	Timestamp          time.Time
}

// DefaultInstanceTypes returns a small catalog of common instance types,
// with the sizes, GPUs and network figures EC2 publishes for them.
func DefaultInstanceTypes() []InstanceTypeInfo {
	return []InstanceTypeInfo{
		{Name: "t3.medium", VCPUs: 2, MemoryMiB: 4096, ENIs: 3, IPv4PerENI: 6},
		{Name: "t3.large", VCPUs: 2, MemoryMiB: 8192, ENIs: 3, IPv4PerENI: 12},
		{Name: "m5.large", VCPUs: 2, MemoryMiB: 8192, ENIs: 3, IPv4PerENI: 10},
		{Name: "m5.xlarge", VCPUs: 4, MemoryMiB: 16384, ENIs: 4, IPv4PerENI: 15},
		{Name: "m5.2xlarge", VCPUs: 8, MemoryMiB: 32768, ENIs: 4, IPv4PerENI: 15},
		{Name: "m6i.large", VCPUs: 2, MemoryMiB: 8192, ENIs: 3, IPv4PerENI: 10},
		{Name: "m6i.xlarge", VCPUs: 4, MemoryMiB: 16384, ENIs: 4, IPv4PerENI: 15},
		{Name: "m6g.large", VCPUs: 2, MemoryMiB: 8192, Architecture: "arm64", ENIs: 3, IPv4PerENI: 10},
		{Name: "c5.large", VCPUs: 2, MemoryMiB: 4096, ENIs: 3, IPv4PerENI: 10},
		{Name: "c5.xlarge", VCPUs: 4, MemoryMiB: 8192, ENIs: 4, IPv4PerENI: 15},
		{Name: "r5.large", VCPUs: 2, MemoryMiB: 16384, ENIs: 3, IPv4PerENI: 10},
		{Name: "r5.xlarge", VCPUs: 4, MemoryMiB: 32768, ENIs: 4, IPv4PerENI: 15},
		{Name: "g4dn.xlarge", VCPUs: 4, MemoryMiB: 16384, GPUs: 1, GPUName: "T4", GPUMaker: "NVIDIA", ENIs: 3, IPv4PerENI: 10},
	}
}

// Internal records.

type instance struct {
	Instance
	stateSince  time.Time     // when State was entered
	launchDelay time.Duration // how long it stays pending
	stateReason string        // EC2 state reason code once shut down
	interruptAt time.Time     // a spot interruption's termination; zero: none
	hold        *hookWait     // held by a lifecycle hook
}

type group struct {
	Group
	arn     string
	created time.Time
	members []string // instance IDs, terminated ones removed
	hooks   []LifecycleHook
}

type launchTemplate struct {
	id, name       string
	created        time.Time
	defaultVersion int64
	versions       []LaunchTemplateData // version n is versions[n-1]
}

// activity is an Auto Scaling scaling activity.
type activity struct {
	id, group             string
	description, cause    string
	details               string
	statusCode, statusMsg string
	start, end            time.Time
	progress              int32
	instanceID            string
}

// ErrNotFound is returned by the state methods for an unknown name or ID.
var ErrNotFound = errors.New("not found")

// CreateLaunchTemplate creates a launch template whose version 1 (also its
// default) is data, and returns its ID.
func (s *Server) CreateLaunchTemplate(name string, data LaunchTemplateData) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.templates {
		if t.name == name {
			return "", fmt.Errorf("launch template %q exists", name)
		}
	}
	id := fmt.Sprintf("lt-0%016x", 0xa11ce00000000000+s.nextID())
	s.templates[id] = &launchTemplate{id: id, name: name, created: s.clock.Now(), defaultVersion: 1, versions: []LaunchTemplateData{data}}
	return id, nil
}

// CreateLaunchTemplateVersion adds a version to the template named or with
// the ID idOrName, and returns its number.
func (s *Server) CreateLaunchTemplateVersion(idOrName string, data LaunchTemplateData) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.templateLocked(LaunchTemplateRef{ID: idOrName, Name: idOrName})
	if t == nil {
		return 0, fmt.Errorf("launch template %q: %w", idOrName, ErrNotFound)
	}
	t.versions = append(t.versions, data)
	return int64(len(t.versions)), nil
}

// SetDefaultLaunchTemplateVersion makes version the default of the template.
func (s *Server) SetDefaultLaunchTemplateVersion(idOrName string, version int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.templateLocked(LaunchTemplateRef{ID: idOrName, Name: idOrName})
	if t == nil {
		return fmt.Errorf("launch template %q: %w", idOrName, ErrNotFound)
	}
	if version < 1 || version > int64(len(t.versions)) {
		return fmt.Errorf("launch template %q version %d: %w", idOrName, version, ErrNotFound)
	}
	t.defaultVersion = version
	return nil
}

func (s *Server) templateLocked(ref LaunchTemplateRef) *launchTemplate {
	if t, ok := s.templates[ref.ID]; ok {
		return t
	}
	for _, t := range s.templates {
		if t.name == ref.Name {
			return t
		}
	}
	return nil
}

// resolveVersion returns the version number a version string names, or 0.
func (t *launchTemplate) resolveVersion(v string) int64 {
	switch v {
	case "", "$Default":
		return t.defaultVersion
	case "$Latest":
		return int64(len(t.versions))
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 || n > int64(len(t.versions)) {
		return 0
	}
	return n
}

// CreateGroup creates an Auto Scaling group. It checks what AWS checks:
// min <= desired <= max, at least one zone, and a launch template (directly
// or through the mixed instances policy) that exists and names an instance
// type.
func (s *Server) CreateGroup(g Group) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if g.Name == "" {
		return errors.New("group name is empty")
	}
	if _, ok := s.groups[g.Name]; ok {
		return fmt.Errorf("group %q exists", g.Name)
	}
	if g.MinSize < 0 || g.MinSize > g.MaxSize || g.DesiredCapacity < g.MinSize || g.DesiredCapacity > g.MaxSize {
		return fmt.Errorf("group %q: want 0 <= min (%d) <= desired (%d) <= max (%d)", g.Name, g.MinSize, g.DesiredCapacity, g.MaxSize)
	}
	if len(g.AvailabilityZones) == 0 {
		return fmt.Errorf("group %q has no availability zone", g.Name)
	}
	if g.LaunchConfigurationName != "" {
		if g.LaunchTemplate != nil || g.MixedInstancesPolicy != nil || g.DesiredCapacity != 0 {
			return fmt.Errorf("group %q of a launch configuration: no launch template, and desired capacity 0 (the emulator launches nothing for it)", g.Name)
		}
		g.AvailabilityZones, g.Tags = slices.Clone(g.AvailabilityZones), maps.Clone(g.Tags)
		s.groups[g.Name] = &group{Group: g, arn: s.groupARN(g.Name), created: s.clock.Now()}
		return nil
	}
	if (g.LaunchTemplate == nil) == (g.MixedInstancesPolicy == nil) {
		return fmt.Errorf("group %q needs exactly one of LaunchTemplate and MixedInstancesPolicy", g.Name)
	}
	ref := g.launchTemplateRef()
	t := s.templateLocked(ref)
	if t == nil {
		return fmt.Errorf("group %q: launch template %+v: %w", g.Name, ref, ErrNotFound)
	}
	v := t.resolveVersion(ref.Version)
	if v == 0 {
		return fmt.Errorf("group %q: launch template %s version %q: %w", g.Name, t.id, ref.Version, ErrNotFound)
	}
	if t.versions[v-1].InstanceType == "" && (g.MixedInstancesPolicy == nil || (len(g.MixedInstancesPolicy.InstanceTypes) == 0 && g.MixedInstancesPolicy.Requirements == nil)) {
		return fmt.Errorf("group %q: no instance type in the launch template or overrides", g.Name)
	}
	g.AvailabilityZones = slices.Clone(g.AvailabilityZones)
	g.Tags = maps.Clone(g.Tags)
	if g.LaunchTemplate != nil {
		lt := *g.LaunchTemplate
		lt.ID, lt.Name = t.id, t.name
		g.LaunchTemplate = &lt
	}
	if g.MixedInstancesPolicy != nil {
		p := *g.MixedInstancesPolicy
		p.LaunchTemplate.ID, p.LaunchTemplate.Name = t.id, t.name
		p.InstanceTypes = slices.Clone(p.InstanceTypes)
		if p.InstancesDistribution.OnDemandAllocationStrategy == "" {
			p.InstancesDistribution.OnDemandAllocationStrategy = "prioritized"
		}
		if p.InstancesDistribution.SpotAllocationStrategy == "" {
			p.InstancesDistribution.SpotAllocationStrategy = "lowest-price"
		}
		g.MixedInstancesPolicy = &p
	}
	s.groups[g.Name] = &group{Group: g, arn: s.groupARN(g.Name), created: s.clock.Now()}
	return nil
}

func (g *Group) launchTemplateRef() LaunchTemplateRef {
	if g.MixedInstancesPolicy != nil {
		return g.MixedInstancesPolicy.LaunchTemplate
	}
	return *g.LaunchTemplate
}

// UpdateGroupSize sets a group's min, max and desired capacity at once, as
// UpdateAutoScalingGroup would.
func (s *Server) UpdateGroupSize(name string, minSize, maxSize, desired int32) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.groups[name]
	if !ok {
		return fmt.Errorf("group %q: %w", name, ErrNotFound)
	}
	if minSize < 0 || minSize > maxSize || desired < minSize || desired > maxSize {
		return fmt.Errorf("group %q: want 0 <= min (%d) <= desired (%d) <= max (%d)", name, minSize, desired, maxSize)
	}
	g.MinSize, g.MaxSize, g.DesiredCapacity = minSize, maxSize, desired
	return nil
}

// GroupStatus returns a group and its instances.
func (s *Server) GroupStatus(name string) (GroupStatus, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.groups[name]
	if !ok {
		return GroupStatus{}, false
	}
	return s.groupStatusLocked(g), true
}

func (s *Server) groupStatusLocked(g *group) GroupStatus {
	st := GroupStatus{Group: g.Group, ARN: g.arn, CreatedTime: g.created}
	st.AvailabilityZones = slices.Clone(g.AvailabilityZones)
	st.Tags = maps.Clone(g.Tags)
	for _, id := range g.members {
		st.Instances = append(st.Instances, s.instances[id].copy())
	}
	return st
}

func (i *instance) copy() Instance {
	c := i.Instance
	c.Tags = maps.Clone(i.Tags)
	return c
}

// Instance returns the instance with the ID id, terminated ones included
// until they are forgotten.
func (s *Server) Instance(id string) (Instance, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, ok := s.instances[id]
	if !ok {
		return Instance{}, false
	}
	return i.copy(), true
}

// Instances returns every instance the emulator knows, in launch order.
func (s *Server) Instances() []Instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Instance, 0, len(s.instanceOrder))
	for _, id := range s.instanceOrder {
		out = append(out, s.instances[id].copy())
	}
	return out
}

// AddInstance adds a stand-alone EC2 instance (in no group) and returns its
// ID. Empty fields get defaults: a fresh ID, state running, launch time now,
// private IP and DNS name. An instance added as running fires OnLaunch hooks.
func (s *Server) AddInstance(in Instance) (string, error) {
	s.mu.Lock()
	if in.Group != "" {
		s.mu.Unlock()
		return "", errors.New("AddInstance adds instances outside groups; use CreateGroup and Step")
	}
	if in.ID != "" {
		if _, ok := s.instances[in.ID]; ok {
			s.mu.Unlock()
			return "", fmt.Errorf("instance %s exists", in.ID)
		}
	}
	if in.State == "" {
		in.State = StateRunning
	}
	i := s.newInstanceLocked(in)
	var hooks []func(Instance)
	if i.State == StateRunning {
		hooks = slices.Clone(s.onLaunch)
	}
	c := i.copy()
	s.mu.Unlock()
	for _, h := range hooks {
		h(c)
	}
	return c.ID, nil
}

// newInstanceLocked stores in with defaults filled in.
func (s *Server) newInstanceLocked(in Instance) *instance {
	n := s.nextID()
	if in.ID == "" {
		in.ID = fmt.Sprintf("i-0%016x", 0xabc0000000000000+n)
	}
	now := s.clock.Now()
	if in.LaunchTime.IsZero() {
		in.LaunchTime = now
	}
	if in.PrivateIP == "" {
		in.PrivateIP = fmt.Sprintf("10.%d.%d.%d", 0+(n>>16)&0xff, (n>>8)&0xff, n&0xff)
	}
	if in.PrivateDNSName == "" {
		in.PrivateDNSName = s.privateDNSName(in.PrivateIP)
	}
	if in.ImageID == "" {
		in.ImageID = "ami-0123456789abcdef0"
	}
	in.Tags = maps.Clone(in.Tags)
	i := &instance{Instance: in, stateSince: now, launchDelay: s.launchDelay}
	s.instances[in.ID] = i
	s.instanceOrder = append(s.instanceOrder, in.ID)
	return i
}

// privateDNSName follows EC2's naming: ip-10-0-0-1.ec2.internal in
// us-east-1, ip-10-0-0-1.<region>.compute.internal elsewhere.
func (s *Server) privateDNSName(ip string) string {
	host := "ip-"
	for _, r := range ip {
		if r == '.' {
			r = '-'
		}
		host += string(r)
	}
	if s.region == "us-east-1" {
		return host + ".ec2.internal"
	}
	return host + "." + s.region + ".compute.internal"
}

// TerminateInstance terminates an instance from EC2's side, as a spot
// interruption does: it goes shutting-down now and terminated at a later
// Step; its group, if any, replaces it.
func (s *Server) TerminateInstance(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, ok := s.instances[id]
	if !ok {
		return fmt.Errorf("instance %s: %w", id, ErrNotFound)
	}
	reason := "Client.UserInitiatedShutdown"
	if i.Spot {
		reason = "Server.SpotInstanceTermination"
	}
	s.shutDownLocked(i, reason)
	return nil
}

// shutDownLocked moves a live instance to shutting-down (and Terminating in
// its group).
func (s *Server) shutDownLocked(i *instance, reason string) {
	if i.State == StateShuttingDown || i.State == StateTerminated {
		return
	}
	i.State, i.stateReason = StateShuttingDown, reason
	i.stateSince = s.clock.Now()
	i.hold = nil // a lifecycle hook holds nothing EC2 shuts down
	if i.Group != "" {
		i.LifecycleState = LifecycleTerminating
		i.HealthStatus = "Unhealthy"
	}
	s.emitStateLocked(i)
}

// AddInstanceTypes adds or replaces instance types in the catalog.
func (s *Server) AddInstanceTypes(types ...InstanceTypeInfo) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range types {
		s.instanceTypes[t.Name] = t
	}
}

// SetSpotPrice records a spot price of instanceType in zone, effective at
// at (zero means now), for Linux/UNIX.
func (s *Server) SetSpotPrice(instanceType, zone string, price float64, at time.Time) {
	s.AddSpotPrices(SpotPrice{InstanceType: instanceType, AvailabilityZone: zone, Price: price, Timestamp: at})
}

// AddSpotPrices records entries of the spot price history.
func (s *Server) AddSpotPrices(prices ...SpotPrice) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range prices {
		if p.Timestamp.IsZero() {
			p.Timestamp = s.clock.Now()
		}
		if p.ProductDescription == "" {
			p.ProductDescription = "Linux/UNIX"
		}
		s.spotPrices = append(s.spotPrices, p)
	}
}

// currentSpotPriceLocked returns the latest price of a pool, or -1.
func (s *Server) currentSpotPriceLocked(instanceType, zone string) float64 {
	best, price := time.Time{}, -1.0
	now := s.clock.Now()
	for _, p := range s.spotPrices {
		if p.InstanceType == instanceType && p.AvailabilityZone == zone && !p.Timestamp.After(now) && !p.Timestamp.Before(best) {
			best, price = p.Timestamp, p.Price
		}
	}
	return price
}

// groupARN is a new group's ARN; s.mu is held.
func (s *Server) groupARN(name string) string {
	return fmt.Sprintf("arn:aws:autoscaling:%s:%s:autoScalingGroup:%s:autoScalingGroupName/%s", s.region, s.accountID, uuid(s.nextID()), name)
}

// AddImage registers an image (an AMI) of an architecture (x86_64 or
// arm64) for DescribeImages.
func (s *Server) AddImage(id, arch string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.images[id] = arch
}

// matchRequirements returns the catalog's types of architecture arch that
// meet r, in name order; s.mu is held.
func (s *Server) matchRequirements(r InstanceRequirements, arch string) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(s.instanceTypes)) {
		t := s.instanceTypes[name]
		if archOf(t) == arch && t.VCPUs >= r.VCPUMin && (r.VCPUMax == 0 || t.VCPUs <= r.VCPUMax) &&
			t.MemoryMiB >= r.MemoryMiBMin && (r.MemoryMiBMax == 0 || t.MemoryMiB <= r.MemoryMiBMax) {
			out = append(out, name)
		}
	}
	return out
}
