package awsapi

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// autoScalingActions are the emulated Auto Scaling actions.
var autoScalingActions = map[string]handler{
	"DescribeAutoScalingGroups":           (*Server).describeAutoScalingGroups,
	"DescribeAutoScalingInstances":        (*Server).describeAutoScalingInstances,
	"DescribeScalingActivities":           (*Server).describeScalingActivities,
	"SetDesiredCapacity":                  (*Server).setDesiredCapacity,
	"TerminateInstanceInAutoScalingGroup": (*Server).terminateInstanceInAutoScalingGroup,
	"PutLifecycleHook":                    (*Server).putLifecycleHook,
	"DescribeLifecycleHooks":              (*Server).describeLifecycleHooks,
	"CompleteLifecycleAction":             (*Server).completeLifecycleAction,
	"RecordLifecycleActionHeartbeat":      (*Server).recordLifecycleActionHeartbeat,
}

// maxRecords reads MaxRecords within [1, hi], def when absent.
func maxRecords(q query, hi, def int) (int, *APIError) {
	n, ok, err := q.intParam("MaxRecords")
	if err != nil {
		return 0, validationError("Value '%s' at 'maxRecords' failed to satisfy constraint: Member must be a number", q.get("MaxRecords"))
	}
	if !ok {
		return def, nil
	}
	if n < 1 || n > hi {
		return 0, validationError("Value '%d' at 'maxRecords' failed to satisfy constraint: Member must have value between 1 and %d", n, hi)
	}
	return n, nil
}

func autoScalingNextToken(q query) (int, *APIError) {
	offset, ok := decodeToken(q.get("NextToken"))
	if !ok {
		return 0, badRequest("InvalidNextToken", "The token '%s' is invalid.", q.get("NextToken"))
	}
	return offset, nil
}

// Wire types.

type asLaunchTemplate struct {
	LaunchTemplateID   string `xml:"LaunchTemplateId"`
	LaunchTemplateName string `xml:"LaunchTemplateName"`
	Version            string `xml:"Version"`
}

type asInstance struct {
	InstanceID           string            `xml:"InstanceId"`
	InstanceType         string            `xml:"InstanceType"`
	AvailabilityZone     string            `xml:"AvailabilityZone"`
	LifecycleState       string            `xml:"LifecycleState"`
	HealthStatus         string            `xml:"HealthStatus"`
	LaunchTemplate       *asLaunchTemplate `xml:"LaunchTemplate,omitempty"`
	ProtectedFromScaleIn bool              `xml:"ProtectedFromScaleIn"`
}

type asInstanceDetails struct {
	AutoScalingGroupName string `xml:"AutoScalingGroupName"`
	asInstance
}

type asTag struct {
	ResourceID        string `xml:"ResourceId"`
	ResourceType      string `xml:"ResourceType"`
	Key               string `xml:"Key"`
	Value             string `xml:"Value"`
	PropagateAtLaunch bool   `xml:"PropagateAtLaunch"`
}

type asOverride struct {
	InstanceType         string                  `xml:"InstanceType,omitempty"`
	InstanceRequirements *asInstanceRequirements `xml:"InstanceRequirements,omitempty"`
}

type asRange struct {
	Min int64  `xml:"Min"`
	Max *int64 `xml:"Max,omitempty"`
}

type asInstanceRequirements struct {
	VCpuCount asRange `xml:"VCpuCount"`
	MemoryMiB asRange `xml:"MemoryMiB"`
}

type asDistribution struct {
	OnDemandAllocationStrategy          string `xml:"OnDemandAllocationStrategy"`
	OnDemandBaseCapacity                int32  `xml:"OnDemandBaseCapacity"`
	OnDemandPercentageAboveBaseCapacity int32  `xml:"OnDemandPercentageAboveBaseCapacity"`
	SpotAllocationStrategy              string `xml:"SpotAllocationStrategy"`
	SpotInstancePools                   *int32 `xml:"SpotInstancePools,omitempty"`
	SpotMaxPrice                        string `xml:"SpotMaxPrice,omitempty"`
}

type asMixedInstancesPolicy struct {
	LaunchTemplateSpecification asLaunchTemplate       `xml:"LaunchTemplate>LaunchTemplateSpecification"`
	Overrides                   memberList[asOverride] `xml:"LaunchTemplate>Overrides"`
	InstancesDistribution       asDistribution         `xml:"InstancesDistribution"`
}

type asGroup struct {
	AutoScalingGroupName             string                  `xml:"AutoScalingGroupName"`
	AutoScalingGroupARN              string                  `xml:"AutoScalingGroupARN"`
	LaunchConfigurationName          string                  `xml:"LaunchConfigurationName,omitempty"`
	LaunchTemplate                   *asLaunchTemplate       `xml:"LaunchTemplate,omitempty"`
	MixedInstancesPolicy             *asMixedInstancesPolicy `xml:"MixedInstancesPolicy,omitempty"`
	MinSize                          int32                   `xml:"MinSize"`
	MaxSize                          int32                   `xml:"MaxSize"`
	DesiredCapacity                  int32                   `xml:"DesiredCapacity"`
	DefaultCooldown                  int32                   `xml:"DefaultCooldown"`
	AvailabilityZones                memberList[string]      `xml:"AvailabilityZones"`
	LoadBalancerNames                memberList[string]      `xml:"LoadBalancerNames"`
	TargetGroupARNs                  memberList[string]      `xml:"TargetGroupARNs"`
	HealthCheckType                  string                  `xml:"HealthCheckType"`
	HealthCheckGracePeriod           int32                   `xml:"HealthCheckGracePeriod"`
	Instances                        *memberList[asInstance] `xml:"Instances,omitempty"`
	CreatedTime                      string                  `xml:"CreatedTime"`
	SuspendedProcesses               memberList[string]      `xml:"SuspendedProcesses"`
	EnabledMetrics                   memberList[string]      `xml:"EnabledMetrics"`
	Tags                             memberList[asTag]       `xml:"Tags"`
	TerminationPolicies              memberList[string]      `xml:"TerminationPolicies"`
	NewInstancesProtectedFromScaleIn bool                    `xml:"NewInstancesProtectedFromScaleIn"`
	ServiceLinkedRoleARN             string                  `xml:"ServiceLinkedRoleARN"`
	CapacityRebalance                bool                    `xml:"CapacityRebalance"`
}

type asActivity struct {
	ActivityID           string `xml:"ActivityId"`
	AutoScalingGroupName string `xml:"AutoScalingGroupName"`
	AutoScalingGroupARN  string `xml:"AutoScalingGroupARN,omitempty"`
	Description          string `xml:"Description"`
	Cause                string `xml:"Cause"`
	StartTime            string `xml:"StartTime"`
	EndTime              string `xml:"EndTime,omitempty"`
	StatusCode           string `xml:"StatusCode"`
	StatusMessage        string `xml:"StatusMessage,omitempty"`
	Progress             int32  `xml:"Progress"`
	Details              string `xml:"Details"`
}

type describeAutoScalingGroupsResult struct {
	AutoScalingGroups memberList[asGroup] `xml:"AutoScalingGroups"`
	NextToken         string              `xml:"NextToken,omitempty"`
}

type describeAutoScalingInstancesResult struct {
	AutoScalingInstances memberList[asInstanceDetails] `xml:"AutoScalingInstances"`
	NextToken            string                        `xml:"NextToken,omitempty"`
}

type describeScalingActivitiesResult struct {
	Activities memberList[asActivity] `xml:"Activities"`
	NextToken  string                 `xml:"NextToken,omitempty"`
}

type terminateInstanceInAutoScalingGroupResult struct {
	Activity   *asActivity             `xml:"Activity,omitempty"`
	Activities *memberList[asActivity] `xml:"Activities,omitempty"`
}

// groupFilter returns a predicate for one DescribeAutoScalingGroups filter.
func groupFilter(f filter) (func(*group) bool, *APIError) {
	switch {
	case f.name == "tag-key":
		return func(g *group) bool {
			for k := range g.Tags {
				if slices.Contains(f.values, k) {
					return true
				}
			}
			return false
		}, nil
	case f.name == "tag-value":
		return func(g *group) bool {
			for _, v := range g.Tags {
				if slices.Contains(f.values, v) {
					return true
				}
			}
			return false
		}, nil
	case strings.HasPrefix(f.name, "tag:"):
		key := strings.TrimPrefix(f.name, "tag:")
		return func(g *group) bool {
			v, ok := g.Tags[key]
			return ok && slices.Contains(f.values, v)
		}, nil
	}
	return nil, validationError("Filter name '%s' is not valid. Valid filter names are tag-key, tag-value and tag:<key>.", f.name)
}

func (s *Server) describeAutoScalingGroups(q query) (any, *APIError) {
	limit, err := maxRecords(q, 100, 50)
	if err != nil {
		return nil, err
	}
	offset, err := autoScalingNextToken(q)
	if err != nil {
		return nil, err
	}
	names := q.list("AutoScalingGroupNames.member")
	// Up to 50 names, or up to MaxRecords when that is larger.
	if allowed := max(50, limit); len(names) > allowed {
		return nil, validationError("The number of AutoScalingGroupNames (%d) exceeds the maximum of %d.", len(names), allowed)
	}
	var preds []func(*group) bool
	for _, f := range q.autoScalingFilters() {
		p, err := groupFilter(f)
		if err != nil {
			return nil, err
		}
		preds = append(preds, p)
	}
	includeInstances := q.get("IncludeInstances") != "false"

	s.mu.Lock()
	defer s.mu.Unlock()
	var matched []*group
	for _, name := range slices.Sorted(maps.Keys(s.groups)) {
		g := s.groups[name]
		if (len(names) == 0 || slices.Contains(names, name)) && all(preds, g) {
			matched = append(matched, g)
		}
	}
	pg, next := page(matched, offset, limit)
	out := describeAutoScalingGroupsResult{NextToken: next}
	for _, g := range pg {
		out.AutoScalingGroups.Members = append(out.AutoScalingGroups.Members, s.wireGroup(g, includeInstances))
	}
	return out, nil
}

func wireLaunchTemplate(r LaunchTemplateRef) *asLaunchTemplate {
	v := r.Version
	if v == "" {
		v = "$Default"
	}
	return &asLaunchTemplate{r.ID, r.Name, v}
}

func (s *Server) wireGroup(g *group, includeInstances bool) asGroup {
	w := asGroup{
		AutoScalingGroupName: g.Name, AutoScalingGroupARN: g.arn,
		MinSize: g.MinSize, MaxSize: g.MaxSize, DesiredCapacity: g.DesiredCapacity,
		DefaultCooldown:                  300,
		AvailabilityZones:                memberList[string]{slices.Clone(g.AvailabilityZones)},
		HealthCheckType:                  "EC2",
		HealthCheckGracePeriod:           300,
		CreatedTime:                      formatTime(g.created),
		TerminationPolicies:              memberList[string]{[]string{"Default"}},
		NewInstancesProtectedFromScaleIn: g.NewInstancesProtectedFromScaleIn,
		LaunchConfigurationName:          g.LaunchConfigurationName,
		ServiceLinkedRoleARN:             fmt.Sprintf("arn:aws:iam::%s:role/aws-service-role/autoscaling.amazonaws.com/AWSServiceRoleForAutoScaling", s.accountID),
	}
	if g.LaunchTemplate != nil {
		w.LaunchTemplate = wireLaunchTemplate(*g.LaunchTemplate)
	}
	if p := g.MixedInstancesPolicy; p != nil {
		d := p.InstancesDistribution
		mp := &asMixedInstancesPolicy{
			LaunchTemplateSpecification: *wireLaunchTemplate(p.LaunchTemplate),
			InstancesDistribution: asDistribution{
				OnDemandAllocationStrategy:          d.OnDemandAllocationStrategy,
				OnDemandBaseCapacity:                d.OnDemandBaseCapacity,
				OnDemandPercentageAboveBaseCapacity: d.OnDemandPercentageAboveBaseCapacity,
				SpotAllocationStrategy:              d.SpotAllocationStrategy,
				SpotMaxPrice:                        d.SpotMaxPrice,
			},
		}
		if d.SpotAllocationStrategy == "lowest-price" {
			pools := int32(2)
			mp.InstancesDistribution.SpotInstancePools = &pools
		}
		for _, t := range p.InstanceTypes {
			mp.Overrides.Members = append(mp.Overrides.Members, asOverride{InstanceType: t})
		}
		if r := p.Requirements; r != nil && len(p.InstanceTypes) == 0 {
			rng := func(lo, hi int64) asRange {
				if hi == 0 {
					return asRange{Min: lo}
				}
				return asRange{Min: lo, Max: &hi}
			}
			mp.Overrides.Members = append(mp.Overrides.Members, asOverride{InstanceRequirements: &asInstanceRequirements{
				VCpuCount: rng(int64(r.VCPUMin), int64(r.VCPUMax)), MemoryMiB: rng(r.MemoryMiBMin, r.MemoryMiBMax)}})
		}
		w.MixedInstancesPolicy = mp
	}
	if includeInstances {
		w.Instances = &memberList[asInstance]{}
		for _, id := range g.members {
			w.Instances.Members = append(w.Instances.Members, wireGroupInstance(s.instances[id]))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(g.Tags)) {
		w.Tags.Members = append(w.Tags.Members, asTag{g.Name, "auto-scaling-group", k, g.Tags[k], true})
	}
	return w
}

func wireGroupInstance(i *instance) asInstance {
	return asInstance{
		InstanceID: i.ID, InstanceType: i.InstanceType, AvailabilityZone: i.AvailabilityZone,
		LifecycleState: i.LifecycleState, HealthStatus: i.HealthStatus,
		LaunchTemplate:       wireLaunchTemplate(i.LaunchTemplate),
		ProtectedFromScaleIn: i.ProtectedFromScaleIn,
	}
}

func (s *Server) describeAutoScalingInstances(q query) (any, *APIError) {
	limit, err := maxRecords(q, 50, 50)
	if err != nil {
		return nil, err
	}
	offset, err := autoScalingNextToken(q)
	if err != nil {
		return nil, err
	}
	ids := q.list("InstanceIds.member")
	if len(ids) > 50 {
		return nil, validationError("The number of instance ids that may be passed in is 50.")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var matched []*instance
	for _, id := range s.instanceOrder {
		i := s.instances[id]
		if i.Group == "" || i.State == StateTerminated || (len(ids) > 0 && !slices.Contains(ids, id)) {
			continue
		}
		matched = append(matched, i)
	}
	pg, next := page(matched, offset, limit)
	out := describeAutoScalingInstancesResult{NextToken: next}
	for _, i := range pg {
		out.AutoScalingInstances.Members = append(out.AutoScalingInstances.Members, asInstanceDetails{i.Group, wireGroupInstance(i)})
	}
	return out, nil
}

func (s *Server) describeScalingActivities(q query) (any, *APIError) {
	limit, err := maxRecords(q, 100, 100)
	if err != nil {
		return nil, err
	}
	offset, err := autoScalingNextToken(q)
	if err != nil {
		return nil, err
	}
	name, ids := q.get("AutoScalingGroupName"), q.list("ActivityIds.member")
	s.mu.Lock()
	defer s.mu.Unlock()
	var matched []*activity
	for k := len(s.activities) - 1; k >= 0; k-- {
		a := s.activities[k]
		if (name == "" || a.group == name) && (len(ids) == 0 || slices.Contains(ids, a.id)) {
			matched = append(matched, a)
		}
	}
	pg, next := page(matched, offset, limit)
	out := describeScalingActivitiesResult{NextToken: next}
	for _, a := range pg {
		out.Activities.Members = append(out.Activities.Members, s.wireActivity(a))
	}
	return out, nil
}

func (s *Server) wireActivity(a *activity) asActivity {
	w := asActivity{
		ActivityID: a.id, AutoScalingGroupName: a.group, Description: a.description, Cause: a.cause,
		StartTime: formatTime(a.start), StatusCode: a.statusCode, StatusMessage: a.statusMsg,
		Progress: a.progress, Details: a.details,
	}
	if g, ok := s.groups[a.group]; ok {
		w.AutoScalingGroupARN = g.arn
	}
	if !a.end.IsZero() {
		w.EndTime = formatTime(a.end)
	}
	return w
}

func groupNotFound(name string) *APIError {
	return validationError("AutoScalingGroup name not found - AutoScalingGroup '%s' not found", name)
}

func (s *Server) setDesiredCapacity(q query) (any, *APIError) {
	name := q.get("AutoScalingGroupName")
	desired, err := strconv.Atoi(q.get("DesiredCapacity"))
	if err != nil {
		return nil, validationError("Value '%s' at 'desiredCapacity' failed to satisfy constraint: Member must be a number", q.get("DesiredCapacity"))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.groups[name]
	if !ok {
		return nil, groupNotFound(name)
	}
	if int32(desired) > g.MaxSize {
		return nil, validationError("New SetDesiredCapacity value %d is above max value %d for the AutoScalingGroup.", desired, g.MaxSize)
	}
	if int32(desired) < g.MinSize {
		return nil, validationError("New SetDesiredCapacity value %d is below min value %d for the AutoScalingGroup.", desired, g.MinSize)
	}
	g.DesiredCapacity = int32(desired)
	return nil, nil
}

func (s *Server) terminateInstanceInAutoScalingGroup(q query) (any, *APIError) {
	decrement := q.get("ShouldDecrementDesiredCapacity") == "true"
	name, single, ids := q.get("AutoScalingGroupName"), q.get("InstanceId"), q.list("InstanceIds.member")
	switch {
	case single == "" && len(ids) == 0:
		return nil, validationError("Either InstanceId or InstanceIds must be specified.")
	case single != "" && len(ids) > 0:
		return nil, validationError("InstanceId and InstanceIds cannot be specified together.")
	case len(ids) > 0 && name == "":
		return nil, validationError("AutoScalingGroupName is required when InstanceIds is specified.")
	case len(ids) > 100:
		return nil, validationError("The number of instance ids that may be passed in is 100.")
	}
	batch := len(ids) > 0
	if !batch {
		ids = []string{single}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	var targets []*instance
	for _, id := range slices.Compact(slices.Clone(ids)) {
		i, ok := s.instances[id]
		if !ok || i.Group == "" || i.State == StateTerminated || (name != "" && i.Group != name) {
			return nil, validationError("Instance Id not found - No managed instance found for instance ID: %s", id)
		}
		targets = append(targets, i)
	}
	// Check the whole batch against the group's minimum before changing
	// anything; instances already terminating do not decrement again.
	if decrement {
		per := map[string]int32{}
		for _, i := range targets {
			if !strings.HasPrefix(i.LifecycleState, LifecycleTerminating) {
				per[i.Group]++
			}
		}
		for gname, n := range per {
			g := s.groups[gname]
			if g.DesiredCapacity-n < g.MinSize {
				return nil, validationError("Currently, desiredSize equals minSize (%d). Terminating instance without replacement will violate group's min size constraint. Either set shouldDecrementDesiredCapacity flag to false or lower group's min size.", g.MinSize)
			}
		}
	}
	var acts []asActivity
	for _, i := range targets {
		if strings.HasPrefix(i.LifecycleState, LifecycleTerminating) {
			// Asked again: answer with the termination under way.
			if a := s.pendingActivity(i.ID); a != nil {
				acts = append(acts, s.wireActivity(a))
				continue
			}
		}
		g := s.groups[i.Group]
		cause := fmt.Sprintf("At %s instance %s was taken out of service in response to a user request.", now.UTC().Format(time.RFC3339), i.ID)
		if decrement {
			cause = fmt.Sprintf("At %s instance %s was taken out of service in response to a user request, shrinking the capacity from %d to %d.",
				now.UTC().Format(time.RFC3339), i.ID, g.DesiredCapacity, g.DesiredCapacity-1)
			g.DesiredCapacity--
		}
		s.autoScalingTerminateLocked(g, i)
		a := &activity{
			group: g.Name, instanceID: i.ID, description: "Terminating EC2 instance: " + i.ID, cause: cause,
			details: zoneDetails(i.AvailabilityZone), statusCode: "InProgress", start: now,
		}
		s.addActivity(a)
		acts = append(acts, s.wireActivity(a))
	}
	if batch {
		return terminateInstanceInAutoScalingGroupResult{Activities: &memberList[asActivity]{acts}}, nil
	}
	return terminateInstanceInAutoScalingGroupResult{Activity: &acts[0]}, nil
}
