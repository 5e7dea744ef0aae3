package aws

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"spotter.dev/spotter/internal/cloud"
	"spotter.dev/spotter/internal/cloud/internal/providerkit"
)

// NodeGroup is an Auto Scaling group.
type NodeGroup struct {
	p    *Provider
	name string
	// What the group read said, at the time of the read (sizes are re-read
	// by TargetSize and the writes).
	min, max  int
	spot      bool
	zones     []string
	tags      map[string]string
	template  launchTemplate
	overrides []string // instance types of a MixedInstancesPolicy
	// requirements are a MixedInstancesPolicy's attribute-based instance
	// type selection, when its overrides give no types.
	requirements *astypes.InstanceRequirements
	// The on-demand share of a MixedInstancesPolicy (nil: none): the first
	// onDemandBase instances, then onDemandPercent % of those above.
	onDemandBase, onDemandPercent int32
	mixed                         bool
	desired                       int32
	// protected are the instances protected from scale-in, at the read.
	protected map[string]bool
}

// launchTemplate names a launch template and version.
type launchTemplate struct{ id, name, version string }

func (t launchTemplate) key() string { return t.id + "/" + t.name + "@" + t.version }

// templateFacts is what the provider reads of a launch template version.
type templateFacts struct {
	instanceType string
	imageID      string
	spot         bool
}

// typeFacts is what a template needs of an instance type.
type typeFacts struct {
	cpu             int32
	memMiB          int64
	arch            string // amd64 or arm64, as kubernetes.io/arch says it
	gpus            int32  // NVIDIA
	enis, ipsPerENI int32  // 0: not described
}

// readGroups returns the groups, read at most every GroupTTL.
func (p *Provider) readGroups(ctx context.Context) ([]*NodeGroup, error) {
	p.mu.Lock()
	if p.groups != nil && p.clock.Since(p.groupsAt) < p.opts.GroupTTL {
		defer p.mu.Unlock()
		return p.groups, nil
	}
	p.mu.Unlock()
	raw, err := p.describeGroups(ctx, nil)
	if err != nil {
		return nil, err
	}
	groups := make([]*NodeGroup, 0, len(raw))
	var leftOut []cloud.LeftOut
	for _, g := range raw {
		ng, err := p.nodeGroup(ctx, g)
		switch {
		case err == nil:
			groups = append(groups, ng)
		case cloud.IsThrottled(err) || ctx.Err() != nil:
			// Nothing is known of the group: no list without it.
			return nil, err
		default:
			// A group that cannot be read (a launch template deleted or
			// not readable) or used (a launch configuration) is left
			// out; the others are Spotter's still.
			leftOut = append(leftOut, cloud.LeftOut{Group: aws.ToString(g.AutoScalingGroupName), Err: err})
		}
	}
	slices.SortFunc(groups, func(a, b *NodeGroup) int { return strings.Compare(a.name, b.name) })
	slices.SortFunc(leftOut, func(a, b cloud.LeftOut) int { return strings.Compare(a.Group, b.Group) })
	p.mu.Lock()
	defer p.mu.Unlock()
	p.groups, p.groupsAt, p.leftOut = groups, p.clock.Now(), leftOut
	return groups, nil
}

// LeftOut implements cloud.LeftOutReporter: the groups the last read left
// out.
func (p *Provider) LeftOut() []cloud.LeftOut {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.leftOut)
}

// invalidate makes the next read of the groups ask AWS.
func (p *Provider) invalidate() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.groups = nil
}

// describeGroups reads the provider's groups, or only those named.
func (p *Provider) describeGroups(ctx context.Context, names []string) ([]astypes.AutoScalingGroup, error) {
	in := &autoscaling.DescribeAutoScalingGroupsInput{}
	switch {
	case len(names) > 0:
		in.AutoScalingGroupNames = names
	case len(p.opts.GroupNames) > 0:
		in.AutoScalingGroupNames = p.opts.GroupNames
	default:
		in.Filters = []astypes.Filter{
			{Name: aws.String("tag-key"), Values: []string{EnabledTag}},
			{Name: aws.String("tag-key"), Values: []string{ClusterTagPrefix + p.opts.ClusterName}},
		}
	}
	var out []astypes.AutoScalingGroup
	for {
		resp, err := p.asg.DescribeAutoScalingGroups(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("describing Auto Scaling groups: %w", mapError("", err))
		}
		out = append(out, resp.AutoScalingGroups...)
		if resp.NextToken == nil || *resp.NextToken == "" {
			return out, nil
		}
		in.NextToken = resp.NextToken
	}
}

// nodeGroup builds a NodeGroup from a group's description, reading its launch
// template (cached) to tell whether it is spot.
//
// A group with a MixedInstancesPolicy is spot when what it adds from now on
// is spot: no on-demand share above its on-demand base
// (OnDemandPercentageAboveBaseCapacity 0; Auto Scaling's default is 100)
// and a desired capacity at or above that base, so that every instance it
// adds is spot while those of the base stay on-demand (EC2 says which is
// which, instance by instance). Otherwise it launches on-demand instances as
// it grows, and is not spot. A group of a launch configuration is refused:
// launch configurations cannot use the instance types EC2 added since 2023,
// and AWS asks for launch templates in their place.
func (p *Provider) nodeGroup(ctx context.Context, g astypes.AutoScalingGroup) (*NodeGroup, error) {
	ng := &NodeGroup{p: p, name: aws.ToString(g.AutoScalingGroupName), min: int(aws.ToInt32(g.MinSize)), max: int(aws.ToInt32(g.MaxSize)),
		zones: g.AvailabilityZones, tags: map[string]string{}, desired: aws.ToInt32(g.DesiredCapacity), protected: map[string]bool{}}
	for _, t := range g.Tags {
		ng.tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	for _, i := range g.Instances {
		if aws.ToBool(i.ProtectedFromScaleIn) {
			ng.protected[aws.ToString(i.InstanceId)] = true
		}
	}
	spec := g.LaunchTemplate
	if mip := g.MixedInstancesPolicy; mip != nil {
		ng.mixed = true
		if mip.LaunchTemplate != nil {
			spec = mip.LaunchTemplate.LaunchTemplateSpecification
			for _, o := range mip.LaunchTemplate.Overrides {
				if t := aws.ToString(o.InstanceType); t != "" {
					ng.overrides = append(ng.overrides, t)
				} else if o.InstanceRequirements != nil && ng.requirements == nil {
					ng.requirements = o.InstanceRequirements
				}
			}
		}
		ng.onDemandPercent = 100
		if d := mip.InstancesDistribution; d != nil {
			ng.onDemandBase = aws.ToInt32(d.OnDemandBaseCapacity)
			if d.OnDemandPercentageAboveBaseCapacity != nil {
				ng.onDemandPercent = *d.OnDemandPercentageAboveBaseCapacity
			}
		}
		ng.spot = ng.onDemandPercent == 0 && ng.desired >= ng.onDemandBase
	}
	if spec == nil && aws.ToString(g.LaunchConfigurationName) != "" {
		return nil, fmt.Errorf("the Auto Scaling group %s uses launch configuration %s: Spotter reads launch templates only "+
			"(launch configurations cannot use the instance types EC2 added since 2023); move the group to a launch template",
			ng.name, aws.ToString(g.LaunchConfigurationName))
	}
	if spec != nil {
		ng.template = launchTemplate{id: aws.ToString(spec.LaunchTemplateId), name: aws.ToString(spec.LaunchTemplateName), version: aws.ToString(spec.Version)}
		if ng.template.version == "" {
			ng.template.version = "$Default"
		}
		tf, err := p.launchTemplate(ctx, ng.template)
		if err != nil {
			return nil, fmt.Errorf("the Auto Scaling group %s: %w", ng.name, err)
		}
		if g.MixedInstancesPolicy == nil && tf.spot {
			ng.spot = true
		}
	}
	return ng, nil
}

// Mix says how a group of a MixedInstancesPolicy splits on-demand and spot
// ("" for a group without one): a group that is partly spot says so, and
// what it adds is spot only once its on-demand base runs and when no
// on-demand share lies above it.
func (g *NodeGroup) Mix() string {
	if !g.mixed {
		return ""
	}
	return fmt.Sprintf("on-demand base %d, %d %% on-demand above it, desired %d", g.onDemandBase, g.onDemandPercent, g.desired)
}

// launchTemplate reads a launch template version, cached: "$Latest" and
// "$Default" are read again with the groups.
func (p *Provider) launchTemplate(ctx context.Context, t launchTemplate) (templateFacts, error) {
	fixed := !strings.HasPrefix(t.version, "$")
	p.mu.Lock()
	f, ok := p.templates[t.key()]
	p.mu.Unlock()
	if ok && fixed {
		return f, nil
	}
	in := &ec2.DescribeLaunchTemplateVersionsInput{Versions: []string{t.version}}
	if t.id != "" {
		in.LaunchTemplateId = aws.String(t.id)
	} else {
		in.LaunchTemplateName = aws.String(t.name)
	}
	resp, err := p.ec2.DescribeLaunchTemplateVersions(ctx, in)
	if err != nil {
		return templateFacts{}, fmt.Errorf("describing launch template %s%s version %s: %w", t.id, t.name, t.version, mapError("", err))
	}
	if len(resp.LaunchTemplateVersions) == 0 || resp.LaunchTemplateVersions[0].LaunchTemplateData == nil {
		return templateFacts{}, fmt.Errorf("launch template %s%s has no version %s", t.id, t.name, t.version)
	}
	d := resp.LaunchTemplateVersions[0].LaunchTemplateData
	f = templateFacts{instanceType: string(d.InstanceType), imageID: aws.ToString(d.ImageId)}
	if d.InstanceMarketOptions != nil && d.InstanceMarketOptions.MarketType == ec2types.MarketTypeSpot {
		f.spot = true
	}
	p.mu.Lock()
	p.templates[t.key()] = f
	p.mu.Unlock()
	return f, nil
}

// ID implements cloud.NodeGroup: the group's name.
func (g *NodeGroup) ID() string { return g.name }

// what names the group in errors.
func (g *NodeGroup) what() string { return "the Auto Scaling group " + g.name }

// Spot implements cloud.NodeGroup.
func (g *NodeGroup) Spot() bool { return g.spot }

// MinSize implements cloud.NodeGroup.
func (g *NodeGroup) MinSize() int { return g.min }

// MaxSize implements cloud.NodeGroup.
func (g *NodeGroup) MaxSize() int { return g.max }

// current reads the group now: its desired capacity and instances.
func (g *NodeGroup) current(ctx context.Context) (astypes.AutoScalingGroup, error) {
	groups, err := g.p.describeGroups(ctx, []string{g.name})
	if err != nil {
		return astypes.AutoScalingGroup{}, err
	}
	if len(groups) == 0 {
		return astypes.AutoScalingGroup{}, cloud.NewNotFoundError(fmt.Errorf("the Auto Scaling group %s", g.name))
	}
	return groups[0], nil
}

// TargetSize implements cloud.NodeGroup: the desired capacity.
func (g *NodeGroup) TargetSize(ctx context.Context) (int, error) {
	cur, err := g.current(ctx)
	if err != nil {
		return 0, err
	}
	return int(aws.ToInt32(cur.DesiredCapacity)), nil
}

// instanceType is the type of the group's instances as the cluster
// autoscaler reads it (cloudprovider/aws, getInstanceTypeForAsg): a
// MixedInstancesPolicy's first override, which Auto Scaling launches in
// place of the launch template's type; else the first type EC2 matches to
// its attribute-based requirements
// (GetInstanceTypesFromInstanceRequirements); else the launch template's.
func (g *NodeGroup) instanceType(ctx context.Context) (string, error) {
	if len(g.overrides) > 0 {
		return g.overrides[0], nil
	}
	if g.requirements != nil {
		return g.typeFromRequirements(ctx)
	}
	if g.template.key() != (launchTemplate{}).key() {
		f, err := g.p.launchTemplate(ctx, g.template)
		if err != nil {
			return "", err
		}
		if f.instanceType != "" {
			return f.instanceType, nil
		}
	}
	return "", fmt.Errorf("the Auto Scaling group %s: neither its overrides nor its launch template name an instance type", g.name)
}

// PricePerHour implements cloud.NodeGroup: the on-demand price of its
// instance type (instanceType, as last read), or the spot price in its
// first zone as last read.
func (g *NodeGroup) PricePerHour() (float64, bool) {
	g.p.mu.Lock()
	f, ok := g.p.templates[g.template.key()]
	byReq, reqOK := g.p.requirementTypes[g.name]
	g.p.mu.Unlock()
	var typ string
	switch {
	case len(g.overrides) > 0:
		typ = g.overrides[0]
	case g.requirements != nil && reqOK:
		typ = byReq.typ
	case ok:
		typ = f.instanceType
	}
	if typ == "" {
		return 0, false
	}
	zone := ""
	if len(g.zones) > 0 {
		zone = g.zones[0]
	}
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	return g.p.priceLocked(typ, zone, g.spot)
}

// IncreaseSize implements cloud.NodeGroup: SetDesiredCapacity.
func (g *NodeGroup) IncreaseSize(ctx context.Context, delta int) error {
	if err := providerkit.CheckIncrease(delta); err != nil {
		return err
	}
	cur, err := g.current(ctx)
	if err != nil {
		return err
	}
	want := int(aws.ToInt32(cur.DesiredCapacity)) + delta
	if err := providerkit.CheckMax(g.what(), delta, want, int(aws.ToInt32(cur.MaxSize))); err != nil {
		return err
	}
	return g.setDesired(ctx, want)
}

func (g *NodeGroup) setDesired(ctx context.Context, n int) error {
	defer g.p.invalidate()
	_, err := g.p.asg.SetDesiredCapacity(ctx, &autoscaling.SetDesiredCapacityInput{
		AutoScalingGroupName: aws.String(g.name), DesiredCapacity: aws.Int32(int32(n)), HonorCooldown: aws.Bool(false)})
	if err != nil {
		return fmt.Errorf("setting the desired capacity of Auto Scaling group %s to %d: %w", g.name, n, mapError(g.name, err))
	}
	return nil
}

// live is the instances of a group that count towards its desired capacity:
// not terminating or terminated.
func live(cur astypes.AutoScalingGroup) []astypes.Instance {
	var out []astypes.Instance
	for _, i := range cur.Instances {
		s := string(i.LifecycleState)
		if strings.HasPrefix(s, "Terminat") || strings.HasPrefix(s, "Detach") || s == "Standby" {
			continue
		}
		out = append(out, i)
	}
	return out
}

// DecreaseTargetSize implements cloud.NodeGroup: it lowers the desired
// capacity only by capacity not yet launched.
func (g *NodeGroup) DecreaseTargetSize(ctx context.Context, delta int) error {
	if err := providerkit.CheckDecrease(delta); err != nil {
		return err
	}
	cur, err := g.current(ctx)
	if err != nil {
		return err
	}
	desired := int(aws.ToInt32(cur.DesiredCapacity))
	unlaunched := max(desired-len(live(cur)), 0)
	if err := providerkit.CheckCancel(g.what(), delta, unlaunched, "instance(s) not yet launched", desired, int(aws.ToInt32(cur.MinSize))); err != nil {
		return err
	}
	return g.setDesired(ctx, desired-delta)
}

// DeleteNodes implements cloud.NodeGroup: it checks every node first, then
// terminates each instance through the group, lowering the desired capacity,
// and deletes the Node objects.
func (g *NodeGroup) DeleteNodes(ctx context.Context, nodes []*corev1.Node) error {
	cur, err := g.current(ctx)
	if err != nil {
		return err
	}
	in, protected := map[string]bool{}, map[string]bool{}
	for _, i := range live(cur) {
		in[aws.ToString(i.InstanceId)] = true
		protected[aws.ToString(i.InstanceId)] = aws.ToBool(i.ProtectedFromScaleIn)
	}
	ids := make([]string, len(nodes))
	for i, n := range nodes {
		if err := cloud.CheckDeletable(n); err != nil {
			return err
		}
		ids[i] = InstanceID(n)
		if !in[ids[i]] {
			return fmt.Errorf("node %s (instance %q) in Auto Scaling group %s: %w", n.Name, ids[i], g.name, cloud.ErrNotInNodeGroup)
		}
		// Auto Scaling lets TerminateInstanceInAutoScalingGroup end a
		// protected instance; Spotter takes the protection as the
		// operator's word.
		if protected[ids[i]] {
			return fmt.Errorf("node %s (instance %s) is protected from scale-in in Auto Scaling group %s: %w", n.Name, ids[i], g.name, cloud.ErrProtected)
		}
	}
	if err := providerkit.CheckDelete(g.what(), len(nodes), int(aws.ToInt32(cur.DesiredCapacity)), int(aws.ToInt32(cur.MinSize))); err != nil {
		return err
	}
	defer g.p.invalidate()
	for i, n := range nodes {
		_, err := g.p.asg.TerminateInstanceInAutoScalingGroup(ctx, &autoscaling.TerminateInstanceInAutoScalingGroupInput{
			InstanceId: aws.String(ids[i]), ShouldDecrementDesiredCapacity: aws.Bool(true)})
		if err != nil {
			return fmt.Errorf("terminating instance %s of node %s in Auto Scaling group %s: %w", ids[i], n.Name, g.name, mapError(g.name, err))
		}
		g.p.forget(ids[i])
		if err := providerkit.DeleteNode(ctx, g.p.kube, n.Name); err != nil {
			return err
		}
	}
	return nil
}

// Nodes implements cloud.NodeGroup: the group's instances, with their Node
// names, and one InstanceCreating per unit of desired capacity not yet
// launched, whose Err is the group's last failed launch, if any.
func (g *NodeGroup) Nodes(ctx context.Context) ([]cloud.Instance, error) {
	cur, err := g.current(ctx)
	if err != nil {
		return nil, err
	}
	running := live(cur)
	byID := map[string]string{}
	if len(running) > 0 {
		if byID, err = providerkit.NodeNames(ctx, g.p.kube, instanceIDOf); err != nil {
			return nil, err
		}
	}
	out := make([]cloud.Instance, 0, len(running))
	for _, i := range running {
		id := aws.ToString(i.InstanceId)
		inst := cloud.Instance{ID: providerID(aws.ToString(i.AvailabilityZone), id), NodeName: byID[id], NodeGroup: g.name, Spot: g.spot,
			InstanceType: aws.ToString(i.InstanceType), Zone: aws.ToString(i.AvailabilityZone), State: cloud.InstanceRunning}
		if strings.HasPrefix(string(i.LifecycleState), "Pending") {
			inst.State = cloud.InstanceCreating
		}
		out = append(out, inst)
	}
	if waiting := int(aws.ToInt32(cur.DesiredCapacity)) - len(running); waiting > 0 {
		late, err := g.lastFailure(ctx)
		if err != nil {
			return nil, err
		}
		for range waiting {
			out = append(out, cloud.Instance{NodeGroup: g.name, Spot: g.spot, State: cloud.InstanceCreating, Err: late})
		}
	}
	return out, nil
}

// lastFailure reads the group's latest scaling activity and, when it failed,
// returns why, typed (a *cloud.CapacityUnavailableError for a shortage).
func (g *NodeGroup) lastFailure(ctx context.Context) (error, error) {
	resp, err := g.p.asg.DescribeScalingActivities(ctx, &autoscaling.DescribeScalingActivitiesInput{AutoScalingGroupName: aws.String(g.name), MaxRecords: aws.Int32(1)})
	if err != nil {
		return nil, fmt.Errorf("describing the scaling activities of Auto Scaling group %s: %w", g.name, mapError(g.name, err))
	}
	if len(resp.Activities) == 0 || resp.Activities[0].StatusCode != astypes.ScalingActivityStatusCodeFailed {
		return nil, nil
	}
	msg := aws.ToString(resp.Activities[0].StatusMessage)
	cause := errors.New(msg)
	// A spot launch's message names the code; an on-demand one says it in
	// words.
	if strings.Contains(msg, "do not have sufficient") {
		return cloud.NewCapacityUnavailableError(g.name, cause), nil
	}
	for c := range capacityCodes {
		if strings.Contains(msg, c) {
			return cloud.NewCapacityUnavailableError(g.name, cause), nil
		}
	}
	return cause, nil
}

// TemplateNode implements cloud.NodeGroup. A group with a Ready Node copies
// it (cloud.TemplateFromNode, read at most every
// providerkit.LiveTemplateTTL), as the cluster autoscaler does. A group
// without one gets a node of its instance type as EC2 describes it
// (DescribeInstanceTypes) and as the EKS node image sets its kubelet up
// (eksTemplateResources): CPU, memory, NVIDIA GPUs, architecture, max pods
// from the type's network interfaces, allocatable after kube-reserved and the
// eviction threshold; in the group's first zone, with the labels, taints and
// resources of its node-template tags (which win) and the EKS capacity-type
// label.
func (g *NodeGroup) TemplateNode(ctx context.Context) (*corev1.Node, error) {
	name := "template-" + g.name
	if live, err := g.p.live.Template(ctx, g.name, name, g.Nodes); err != nil || live != nil {
		return live, err
	}
	typ, err := g.instanceType(ctx)
	if err != nil {
		return nil, err
	}
	size, err := g.p.instanceTypeSize(ctx, typ)
	if err != nil {
		return nil, err
	}
	zone := ""
	if len(g.zones) > 0 {
		zone = g.zones[0]
	}
	capacity, allocatable := eksTemplateResources(size)
	capType := "ON_DEMAND"
	if g.spot {
		capType = "SPOT"
	}
	labels := map[string]string{corev1.LabelHostname: name, corev1.LabelInstanceTypeStable: typ, corev1.LabelTopologyZone: zone,
		corev1.LabelOSStable: "linux", corev1.LabelArchStable: size.arch, CapacityTypeLabel: capType}
	var taints []corev1.Taint
	keys := make([]string, 0, len(g.tags))
	for k := range g.tags {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := g.tags[k]
		rest, ok := strings.CutPrefix(k, NodeTemplateTagPrefix)
		if !ok {
			continue
		}
		switch kind, key, _ := strings.Cut(rest, "/"); kind {
		case "label":
			labels[key] = v
		case "taint":
			value, effect, found := strings.Cut(v, ":")
			if !found {
				return nil, fmt.Errorf("the Auto Scaling group %s: tag %s=%q: a taint tag's value is value:effect", g.name, k, v)
			}
			taints = append(taints, corev1.Taint{Key: key, Value: value, Effect: corev1.TaintEffect(effect)})
		case "resources":
			q, err := resource.ParseQuantity(v)
			if err != nil {
				return nil, fmt.Errorf("the Auto Scaling group %s: tag %s=%q: %w", g.name, k, v, err)
			}
			// What the operator says of the group wins over the estimate.
			capacity[corev1.ResourceName(key)], allocatable[corev1.ResourceName(key)] = q, q.DeepCopy()
		}
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       corev1.NodeSpec{Taints: taints},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: allocatable,
			NodeInfo:   corev1.NodeSystemInfo{Architecture: size.arch, OperatingSystem: "linux"},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
	return node, nil
}

// eksTemplateResources is the capacity and allocatable of a new node of an
// instance type as the EKS node images (Amazon Linux 2 and 2023) configure
// the kubelet, without prefix delegation:
//   - max pods = ENIs * (IPv4 addresses per ENI - 1) + 2 (the VPC CNI gives
//     each pod a secondary address; the table eni-max-pods.txt the images
//     ship is this formula); 110, the kubelet's default, when EC2 gives no
//     network figures;
//   - kube-reserved memory = 255 MiB + 11 MiB per pod, and the eviction
//     threshold memory.available 100 MiB;
//   - kube-reserved CPU = 6 % of the first core, 1 % of the second, 0.5 % of
//     the third and fourth, 0.25 % of each further one (TieredCPUReserve);
//   - nvidia.com/gpu = the type's NVIDIA GPUs.
func eksTemplateResources(t typeFacts) (capacity, allocatable corev1.ResourceList) {
	pods := int64(110)
	if t.enis > 0 && t.ipsPerENI > 1 {
		pods = int64(t.enis)*int64(t.ipsPerENI-1) + 2
	}
	capacity = corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(int64(t.cpu), resource.DecimalSI),
		corev1.ResourceMemory: cloud.MiB(t.memMiB),
		corev1.ResourcePods:   *resource.NewQuantity(pods, resource.DecimalSI),
	}
	if t.gpus > 0 {
		capacity[cloud.NvidiaGPU] = *resource.NewQuantity(int64(t.gpus), resource.DecimalSI)
	}
	allocatable = capacity.DeepCopy()
	allocatable[corev1.ResourceCPU] = cloud.Milli(max(0, int64(t.cpu)*1000-providerkit.TieredCPUReserve(int64(t.cpu))))
	allocatable[corev1.ResourceMemory] = cloud.MiB(max(0, t.memMiB-255-11*pods-100))
	return capacity, allocatable
}

// instanceTypeSize reads an instance type's vCPUs and memory, cached.
func (p *Provider) instanceTypeSize(ctx context.Context, typ string) (typeFacts, error) {
	p.mu.Lock()
	f, ok := p.types[typ]
	p.mu.Unlock()
	if ok {
		return f, nil
	}
	resp, err := p.ec2.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []ec2types.InstanceType{ec2types.InstanceType(typ)}})
	if err != nil {
		return typeFacts{}, fmt.Errorf("describing instance type %s: %w", typ, mapError("", err))
	}
	if len(resp.InstanceTypes) == 0 || resp.InstanceTypes[0].VCpuInfo == nil || resp.InstanceTypes[0].MemoryInfo == nil {
		return typeFacts{}, fmt.Errorf("instance type %s: EC2 does not describe it", typ)
	}
	f = typeFactsOf(resp.InstanceTypes[0])
	p.mu.Lock()
	p.types[typ] = f
	p.mu.Unlock()
	return f, nil
}

// typeFactsOf is what a template needs of EC2's description of an instance
// type.
func typeFactsOf(it ec2types.InstanceTypeInfo) typeFacts {
	f := typeFacts{cpu: aws.ToInt32(it.VCpuInfo.DefaultVCpus), memMiB: aws.ToInt64(it.MemoryInfo.SizeInMiB), arch: "amd64"}
	if it.ProcessorInfo != nil && slices.Contains(it.ProcessorInfo.SupportedArchitectures, ec2types.ArchitectureTypeArm64) &&
		!slices.Contains(it.ProcessorInfo.SupportedArchitectures, ec2types.ArchitectureTypeX8664) {
		f.arch = "arm64"
	}
	if it.NetworkInfo != nil {
		f.enis, f.ipsPerENI = aws.ToInt32(it.NetworkInfo.MaximumNetworkInterfaces), aws.ToInt32(it.NetworkInfo.Ipv4AddressesPerInterface)
	}
	if it.GpuInfo != nil {
		for _, gpu := range it.GpuInfo.Gpus {
			if strings.EqualFold(aws.ToString(gpu.Manufacturer), "NVIDIA") {
				f.gpus += aws.ToInt32(gpu.Count)
			}
		}
	}
	return f
}

// RefreshPrices reads the current spot prices of the given instance types
// (Linux/UNIX) whose prices are older than PriceTTL, in one paged
// DescribeSpotPriceHistory.
func (p *Provider) RefreshPrices(ctx context.Context, types []string) error {
	now := p.clock.Now()
	p.mu.Lock()
	var stale []ec2types.InstanceType
	for _, t := range types {
		if at, ok := p.pricesAt[t]; !ok || now.Sub(at) >= p.opts.PriceTTL {
			stale = append(stale, ec2types.InstanceType(t))
		}
	}
	p.mu.Unlock()
	if len(stale) == 0 {
		return nil
	}
	in := &ec2.DescribeSpotPriceHistoryInput{InstanceTypes: stale, ProductDescriptions: []string{"Linux/UNIX"}, StartTime: aws.Time(now)}
	latest := map[string]time.Time{}
	prices := map[string]float64{}
	for {
		resp, err := p.ec2.DescribeSpotPriceHistory(ctx, in)
		if err != nil {
			return fmt.Errorf("describing spot prices: %w", mapError("", err))
		}
		for _, sp := range resp.SpotPriceHistory {
			k := string(sp.InstanceType) + "/" + aws.ToString(sp.AvailabilityZone)
			v, err := strconv.ParseFloat(aws.ToString(sp.SpotPrice), 64)
			if err != nil {
				continue
			}
			if at := aws.ToTime(sp.Timestamp); at.After(latest[k]) || latest[k].IsZero() {
				latest[k], prices[k] = at, v
			}
		}
		if resp.NextToken == nil || *resp.NextToken == "" {
			break
		}
		in.NextToken = resp.NextToken
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, v := range prices {
		p.prices[k] = v
	}
	for _, t := range stale {
		p.pricesAt[string(t)] = now
	}
	return nil
}

// InstanceTypePrice implements cloud.PriceReader: the price of an instance
// type in zone (spot prices are per zone; on-demand ones per the provider's
// region, whatever region says), as priceLocked gives it.
func (p *Provider) InstanceTypePrice(typ, _, zone string, spot bool) (float64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.priceLocked(typ, zone, spot)
}

// priceLocked is an instance's hourly price: spot from the last spot price
// read for its type and zone (else the configured spot price), on-demand from
// the configuration, else from the table Spotter ships for the provider's
// region (OnDemandListPrice). p.mu is held.
func (p *Provider) priceLocked(typ, zone string, spot bool) (float64, bool) {
	conf, configured := p.opts.Pricing.InstanceTypes[typ]
	if spot {
		if v, ok := p.prices[typ+"/"+zone]; ok {
			return v, true
		}
		return conf.Spot, configured && conf.Spot > 0
	}
	if configured && conf.OnDemand > 0 {
		return conf.OnDemand, true
	}
	return OnDemandListPrice(p.opts.Region, typ)
}
