// Package aws is the cloud.Provider of Amazon EC2: the instance behind each
// node from DescribeInstances (spot or not, type, zone, Auto Scaling group),
// and node groups that are Auto Scaling groups, discovered by the cluster
// autoscaler's tags or named in the configuration. It speaks to AWS through
// the official SDK (aws-sdk-go-v2) only; credentials and region come from the
// SDK's standard chain (environment, shared files, web identity, the instance
// metadata service), and its endpoints from the standard variables
// (AWS_ENDPOINT_URL_EC2, AWS_ENDPOINT_URL_AUTO_SCALING), which is how the
// tests point it at the project's emulator (internal/emulator/awsapi).
//
// # Calls
//
// Instances takes every node at once and asks DescribeInstances for the IDs it
// has not seen, up to 1,000 a call; what never changes for an instance (type,
// zone, lifecycle, group) is cached for its life. Groups are read with one
// DescribeAutoScalingGroups (paged) and cached for GroupTTL; a write to a
// group drops the cache. Spot prices come from DescribeSpotPriceHistory,
// cached for PriceTTL; on-demand prices from the pricing configuration, else
// from the table of list prices Spotter ships (OnDemandListPrice).
//
// # Spot or not
//
// An instance is spot when EC2 says so (InstanceLifecycle "spot"). A group is
// spot when every instance it adds from now on is spot: a
// MixedInstancesPolicy with OnDemandPercentageAboveBaseCapacity 0 whose
// desired capacity has reached its OnDemandBaseCapacity (Mix says how a
// group splits), or a launch template that asks for the spot market
// (InstanceMarketOptions.MarketType "spot"). A group with an on-demand share
// above its base is not spot. Its instance type is its first override's, else
// the first EC2 matches to its InstanceRequirements, else its launch
// template's; groups of launch configurations are refused.
//
// # Protection
//
// An instance protected from scale-in, or in no group (unless
// TerminateOutsideGroups), is Protected: the deletes refuse it with
// cloud.ErrProtected.
//
// # Errors
//
// RequestLimitExceeded (EC2) and Throttling (Auto Scaling) become
// *cloud.ThrottledError; InsufficientInstanceCapacity and the like
// *cloud.CapacityUnavailableError; a missing instance *cloud.NotFoundError.
package aws

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"spotter.dev/spotter/internal/cloud"
	"spotter.dev/spotter/internal/cloud/internal/providerkit"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// ProviderName is the provider's Name.
const ProviderName = "aws"

// Tags of the cluster autoscaler's auto-discovery, which Spotter reads too.
const (
	// EnabledTag marks a group the autoscaler (and Spotter) may scale.
	EnabledTag = "k8s.io/cluster-autoscaler/enabled"
	// ClusterTagPrefix, followed by the cluster's name, marks the cluster's
	// groups.
	ClusterTagPrefix = "k8s.io/cluster-autoscaler/"
	// NodeTemplateTagPrefix starts the tags that describe a group's nodes for
	// scale from zero: label/<key>, taint/<key> (value:effect) and
	// resources/<name>.
	NodeTemplateTagPrefix = "k8s.io/cluster-autoscaler/node-template/"
	// groupNameTag is the tag EC2 Auto Scaling puts on its instances.
	groupNameTag = "aws:autoscaling:groupName"
	// CapacityTypeLabel is the label EKS puts on its nodes (SPOT or
	// ON_DEMAND); template nodes carry it so that the planner classifies them.
	CapacityTypeLabel = "eks.amazonaws.com/capacityType"
)

// maxIDsPerCall is DescribeInstances' limit on instance IDs.
const maxIDsPerCall = 1000

// EC2API is the part of the EC2 client the provider uses.
type EC2API interface {
	DescribeInstances(context.Context, *ec2.DescribeInstancesInput, ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error)
	TerminateInstances(context.Context, *ec2.TerminateInstancesInput, ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error)
	DescribeSpotPriceHistory(context.Context, *ec2.DescribeSpotPriceHistoryInput, ...func(*ec2.Options)) (*ec2.DescribeSpotPriceHistoryOutput, error)
	DescribeLaunchTemplateVersions(context.Context, *ec2.DescribeLaunchTemplateVersionsInput, ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplateVersionsOutput, error)
	DescribeInstanceTypes(context.Context, *ec2.DescribeInstanceTypesInput, ...func(*ec2.Options)) (*ec2.DescribeInstanceTypesOutput, error)
	GetInstanceTypesFromInstanceRequirements(context.Context, *ec2.GetInstanceTypesFromInstanceRequirementsInput, ...func(*ec2.Options)) (*ec2.GetInstanceTypesFromInstanceRequirementsOutput, error)
	DescribeImages(context.Context, *ec2.DescribeImagesInput, ...func(*ec2.Options)) (*ec2.DescribeImagesOutput, error)
}

// AutoScalingAPI is the part of the Auto Scaling client the provider uses.
type AutoScalingAPI interface {
	DescribeAutoScalingGroups(context.Context, *autoscaling.DescribeAutoScalingGroupsInput, ...func(*autoscaling.Options)) (*autoscaling.DescribeAutoScalingGroupsOutput, error)
	SetDesiredCapacity(context.Context, *autoscaling.SetDesiredCapacityInput, ...func(*autoscaling.Options)) (*autoscaling.SetDesiredCapacityOutput, error)
	TerminateInstanceInAutoScalingGroup(context.Context, *autoscaling.TerminateInstanceInAutoScalingGroupInput, ...func(*autoscaling.Options)) (*autoscaling.TerminateInstanceInAutoScalingGroupOutput, error)
	DescribeScalingActivities(context.Context, *autoscaling.DescribeScalingActivitiesInput, ...func(*autoscaling.Options)) (*autoscaling.DescribeScalingActivitiesOutput, error)
}

// Options configure the provider.
type Options struct {
	// ClusterName selects the groups tagged k8s.io/cluster-autoscaler/<name>
	// (and k8s.io/cluster-autoscaler/enabled).
	ClusterName string
	// GroupNames, when set, are the groups to use instead of discovery.
	GroupNames []string
	// Pricing gives on-demand (and, where EC2 has none, spot) prices per
	// instance type; its on-demand prices override the shipped table's.
	Pricing v1alpha1.PricingConfig
	// Region is the region of the instances and groups: it selects the
	// shipped on-demand prices (OnDemandListPrice). Empty: no shipped prices.
	Region string
	// GroupTTL is how long a read of the groups serves. Default 30s.
	GroupTTL time.Duration
	// PriceTTL is how long spot prices serve. Default 1h.
	PriceTTL time.Duration
	// TerminateOutsideGroups lets DeleteInstance terminate an instance in
	// no group (ec2:TerminateInstances); otherwise such an instance is
	// Protected.
	TerminateOutsideGroups bool
}

// Provider is the AWS cloud provider. Build it with New.
type Provider struct {
	ec2   EC2API
	asg   AutoScalingAPI
	kube  kubernetes.Interface
	clock clock.Clock
	opts  Options

	mu        sync.Mutex
	instances map[string]instanceFacts // by instance ID, for the instance's life
	groups    []*NodeGroup
	groupsAt  time.Time
	leftOut   []cloud.LeftOut          // by the last read of the groups
	templates map[string]templateFacts // by launch template and version
	types     map[string]typeFacts     // by instance type
	live      *providerkit.LiveTemplates
	// requirementTypes is, by group, the type matched to its
	// attribute-based requirements; images the architecture of images.
	requirementTypes map[string]requirementType
	images           map[string]ec2types.ArchitectureType
	prices           map[string]float64   // spot, by instance type and zone
	pricesAt         map[string]time.Time // when each instance type's prices were read
}

var (
	_ cloud.Provider        = (*Provider)(nil)
	_ cloud.PriceReader     = (*Provider)(nil)
	_ cloud.LeftOutReporter = (*Provider)(nil)
	_ cloud.NodeGroup       = (*NodeGroup)(nil)
)

// instanceFacts is what never changes for an instance.
type instanceFacts struct {
	spot               bool
	typ, zone, group   string
	terminated         bool
	privateDNSName, id string
	// unknownUntil, when set, says EC2 did not know the instance when last
	// asked: it is not asked again before then (see unknownRetry).
	unknownUntil time.Time
}

// gone reports whether the instance is terminated or was unknown to EC2
// when last asked.
func (f instanceFacts) gone() bool { return f.terminated || !f.unknownUntil.IsZero() }

// unknownRetry is how long an instance ID EC2 does not know is taken as
// gone before it is asked about again. Right after a launch, EC2 may not know
// an instance for a few seconds ("Eventual consistency in the Amazon EC2
// API", EC2 API Reference): the ID of a node that registered that quickly is
// found at the next ask; the ID of a node whose instance is gone costs one
// batched lookup this often.
const unknownRetry = 15 * time.Second

// New returns the provider. kube deletes the Node objects of deleted
// instances.
func New(ec2Client EC2API, asgClient AutoScalingAPI, kube kubernetes.Interface, clk clock.Clock, opts Options) (*Provider, error) {
	if opts.ClusterName == "" && len(opts.GroupNames) == 0 {
		return nil, errors.New("cloud.aws: set clusterName (groups tagged " + ClusterTagPrefix + "<clusterName> and " + EnabledTag + ") or autoScalingGroups")
	}
	if opts.GroupTTL <= 0 {
		opts.GroupTTL = 30 * time.Second
	}
	if opts.PriceTTL <= 0 {
		opts.PriceTTL = time.Hour
	}
	return &Provider{ec2: ec2Client, asg: asgClient, kube: kube, clock: clk, opts: opts,
		instances: map[string]instanceFacts{}, templates: map[string]templateFacts{}, types: map[string]typeFacts{},
		prices: map[string]float64{}, pricesAt: map[string]time.Time{}, live: providerkit.NewLiveTemplates(kube, clk),
		requirementTypes: map[string]requirementType{}, images: map[string]ec2types.ArchitectureType{}}, nil
}

// Name implements cloud.Provider.
func (p *Provider) Name() string { return ProviderName }

// InstanceID returns the EC2 instance ID of a node from its spec.providerID
// (aws:///<zone>/<id>), or "".
func InstanceID(node *corev1.Node) string {
	id := node.Spec.ProviderID
	if !strings.HasPrefix(id, "aws://") {
		return ""
	}
	id = id[strings.LastIndex(id, "/")+1:]
	if !strings.HasPrefix(id, "i-") {
		return ""
	}
	return id
}

// instanceIDOf is InstanceID, and whether the node has one.
func instanceIDOf(node *corev1.Node) (string, bool) {
	id := InstanceID(node)
	return id, id != ""
}

// Instances implements cloud.Provider: one DescribeInstances per 1,000
// instances not seen before.
func (p *Provider) Instances(ctx context.Context, nodes []*corev1.Node) (map[string]cloud.Instance, error) {
	ids := make([]string, 0, len(nodes))
	for _, n := range nodes {
		if id := InstanceID(n); id != "" {
			ids = append(ids, id)
		}
	}
	if err := p.learn(ctx, ids); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]cloud.Instance, len(nodes))
	for _, n := range nodes {
		f, ok := p.instances[InstanceID(n)]
		if !ok || f.gone() {
			continue
		}
		out[n.Name] = p.instance(f, n.Name)
	}
	return out, nil
}

// instance renders what is known of an instance; p.mu is held.
func (p *Provider) instance(f instanceFacts, node string) cloud.Instance {
	inst := cloud.Instance{ID: providerID(f.zone, f.id), NodeName: node, NodeGroup: f.group, Spot: f.spot,
		InstanceType: f.typ, Zone: f.zone, Region: p.opts.Region, State: cloud.InstanceRunning}
	inst.PricePerHour, inst.PriceKnown = p.priceLocked(f.typ, f.zone, f.spot)
	inst.Protected = p.protectedLocked(f)
	return inst
}

// outsideGroups is why an instance in no group is protected.
const outsideGroups = "in no Auto Scaling group, and cloud.aws.terminateInstancesOutsideGroups is off"

// protectedLocked says why Spotter must not delete an instance, as far as
// the last read of the groups knows (it reads nothing); p.mu is held.
func (p *Provider) protectedLocked(f instanceFacts) string {
	if f.group == "" {
		if p.opts.TerminateOutsideGroups {
			return ""
		}
		return outsideGroups
	}
	for _, g := range p.groups {
		if g.name == f.group && g.protected[f.id] {
			return "protected from scale-in in Auto Scaling group " + f.group
		}
	}
	return ""
}

func providerID(zone, id string) string { return "aws:///" + zone + "/" + id }

// learn describes the instances of ids not yet cached, and those EC2 did
// not know unknownRetry ago, 1,000 a call. IDs EC2 does not know are
// remembered as unknown for unknownRetry.
func (p *Provider) learn(ctx context.Context, ids []string) error {
	now := p.clock.Now()
	p.mu.Lock()
	var missing []string
	for _, id := range ids {
		if f, ok := p.instances[id]; !ok || (!f.unknownUntil.IsZero() && !now.Before(f.unknownUntil)) {
			missing = append(missing, id)
		}
	}
	p.mu.Unlock()
	slices.Sort(missing)
	missing = slices.Compact(missing)
	for len(missing) > 0 {
		batch := missing[:min(len(missing), maxIDsPerCall)]
		missing = missing[len(batch):]
		found, err := p.describe(ctx, batch)
		if err != nil {
			return err
		}
		p.mu.Lock()
		for _, id := range batch {
			f, ok := found[id]
			if !ok {
				f = instanceFacts{id: id, unknownUntil: now.Add(unknownRetry)}
			}
			p.instances[id] = f
		}
		p.mu.Unlock()
	}
	return nil
}

// describe asks DescribeInstances about ids (at most 1,000). EC2 refuses
// the whole call when one of them does not exist
// (InvalidInstanceID.NotFound): the batch is then asked again with
// instance-id filters, which leave out what does not exist, 200 IDs a call
// (EC2's limit of filter values). The error's text is never read.
func (p *Provider) describe(ctx context.Context, ids []string) (map[string]instanceFacts, error) {
	out := map[string]instanceFacts{}
	err := p.describePages(ctx, &ec2.DescribeInstancesInput{InstanceIds: ids}, out)
	if code(err) != "InvalidInstanceID.NotFound" {
		return out, err
	}
	for chunk := range slices.Chunk(ids, maxFilterValues) {
		in := &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{{Name: aws.String("instance-id"), Values: chunk}}}
		if err := p.describePages(ctx, in, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// maxFilterValues is the most filter values DescribeInstances takes in one
// call.
const maxFilterValues = 200

// describePages reads every page of in's DescribeInstances into out.
func (p *Provider) describePages(ctx context.Context, in *ec2.DescribeInstancesInput, out map[string]instanceFacts) error {
	for {
		resp, err := p.ec2.DescribeInstances(ctx, in)
		if code(err) == "InvalidInstanceID.NotFound" {
			return err
		}
		if err != nil {
			return fmt.Errorf("describing instances: %w", mapError("", err))
		}
		for _, r := range resp.Reservations {
			for _, i := range r.Instances {
				f := factsOf(i)
				out[f.id] = f
			}
		}
		if resp.NextToken == nil || *resp.NextToken == "" {
			return nil
		}
		in.NextToken = resp.NextToken
	}
}

func factsOf(i ec2types.Instance) instanceFacts {
	f := instanceFacts{id: aws.ToString(i.InstanceId), typ: string(i.InstanceType), spot: i.InstanceLifecycle == ec2types.InstanceLifecycleTypeSpot,
		privateDNSName: aws.ToString(i.PrivateDnsName)}
	if i.Placement != nil {
		f.zone = aws.ToString(i.Placement.AvailabilityZone)
	}
	if i.State != nil {
		f.terminated = i.State.Name == ec2types.InstanceStateNameTerminated || i.State.Name == ec2types.InstanceStateNameShuttingDown
	}
	for _, t := range i.Tags {
		if aws.ToString(t.Key) == groupNameTag {
			f.group = aws.ToString(t.Value)
		}
	}
	return f
}

// DeleteInstance implements cloud.Provider: an instance of a group is
// terminated through the group, which lowers its desired capacity; another
// is terminated directly. The Node object is deleted too.
func (p *Provider) DeleteInstance(ctx context.Context, node *corev1.Node) error {
	if err := cloud.CheckDeletable(node); err != nil {
		return err
	}
	id := InstanceID(node)
	if id == "" {
		return cloud.NewNotFoundError(fmt.Errorf("node %s has no EC2 instance (spec.providerID %q)", node.Name, node.Spec.ProviderID))
	}
	if err := p.learn(ctx, []string{id}); err != nil {
		return err
	}
	p.mu.Lock()
	f := p.instances[id]
	p.mu.Unlock()
	if f.gone() {
		return cloud.NewNotFoundError(fmt.Errorf("instance %s of node %s is terminated, or unknown to EC2", id, node.Name))
	}
	if f.group != "" {
		g, err := p.group(ctx, f.group)
		if err == nil {
			return g.DeleteNodes(ctx, []*corev1.Node{node})
		}
		if !cloud.IsNotFound(err) {
			return err
		}
	}
	if !p.opts.TerminateOutsideGroups {
		return fmt.Errorf("instance %s of node %s is %s: %w", id, node.Name, outsideGroups, cloud.ErrProtected)
	}
	if _, err := p.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}}); err != nil {
		return fmt.Errorf("terminating instance %s of node %s: %w", id, node.Name, mapError("", err))
	}
	p.forget(id)
	return providerkit.DeleteNode(ctx, p.kube, node.Name)
}

// forget drops an instance from the cache once it is terminated.
func (p *Provider) forget(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := p.instances[id]
	f.terminated = true
	p.instances[id] = f
}

// NodeGroups implements cloud.Provider: the discovered (or named) groups, by
// name.
func (p *Provider) NodeGroups(ctx context.Context) ([]cloud.NodeGroup, error) {
	return providerkit.NodeGroups(p.readGroups(ctx))
}

// NodeGroupForNode implements cloud.Provider.
func (p *Provider) NodeGroupForNode(ctx context.Context, node *corev1.Node) (cloud.NodeGroup, error) {
	id := InstanceID(node)
	if id == "" {
		return nil, cloud.NewNotFoundError(fmt.Errorf("node %s has no EC2 instance", node.Name))
	}
	if err := p.learn(ctx, []string{id}); err != nil {
		return nil, err
	}
	p.mu.Lock()
	f := p.instances[id]
	p.mu.Unlock()
	if f.gone() {
		return nil, cloud.NewNotFoundError(fmt.Errorf("instance %s of node %s is terminated, or unknown to EC2", id, node.Name))
	}
	if f.group == "" {
		return nil, cloud.NewNotFoundError(fmt.Errorf("instance %s of node %s is in no Auto Scaling group", id, node.Name))
	}
	return p.group(ctx, f.group)
}

// group returns the group named name among the provider's groups.
func (p *Provider) group(ctx context.Context, name string) (*NodeGroup, error) {
	groups, err := p.readGroups(ctx)
	if err != nil {
		return nil, err
	}
	for _, g := range groups {
		if g.name == name {
			return g, nil
		}
	}
	return nil, cloud.NewNotFoundError(fmt.Errorf("the Auto Scaling group %s is not one of Spotter's (tags %s and %s%s, or autoScalingGroups)",
		name, EnabledTag, ClusterTagPrefix, p.opts.ClusterName))
}

// code returns the AWS error code of err, or "".
func code(err error) string {
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	return ""
}

// mapError turns AWS error codes into the seam's typed errors; group names
// the group a capacity error is about.
func mapError(group string, err error) error {
	switch c := code(err); {
	case c == "RequestLimitExceeded" || c == "Throttling" || c == "ThrottlingException":
		return cloud.NewThrottledError(err, 0)
	case capacityCodes[c]:
		return cloud.NewCapacityUnavailableError(group, err)
	case strings.HasPrefix(c, "InvalidInstanceID.NotFound"), c == "ResourceNotFound":
		return cloud.NewNotFoundError(err)
	}
	return err
}

// capacityCodes are the EC2 errors that mean no capacity now.
var capacityCodes = map[string]bool{
	"InsufficientInstanceCapacity": true, "InsufficientCapacity": true, "SpotMaxPriceTooLow": true,
	"MaxSpotInstanceCountExceeded": true, "InsufficientHostCapacity": true, "InsufficientReservedInstanceCapacity": true,
}
