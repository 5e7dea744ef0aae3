package aws

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	testingclock "k8s.io/utils/clock/testing"

	"spotter.dev/spotter/internal/cloud"
	"spotter.dev/spotter/internal/cloud/internal/providertest"
	"spotter.dev/spotter/internal/emulator/awsapi"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// lab is the EC2 and Auto Scaling emulator with the provider on it, built
// from Spotter's configuration through the SDK's standard chain (the
// environment here), as in production.
type lab struct {
	emu   *awsapi.Server
	clock *testingclock.FakeClock
	kube  *fake.Clientset
	p     *Provider
}

var epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func newLab(t *testing.T, cfg v1alpha1.AWSConfig) *lab {
	t.Helper()
	return newLabPricing(t, cfg, v1alpha1.PricingConfig{Currency: "USD", InstanceTypes: map[string]v1alpha1.InstancePrice{"m5.xlarge": {OnDemand: 0.192, Spot: 0.07}}})
}

// newLabPricing is newLab with the given pricing configuration.
func newLabPricing(t *testing.T, cfg v1alpha1.AWSConfig, pricing v1alpha1.PricingConfig) *lab {
	t.Helper()
	return newLabRate(t, cfg, pricing, 1000)
}

// newLabRate is newLabPricing with the provider's requests limited to
// requestsPerSecond.
func newLabRate(t *testing.T, cfg v1alpha1.AWSConfig, pricing v1alpha1.PricingConfig, requestsPerSecond int32) *lab {
	t.Helper()
	clk := testingclock.NewFakeClock(epoch)
	emu := awsapi.New(awsapi.Options{Clock: clk})
	srv := httptest.NewServer(emu)
	t.Cleanup(srv.Close)
	for k, v := range map[string]string{
		"AWS_ENDPOINT_URL": srv.URL, "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret",
		"AWS_MAX_ATTEMPTS": "1", "AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
	} {
		t.Setenv(k, v)
	}
	kube := fake.NewClientset()
	p, err := FromConfig(context.Background(), kube, clk, cfg, requestsPerSecond, pricing)
	if err != nil {
		t.Fatal(err)
	}
	return &lab{emu: emu, clock: clk, kube: kube, p: p}
}

// The provider's SDK requests are paced by cloud.requestsPerSecond: at 1 a
// second (bursts of 2), four lookups of instances not seen before, a
// DescribeInstances each, take at least 1.5 s.
func TestRequestsArePaced(t *testing.T) {
	l := newLabRate(t, v1alpha1.AWSConfig{ClusterName: "prod"}, v1alpha1.PricingConfig{}, 1)
	start := time.Now()
	for i := range 4 {
		id, err := l.emu.AddInstance(awsapi.Instance{InstanceType: "m5.xlarge", AvailabilityZone: "us-east-1a", State: awsapi.StateRunning})
		if err != nil {
			t.Fatal(err)
		}
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("n", i)}, Spec: corev1.NodeSpec{ProviderID: providerID("us-east-1a", id)}}
		got, err := l.p.Instances(context.Background(), []*corev1.Node{node})
		if err != nil || got[node.Name].ID == "" {
			t.Fatalf("Instances: %v, %v", got, err)
		}
	}
	if n := l.emu.Calls("DescribeInstances"); n != 4 {
		t.Fatalf("%d DescribeInstances calls, want 4: the test must send one request a lookup", n)
	}
	// A lower bound only: a limiter can be slower on a busy machine, never faster.
	if took := time.Since(start); took < 1500*time.Millisecond {
		t.Errorf("4 requests at 1 a second (burst 2) took %s, want at least 1.5s", took)
	}
}

// groups creates, for cluster prod, an on-demand group (launch template),
// a spot group (mixed instances, all spot, whose launch template's type,
// m5.2xlarge, is not its first override's, m5.xlarge), a group whose launch
// template asks for spot, and a group of another cluster.
func (l *lab) groups(t *testing.T) {
	t.Helper()
	od, err := l.emu.CreateLaunchTemplate("od", awsapi.LaunchTemplateData{InstanceType: "m5.xlarge"})
	if err != nil {
		t.Fatal(err)
	}
	spotLT, err := l.emu.CreateLaunchTemplate("spot-market", awsapi.LaunchTemplateData{InstanceType: "m5.xlarge", Spot: true})
	if err != nil {
		t.Fatal(err)
	}
	mixedLT, err := l.emu.CreateLaunchTemplate("spot-mixed", awsapi.LaunchTemplateData{InstanceType: "m5.2xlarge"})
	if err != nil {
		t.Fatal(err)
	}
	tags := func(cluster string, extra ...string) map[string]string {
		m := map[string]string{EnabledTag: "true", ClusterTagPrefix + cluster: "owned"}
		for i := 0; i+1 < len(extra); i += 2 {
			m[extra[i]] = extra[i+1]
		}
		return m
	}
	for _, g := range []awsapi.Group{
		{Name: "od", MinSize: 1, MaxSize: 10, DesiredCapacity: 2, AvailabilityZones: []string{"us-east-1a"}, Tags: tags("prod"),
			LaunchTemplate: &awsapi.LaunchTemplateRef{ID: od}},
		{Name: "spot", MinSize: 0, MaxSize: 5, DesiredCapacity: 0, AvailabilityZones: []string{"us-east-1a", "us-east-1b"},
			Tags: tags("prod", NodeTemplateTagPrefix+"label/pool", "spot", NodeTemplateTagPrefix+"taint/spot", "true:NoSchedule",
				NodeTemplateTagPrefix+"resources/ephemeral-storage", "100Gi"),
			MixedInstancesPolicy: &awsapi.MixedInstancesPolicy{LaunchTemplate: awsapi.LaunchTemplateRef{ID: mixedLT}, InstanceTypes: []string{"m5.xlarge", "m5a.xlarge"},
				InstancesDistribution: awsapi.InstancesDistribution{OnDemandBaseCapacity: 0, OnDemandPercentageAboveBaseCapacity: 0}}},
		{Name: "spot-market", MinSize: 0, MaxSize: 5, AvailabilityZones: []string{"us-east-1a"}, Tags: tags("prod"),
			LaunchTemplate: &awsapi.LaunchTemplateRef{ID: spotLT}},
		{Name: "mixed", MinSize: 0, MaxSize: 5, AvailabilityZones: []string{"us-east-1a"}, Tags: tags("prod"),
			MixedInstancesPolicy: &awsapi.MixedInstancesPolicy{LaunchTemplate: awsapi.LaunchTemplateRef{ID: od},
				InstancesDistribution: awsapi.InstancesDistribution{OnDemandBaseCapacity: 1, OnDemandPercentageAboveBaseCapacity: 50}}},
		{Name: "staging", MinSize: 0, MaxSize: 5, DesiredCapacity: 1, AvailabilityZones: []string{"us-east-1a"}, Tags: tags("staging"),
			LaunchTemplate: &awsapi.LaunchTemplateRef{ID: od}},
	} {
		if err := l.emu.CreateGroup(g); err != nil {
			t.Fatal(err)
		}
	}
	l.emu.Step()
}

// nodes creates a Node for every running instance of the emulator and
// returns them.
func (l *lab) nodes(t *testing.T) []*corev1.Node {
	t.Helper()
	var out []*corev1.Node
	for _, i := range l.emu.Instances() {
		if i.State == awsapi.StateTerminated || i.State == awsapi.StateShuttingDown {
			continue
		}
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ip-" + i.ID}, Spec: corev1.NodeSpec{ProviderID: providerID(i.AvailabilityZone, i.ID)}}
		if _, err := l.kube.CoreV1().Nodes().Get(context.Background(), n.Name, metav1.GetOptions{}); err != nil {
			if _, err := l.kube.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		out = append(out, n)
	}
	return out
}

// A group whose launch template cannot be read is left out; the other
// groups are listed, and the group comes back once its template reads.
// Throttling of the read fails the list: nothing can be said then.
func TestUnreadableGroupIsLeftOut(t *testing.T) {
	l := newLab(t, v1alpha1.AWSConfig{ClusterName: "prod"})
	l.groups(t)
	ctx := context.Background()
	names := func() string {
		t.Helper()
		groups, err := l.p.NodeGroups(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, g := range groups {
			out = append(out, g.ID())
		}
		return strings.Join(out, " ")
	}
	l.emu.FailNext("DescribeLaunchTemplateVersions", awsapi.APIError{Status: http.StatusForbidden, Code: "UnauthorizedOperation",
		Message: "You are not authorized to perform this operation."})
	if got := names(); strings.Count(got, " ") != 2 {
		t.Errorf("groups %q, want the three readable ones of four", got)
	}
	if out := l.p.LeftOut(); len(out) != 1 || strings.Contains(names(), out[0].Group) || !strings.Contains(out[0].Err.Error(), "UnauthorizedOperation") {
		t.Errorf("left out %v, want the one group missing, with EC2's refusal", out)
	}
	l.clock.Step(time.Minute) // past GroupTTL
	if got := names(); got != "mixed od spot spot-market" {
		t.Errorf("groups %q once the template reads, want all four", got)
	}
	if out := l.p.LeftOut(); len(out) != 0 {
		t.Errorf("left out %v once every template reads, want none", out)
	}
	l.clock.Step(time.Minute)
	l.emu.ThrottleNext(awsapi.EC2, 5)
	if _, err := l.p.NodeGroups(ctx); !cloud.IsThrottled(err) {
		t.Errorf("a throttled template read: %v, want the list to fail as throttled", err)
	}
}

func TestDiscoveryAndSpot(t *testing.T) {
	l := newLab(t, v1alpha1.AWSConfig{ClusterName: "prod"})
	l.groups(t)
	ctx := context.Background()
	groups, err := l.p.NodeGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := ""
	for _, g := range groups {
		got += fmt.Sprintf("%s:%v:%d-%d ", g.ID(), g.Spot(), g.MinSize(), g.MaxSize())
	}
	if want := "mixed:false:0-5 od:false:1-10 spot:true:0-5 spot-market:true:0-5 "; got != want {
		t.Errorf("groups %q, want %q (the staging cluster's group is not ours)", got, want)
	}
	// Read once, then served from the cache until GroupTTL passes.
	calls := l.emu.Calls("DescribeAutoScalingGroups")
	if _, err := l.p.NodeGroups(ctx); err != nil || l.emu.Calls("DescribeAutoScalingGroups") != calls {
		t.Errorf("a second read within GroupTTL asked AWS again: %v", err)
	}

	// Named groups instead of discovery.
	named := newLab(t, v1alpha1.AWSConfig{AutoScalingGroups: []string{"staging"}})
	named.groups(t)
	groups, err = named.p.NodeGroups(ctx)
	if err != nil || len(groups) != 1 || groups[0].ID() != "staging" {
		t.Errorf("named groups: %v %v", groups, err)
	}
}

// Instances: one DescribeInstances per 1,000 unknown instances, then the
// cache; instances EC2 no longer knows are left out.
func TestInstancesBatchedAndCached(t *testing.T) {
	l := newLab(t, v1alpha1.AWSConfig{ClusterName: "prod"})
	l.groups(t)
	ctx := context.Background()
	if err := l.emu.UpdateGroupSize("od", 1, 3000, 2500); err != nil {
		t.Fatal(err)
	}
	l.emu.Step()
	nodes := l.nodes(t)
	gone := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gone"}, Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-0000000000deadbee"}}
	nodes = append(nodes, gone, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "not-aws"}, Spec: corev1.NodeSpec{ProviderID: "kwok://x/y"}})
	l.emu.ResetCalls()
	got, err := l.p.Instances(ctx, nodes)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2501 { // 2,500 of od, 1 of staging
		t.Errorf("%d instances, want 2501", len(got))
	}
	// Three batches by ID; the one that named a missing ID (EC2 refuses it
	// whole) asked again by instance-id filter, 200 IDs a call.
	if n := l.emu.Calls("DescribeInstances"); n != 8 {
		t.Errorf("%d DescribeInstances calls for 2,503 nodes, want 8 (3 batches, 5 filters for the one with the missing ID)", n)
	}
	inst := got[nodes[0].Name]
	if inst.Spot || inst.InstanceType != "m5.xlarge" || inst.Zone != "us-east-1a" || !inst.PriceKnown || inst.PricePerHour != 0.192 {
		t.Errorf("instance %+v", inst)
	}
	l.emu.ResetCalls()
	if _, err := l.p.Instances(ctx, nodes); err != nil || l.emu.Calls("DescribeInstances") != 0 {
		t.Errorf("known instances asked about again: %d calls, %v", l.emu.Calls("DescribeInstances"), err)
	}
}

// EC2 is eventually consistent right after a launch: an instance it does not
// know yet is left out, asked about again unknownRetry later, and found then;
// an ID EC2 never knows is asked about again as seldom.
func TestUnknownInstanceAskedAgain(t *testing.T) {
	l := newLab(t, v1alpha1.AWSConfig{ClusterName: "prod"})
	ctx := context.Background()
	l.emu.SetDescribeLag(5 * time.Second)
	id, err := l.emu.AddInstance(awsapi.Instance{InstanceType: "m5.xlarge", AvailabilityZone: "us-east-1a", State: awsapi.StateRunning})
	if err != nil {
		t.Fatal(err)
	}
	fresh := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "fresh"}, Spec: corev1.NodeSpec{ProviderID: providerID("us-east-1a", id)}}
	never := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "never"}, Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-0000000000deadbee"}}
	nodes := []*corev1.Node{fresh, never}
	lookup := func() map[string]cloud.Instance {
		t.Helper()
		got, err := l.p.Instances(ctx, nodes)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := lookup(); len(got) != 0 {
		t.Errorf("right after the launch: %v, want nothing (EC2 does not know the instance yet)", got)
	}
	l.emu.ResetCalls()
	l.clock.Step(unknownRetry - time.Second)
	if got := lookup(); len(got) != 0 || l.emu.Calls("DescribeInstances") != 0 {
		t.Errorf("before unknownRetry: %v, %d calls; want nothing asked", got, l.emu.Calls("DescribeInstances"))
	}
	l.clock.Step(time.Second)
	if got := lookup(); len(got) != 1 || got["fresh"].ID != providerID("us-east-1a", id) {
		t.Errorf("unknownRetry later: %v, want the fresh instance", got)
	}
	// Asked by ID (refused whole for the unknown one), then by filter.
	if n := l.emu.Calls("DescribeInstances"); n != 2 {
		t.Errorf("%d DescribeInstances calls, want 2", n)
	}
	if err := l.p.DeleteInstance(ctx, never); !cloud.IsNotFound(err) {
		t.Errorf("deleting the never-known instance: %v, want not found", err)
	}
}

func TestSizes(t *testing.T) {
	l := newLab(t, v1alpha1.AWSConfig{ClusterName: "prod"})
	l.groups(t)
	ctx := context.Background()
	g, err := l.p.group(ctx, "spot")
	if err != nil {
		t.Fatal(err)
	}
	providertest.Grow(t, g)
	// Not launched yet: both may be cancelled, not three.
	providertest.CancelOne(t, g)
	l.emu.Step()
	// Launched: nothing left to cancel.
	if err := g.DecreaseTargetSize(ctx, 1); !errors.Is(err, cloud.ErrNotUnfulfilled) {
		t.Errorf("cancel a launched instance: %v", err)
	}
	insts, err := g.Nodes(ctx)
	if err != nil || len(insts) != 1 || insts[0].State != cloud.InstanceRunning || !insts[0].Spot {
		t.Errorf("nodes %+v %v", insts, err)
	}
}

// A spot shortage: the launch fails, and Nodes says so on the request that
// waits, as a *cloud.CapacityUnavailableError.
func TestCapacityShortage(t *testing.T) {
	l := newLab(t, v1alpha1.AWSConfig{ClusterName: "prod"})
	l.groups(t)
	ctx := context.Background()
	g, _ := l.p.group(ctx, "spot")
	l.emu.SetCapacityShortage("spot", true)
	if err := g.IncreaseSize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	l.emu.Step()
	insts, err := g.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(insts) != 1 || insts[0].State != cloud.InstanceCreating || !cloud.IsCapacityUnavailable(insts[0].Err) {
		t.Fatalf("nodes %+v, want one request waiting for capacity", insts)
	}
	if err := g.DecreaseTargetSize(ctx, 1); err != nil {
		t.Errorf("cancelling the request that cannot be met: %v", err)
	}

	// On-demand capacity runs short too, and says so in words.
	od, _ := l.p.group(ctx, "od")
	l.emu.SetCapacityShortage("od", true)
	if err := od.IncreaseSize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	l.emu.Step()
	insts, err = od.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	late := 0
	for _, i := range insts {
		if i.State == cloud.InstanceCreating && cloud.IsCapacityUnavailable(i.Err) {
			late++
		}
	}
	if late != 1 {
		t.Errorf("on-demand shortage: %+v, want one request waiting for capacity", insts)
	}
}

func TestDeleteNodes(t *testing.T) {
	l := newLab(t, v1alpha1.AWSConfig{ClusterName: "prod"})
	l.groups(t)
	ctx := context.Background()
	nodes := l.nodes(t)
	byGroup := map[string][]*corev1.Node{}
	for _, n := range nodes {
		i, _ := l.emu.Instance(InstanceID(n))
		byGroup[i.Group] = append(byGroup[i.Group], n)
	}
	g, _ := l.p.group(ctx, "od")
	providertest.DeleteNodesRefused(t, g, byGroup["staging"], byGroup["od"])
	victim := byGroup["od"][0]
	if err := l.p.DeleteInstance(ctx, victim); err != nil {
		t.Fatal(err)
	}
	st, _ := l.emu.GroupStatus("od")
	if st.DesiredCapacity != 1 {
		t.Errorf("desired %d after deleting one of 2, want 1", st.DesiredCapacity)
	}
	if i, _ := l.emu.Instance(InstanceID(victim)); i.State != awsapi.StateShuttingDown && i.State != awsapi.StateTerminated {
		t.Errorf("instance %s is %s", i.ID, i.State)
	}
	if _, err := l.kube.CoreV1().Nodes().Get(ctx, victim.Name, metav1.GetOptions{}); err == nil {
		t.Error("the Node object was not deleted")
	}
	if err := l.p.DeleteInstance(ctx, victim); !cloud.IsNotFound(err) {
		t.Errorf("deleting it again: %v", err)
	}
	if got, err := l.p.NodeGroupForNode(ctx, byGroup["od"][1]); err != nil || got.ID() != "od" {
		t.Errorf("group of a node: %v %v", got, err)
	}
	if _, err := l.p.NodeGroupForNode(ctx, byGroup["staging"][0]); !cloud.IsNotFound(err) {
		t.Errorf("group of another cluster's node: %v", err)
	}
}

// Groups as they are configured in the wild: attribute-based instance
// types, an on-demand base, a launch configuration.
func TestGroupsInTheWild(t *testing.T) {
	l := newLab(t, v1alpha1.AWSConfig{ClusterName: "prod"})
	ctx := context.Background()
	l.emu.AddImage("ami-0a1b2c3d4e5f60708", "arm64")
	armLT, err := l.emu.CreateLaunchTemplate("arm", awsapi.LaunchTemplateData{ImageID: "ami-0a1b2c3d4e5f60708"})
	if err != nil {
		t.Fatal(err)
	}
	od, err := l.emu.CreateLaunchTemplate("od", awsapi.LaunchTemplateData{InstanceType: "m5.xlarge"})
	if err != nil {
		t.Fatal(err)
	}
	tags := map[string]string{EnabledTag: "true", ClusterTagPrefix + "prod": "owned"}
	for _, g := range []awsapi.Group{
		// 2 vCPUs and 8 GiB on the image's arm64: m6g.large of the catalog.
		{Name: "abs", MaxSize: 5, AvailabilityZones: []string{"us-east-1a"}, Tags: tags,
			MixedInstancesPolicy: &awsapi.MixedInstancesPolicy{LaunchTemplate: awsapi.LaunchTemplateRef{ID: armLT},
				Requirements: &awsapi.InstanceRequirements{VCPUMin: 2, VCPUMax: 2, MemoryMiBMin: 8192, MemoryMiBMax: 8192}}},
		// Two on-demand instances, then spot only.
		{Name: "based", MaxSize: 5, DesiredCapacity: 1, AvailabilityZones: []string{"us-east-1a"}, Tags: tags,
			MixedInstancesPolicy: &awsapi.MixedInstancesPolicy{LaunchTemplate: awsapi.LaunchTemplateRef{ID: od},
				InstancesDistribution: awsapi.InstancesDistribution{OnDemandBaseCapacity: 2}}},
		{Name: "legacy", MaxSize: 5, AvailabilityZones: []string{"us-east-1a"}, Tags: tags, LaunchConfigurationName: "legacy-lc"},
	} {
		if err := l.emu.CreateGroup(g); err != nil {
			t.Fatal(err)
		}
	}
	l.emu.Step()
	groups, err := l.p.NodeGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, g := range groups {
		names = append(names, fmt.Sprintf("%s:%v", g.ID(), g.Spot()))
	}
	// The launch configuration's group is left out (logged; its reason
	// below); based is not spot while it runs fewer than its base.
	if got := strings.Join(names, " "); got != "abs:true based:false" {
		t.Errorf("groups %s, want abs:true based:false", got)
	}
	abs, _ := l.p.group(ctx, "abs")
	n, err := abs.TemplateNode(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n.Labels[corev1.LabelInstanceTypeStable] != "m6g.large" || n.Labels[corev1.LabelArchStable] != "arm64" {
		t.Errorf("template of the attribute-based group: labels %v, want m6g.large on arm64", n.Labels)
	}
	if calls := l.emu.Calls("GetInstanceTypesFromInstanceRequirements"); calls != 1 {
		t.Errorf("%d GetInstanceTypesFromInstanceRequirements calls, want 1", calls)
	}
	if _, err := abs.TemplateNode(ctx); err != nil || l.emu.Calls("GetInstanceTypesFromInstanceRequirements") != 1 {
		t.Errorf("second template: %v; the match is asked again", err)
	}
	if out := l.p.LeftOut(); len(out) != 1 || out[0].Group != "legacy" || !strings.Contains(out[0].Err.Error(), "move the group to a launch template") {
		t.Errorf("left out %v, want legacy, with the fix", out)
	}

	// With its base running, based adds spot only: spot, and partly so.
	if err := l.emu.UpdateGroupSize("based", 0, 5, 2); err != nil {
		t.Fatal(err)
	}
	l.emu.Step()
	l.clock.Step(time.Minute) // past GroupTTL
	based, err := l.p.group(ctx, "based")
	if err != nil {
		t.Fatal(err)
	}
	if !based.Spot() || based.Mix() != "on-demand base 2, 0 % on-demand above it, desired 2" {
		t.Errorf("based at its base: spot %v, mix %q", based.Spot(), based.Mix())
	}
	if err := based.IncreaseSize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	l.emu.Step()
	var spot, onDemand int
	for _, inst := range l.emu.Instances() {
		if inst.Group == "based" && inst.Spot {
			spot++
		} else if inst.Group == "based" {
			onDemand++
		}
	}
	if spot != 1 || onDemand != 2 {
		t.Errorf("based grown by 1: %d spot and %d on-demand instances, want 1 and 2", spot, onDemand)
	}
}

// An instance protected from scale-in, or in no group, is one Spotter does
// not delete: Instances says why, and the deletes refuse it, changing
// nothing; terminateInstancesOutsideGroups lets the second go.
func TestProtectedInstances(t *testing.T) {
	for _, allow := range []bool{false, true} {
		l := newLab(t, v1alpha1.AWSConfig{ClusterName: "prod", TerminateInstancesOutsideGroups: allow})
		ctx := context.Background()
		od, err := l.emu.CreateLaunchTemplate("od", awsapi.LaunchTemplateData{InstanceType: "m5.xlarge"})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.emu.CreateGroup(awsapi.Group{Name: "guarded", MaxSize: 5, DesiredCapacity: 2, AvailabilityZones: []string{"us-east-1a"},
			Tags: map[string]string{EnabledTag: "true", ClusterTagPrefix + "prod": "owned"}, LaunchTemplate: &awsapi.LaunchTemplateRef{ID: od},
			NewInstancesProtectedFromScaleIn: true}); err != nil {
			t.Fatal(err)
		}
		l.emu.Step()
		if _, err := l.emu.AddInstance(awsapi.Instance{InstanceType: "m5.xlarge", AvailabilityZone: "us-east-1a", State: awsapi.StateRunning}); err != nil {
			t.Fatal(err)
		}
		nodes := l.nodes(t)
		if _, err := l.p.NodeGroups(ctx); err != nil { // the read Instances answers from
			t.Fatal(err)
		}
		insts, err := l.p.Instances(ctx, nodes)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes {
			inst := insts[n.Name]
			var err error
			if inst.NodeGroup != "" {
				g, _ := l.p.group(ctx, inst.NodeGroup)
				err = g.DeleteNodes(ctx, []*corev1.Node{n})
			} else {
				err = l.p.DeleteInstance(ctx, n)
			}
			switch {
			case inst.NodeGroup != "" && (inst.Protected == "" || !errors.Is(err, cloud.ErrProtected)):
				t.Errorf("a protected instance of a group: Protected %q, delete %v", inst.Protected, err)
			case inst.NodeGroup == "" && !allow && (inst.Protected == "" || !errors.Is(err, cloud.ErrProtected)):
				t.Errorf("an instance in no group: Protected %q, delete %v", inst.Protected, err)
			case inst.NodeGroup == "" && allow && (inst.Protected != "" || err != nil):
				t.Errorf("an instance in no group, terminateInstancesOutsideGroups on: Protected %q, delete %v", inst.Protected, err)
			}
		}
		st, _ := l.emu.GroupStatus("guarded")
		if st.DesiredCapacity != 2 || l.emu.Calls("TerminateInstanceInAutoScalingGroup") != 0 {
			t.Errorf("the group changed: desired %d, %d terminations", st.DesiredCapacity, l.emu.Calls("TerminateInstanceInAutoScalingGroup"))
		}
		if want := map[bool]int{false: 0, true: 1}[allow]; l.emu.Calls("TerminateInstances") != want {
			t.Errorf("terminateInstancesOutsideGroups %v: %d TerminateInstances calls, want %d", allow, l.emu.Calls("TerminateInstances"), want)
		}
	}
}

// A group without a Node gets a template of its instance type as EC2
// describes it and as the EKS node image sets up its kubelet; its
// node-template tags win.
func TestTemplateNode(t *testing.T) {
	l := newLab(t, v1alpha1.AWSConfig{ClusterName: "prod"})
	l.groups(t)
	ctx := context.Background()
	for _, typ := range []string{"g4dn.xlarge", "m6g.large"} {
		lt, err := l.emu.CreateLaunchTemplate(typ, awsapi.LaunchTemplateData{InstanceType: typ, Spot: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.emu.CreateGroup(awsapi.Group{Name: typ, MaxSize: 5, AvailabilityZones: []string{"us-east-1a"},
			Tags: map[string]string{EnabledTag: "true", ClusterTagPrefix + "prod": "owned"}, LaunchTemplate: &awsapi.LaunchTemplateRef{ID: lt}}); err != nil {
			t.Fatal(err)
		}
	}
	template := func(name string) *corev1.Node {
		t.Helper()
		g, err := l.p.group(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		n, err := g.TemplateNode(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	n := template("spot")
	if n.Labels[CapacityTypeLabel] != "SPOT" || n.Labels["pool"] != "spot" || n.Labels[corev1.LabelInstanceTypeStable] != "m5.xlarge" ||
		n.Labels[corev1.LabelTopologyZone] != "us-east-1a" || n.Labels[corev1.LabelArchStable] != "amd64" {
		t.Errorf("labels %v", n.Labels)
	}
	if len(n.Spec.Taints) != 1 || n.Spec.Taints[0] != (corev1.Taint{Key: "spot", Value: "true", Effect: corev1.TaintEffectNoSchedule}) {
		t.Errorf("taints %v", n.Spec.Taints)
	}
	// m5.xlarge: 4 vCPUs, 16 GiB, 4 ENIs of 15 addresses: 58 pods;
	// 80m and 255 + 11 * 58 MiB reserved, 100 MiB eviction threshold.
	providertest.WantResources(t, "m5.xlarge", n, "cpu=4,memory=16Gi,pods=58,ephemeral-storage=100Gi", "cpu=3920m,memory=15391Mi,pods=58,ephemeral-storage=100Gi")
	// g4dn.xlarge: one NVIDIA T4, 3 ENIs of 10 addresses.
	providertest.WantResources(t, "g4dn.xlarge", template("g4dn.xlarge"), "cpu=4,memory=16Gi,pods=29,nvidia.com/gpu=1", "cpu=3920m,memory=15710Mi,pods=29,nvidia.com/gpu=1")
	if arch := template("m6g.large").Labels[corev1.LabelArchStable]; arch != "arm64" {
		t.Errorf("m6g.large's template: kubernetes.io/arch %q, want arm64", arch)
	}
	g, _ := l.p.group(ctx, "spot")
	if err := cloud.ValidateNodeGroup(ctx, g); err != nil {
		t.Errorf("a worker group refused: %v", err)
	}
}

// A group with a Ready Node copies it: what the kubelet reports (max pods,
// allocatable, a device plugin's GPUs) beats any estimate. The node's own
// marks are left out, and the copy serves for providerkit.LiveTemplateTTL.
func TestTemplateFromLiveNode(t *testing.T) {
	l := newLab(t, v1alpha1.AWSConfig{ClusterName: "prod"})
	l.groups(t)
	ctx := context.Background()
	var ids []string
	for _, i := range l.emu.Instances() {
		if i.Group == "od" {
			ids = append(ids, i.ID)
		}
	}
	if len(ids) != 2 {
		t.Fatalf("the od group has %d instances, want 2", len(ids))
	}
	slices.Sort(ids)
	ready := []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	for i, id := range ids {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ip-" + id, Labels: map[string]string{corev1.LabelHostname: "ip-" + id, "team": "a"}},
			Spec: corev1.NodeSpec{ProviderID: providerID("us-east-1a", id), Taints: []corev1.Taint{
				{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule},
				{Key: "spotter.dev/draining", Effect: corev1.TaintEffectNoSchedule},
				{Key: "node.kubernetes.io/unreachable", Effect: corev1.TaintEffectNoExecute}}},
			Status: corev1.NodeStatus{
				Capacity:    corev1.ResourceList{"cpu": resource.MustParse("4"), "memory": resource.MustParse("16Gi"), "pods": resource.MustParse("58"), cloud.NvidiaGPU: resource.MustParse("1")},
				Allocatable: corev1.ResourceList{"cpu": resource.MustParse("3920m"), "memory": resource.MustParse("15000Mi"), "pods": resource.MustParse("58"), cloud.NvidiaGPU: resource.MustParse("0")},
			}}
		if i == 0 { // not Ready, so not copied
			n.Labels["team"] = "not-ready"
		} else {
			n.Status.Conditions = ready
		}
		if _, err := l.kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	g, _ := l.p.group(ctx, "od")
	n, err := g.TemplateNode(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n.Name != "template-od" || n.Labels[corev1.LabelHostname] != "template-od" || n.Labels["team"] != "a" {
		t.Errorf("template %s, labels %v", n.Name, n.Labels)
	}
	if len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != "dedicated" {
		t.Errorf("taints %v, want only the group's dedicated=gpu", n.Spec.Taints)
	}
	// The GPU whose device plugin is still starting counts at capacity.
	providertest.WantResources(t, "od", n, "cpu=4,memory=16Gi,pods=58,nvidia.com/gpu=1", "cpu=3920m,memory=15000Mi,pods=58,nvidia.com/gpu=1")

	// Read again only after the TTL: the node's new label shows then.
	live, _ := l.kube.CoreV1().Nodes().Get(ctx, "ip-"+ids[1], metav1.GetOptions{})
	live.Labels["team"] = "b"
	if _, err := l.kube.CoreV1().Nodes().Update(ctx, live, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if n, _ := g.TemplateNode(ctx); n.Labels["team"] != "a" {
		t.Errorf("read again within the TTL: team=%s", n.Labels["team"])
	}
	l.clock.Step(6 * time.Minute)
	g, _ = l.p.group(ctx, "od")
	lists := nodeLists(l)
	if n, _ := g.TemplateNode(ctx); n.Labels["team"] != "b" {
		t.Errorf("not read again after the TTL: team=%s", n.Labels["team"])
	}
	if n := nodeLists(l) - lists; n != 0 {
		t.Errorf("%d lists of the Nodes to read again a Node that still serves, want none (a get of it)", n)
	}
	// Once that Node is not Ready, the group's others are looked at: none
	// serves, and the template is the instance type's.
	live, _ = l.kube.CoreV1().Nodes().Get(ctx, "ip-"+ids[1], metav1.GetOptions{})
	live.Status.Conditions[0].Status = corev1.ConditionFalse
	if _, err := l.kube.CoreV1().Nodes().UpdateStatus(ctx, live, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	l.clock.Step(6 * time.Minute)
	g, _ = l.p.group(ctx, "od")
	if n, _ := g.TemplateNode(ctx); n.Labels["team"] != "" || n.Status.Allocatable.Memory().String() != "15391Mi" {
		t.Errorf("template once no Node serves: labels %v, allocatable %v; want m5.xlarge's", n.Labels, n.Status.Allocatable)
	}
}

// nodeLists counts the Node lists the lab's clientset answered.
func nodeLists(l *lab) int {
	n := 0
	for _, a := range l.kube.Actions() {
		if a.GetVerb() == "list" && a.GetResource().Resource == "nodes" {
			n++
		}
	}
	return n
}

func TestThrottledAndPrices(t *testing.T) {
	l := newLab(t, v1alpha1.AWSConfig{ClusterName: "prod"})
	l.groups(t)
	ctx := context.Background()
	nodes := l.nodes(t)
	l.emu.ThrottleNext(awsapi.EC2, 1)
	if _, err := l.p.Instances(ctx, nodes); !cloud.IsThrottled(err) {
		t.Errorf("throttled DescribeInstances: %v", err)
	}
	l.emu.ThrottleNext(awsapi.AutoScaling, 1)
	if _, err := l.p.NodeGroups(ctx); !cloud.IsThrottled(err) {
		t.Errorf("throttled DescribeAutoScalingGroups: %v", err)
	}
	// Spot prices from EC2's history, read once per PriceTTL.
	l.emu.SetSpotPrice("m5.xlarge", "us-east-1a", 0.0612, epoch.Add(-time.Hour))
	if err := l.p.RefreshPrices(ctx, []string{"m5.xlarge"}); err != nil {
		t.Fatal(err)
	}
	calls := l.emu.Calls("DescribeSpotPriceHistory")
	if err := l.p.RefreshPrices(ctx, []string{"m5.xlarge"}); err != nil || l.emu.Calls("DescribeSpotPriceHistory") != calls {
		t.Errorf("prices read again within PriceTTL: %v", err)
	}
	g, _ := l.p.group(ctx, "spot")
	if price, ok := g.PricePerHour(); !ok || price != 0.0612 {
		t.Errorf("spot group price %v %v, want EC2's 0.0612", price, ok)
	}
	od, _ := l.p.group(ctx, "od")
	if price, ok := od.PricePerHour(); !ok || price != 0.192 {
		t.Errorf("on-demand group price %v %v, want the configured 0.192", price, ok)
	}
	// The same prices by instance type and place, as spotter plan and
	// simulate --from-cluster ask for them: spot per zone, on-demand from
	// the configuration, else the shipped table of the provider's region.
	if price, ok := l.p.InstanceTypePrice("m5.xlarge", "", "us-east-1a", true); !ok || price != 0.0612 {
		t.Errorf("InstanceTypePrice(m5.xlarge, us-east-1a, spot) = %v %v, want EC2's 0.0612", price, ok)
	}
	list, _ := OnDemandListPrice("us-east-1", "c5.xlarge")
	if price, ok := l.p.InstanceTypePrice("c5.xlarge", "us-east-1", "us-east-1b", false); !ok || price != list || list == 0 {
		t.Errorf("InstanceTypePrice(c5.xlarge, on-demand) = %v %v, want the shipped %v", price, ok, list)
	}
	if _, ok := l.p.InstanceTypePrice("c5.xlarge", "us-east-1", "us-east-1b", true); ok {
		t.Error("a spot price for a type EC2 was not asked about and the configuration does not price")
	}
	inst, err := l.p.Instances(ctx, nodes)
	if err != nil || len(inst) == 0 {
		t.Fatalf("instances: %v %v", inst, err)
	}
	for _, i := range inst {
		if i.Region != "us-east-1" {
			t.Errorf("instance %s: region %q, want us-east-1", i.ID, i.Region)
		}
	}
}

// Instance lookups for 5,000 nodes against the emulator, through the SDK:
// cold (every instance unknown) and warm (all cached).
//
//	go test ./internal/cloud/aws -run '^$' -bench Instances -benchtime 3x
func BenchmarkInstances5000(b *testing.B) {
	clk := testingclock.NewFakeClock(epoch)
	emu := awsapi.New(awsapi.Options{Clock: clk})
	srv := httptest.NewServer(emu)
	b.Cleanup(srv.Close)
	for k, v := range map[string]string{
		"AWS_ENDPOINT_URL": srv.URL, "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret",
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
	} {
		b.Setenv(k, v)
	}
	var nodes []*corev1.Node
	for i := range 5000 {
		id, err := emu.AddInstance(awsapi.Instance{InstanceType: "m5.xlarge", AvailabilityZone: "us-east-1a", State: awsapi.StateRunning, Spot: i%2 == 0})
		if err != nil {
			b.Fatal(err)
		}
		nodes = append(nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("n", i)}, Spec: corev1.NodeSpec{ProviderID: providerID("us-east-1a", id)}})
	}
	providertest.BenchmarkInstances(b, nodes, func(ctx context.Context) (cloud.Provider, error) {
		p, err := FromConfig(ctx, nil, clk, v1alpha1.AWSConfig{ClusterName: "bench"}, 1000, v1alpha1.PricingConfig{})
		return p, err
	}, emu.ResetCalls, func() int { return emu.Calls("DescribeInstances") })
}

// A spot price refresh through the SDK against the emulator: 30 instance
// types, each with a price in 6 zones (and an older one each), in one
// paged DescribeSpotPriceHistory.
//
//	go test ./internal/cloud/aws -run '^$' -bench PriceRefresh -benchtime 5x
func BenchmarkPriceRefresh(b *testing.B) {
	clk := testingclock.NewFakeClock(epoch)
	emu := awsapi.New(awsapi.Options{Clock: clk})
	srv := httptest.NewServer(emu)
	b.Cleanup(srv.Close)
	for k, v := range map[string]string{
		"AWS_ENDPOINT_URL": srv.URL, "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret",
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
	} {
		b.Setenv(k, v)
	}
	var types []string
	for i := range 30 {
		typ := fmt.Sprintf("m%d.%dxlarge", 5+i%3, 2+i/3)
		types = append(types, typ)
		for _, z := range []string{"a", "b", "c", "d", "e", "f"} {
			emu.SetSpotPrice(typ, "us-east-1"+z, 0.05+float64(i)/1000, epoch.Add(-2*time.Hour))
			emu.SetSpotPrice(typ, "us-east-1"+z, 0.06+float64(i)/1000, epoch.Add(-time.Hour))
		}
	}
	p, err := FromConfig(context.Background(), nil, clk, v1alpha1.AWSConfig{ClusterName: "bench"}, 1000, v1alpha1.PricingConfig{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for b.Loop() {
		clk.Step(2 * time.Hour) // every refresh asks again
		if err := p.RefreshPrices(ctx, types); err != nil {
			b.Fatal(err)
		}
	}
	if _, ok := p.InstanceTypePrice(types[29], "", "us-east-1f", true); !ok {
		b.Fatal("no price")
	}
	b.ReportMetric(float64(emu.Calls("DescribeSpotPriceHistory"))/float64(b.N), "spot-price-calls/op")
}
