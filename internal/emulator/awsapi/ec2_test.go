package awsapi

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
)

func TestDescribeInstancesPagesAndBatches(t *testing.T) {
	e := newEnv(t, Options{})
	var ids []string
	for n := range 2500 {
		id, err := e.s.AddInstance(Instance{InstanceType: "m5.large", AvailabilityZone: "us-east-1a", Spot: n%2 == 0, Tags: map[string]string{"n": fmt.Sprint(n)}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}

	p := ec2.NewDescribeInstancesPaginator(e.ec2, &ec2.DescribeInstancesInput{MaxResults: aws.Int32(1000)})
	var got []string
	pages := 0
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, r := range out.Reservations {
			for _, i := range r.Instances {
				got = append(got, aws.ToString(i.InstanceId))
			}
		}
	}
	if pages != 3 || !slices.Equal(got, ids) {
		t.Errorf("paginated: %d pages, %d instances; want 3 pages, the 2500 in launch order", pages, len(got))
	}

	out, err := e.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: ids[500:1500]})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Reservations) != 1000 || out.NextToken != nil {
		t.Errorf("1000 IDs: %d reservations, next token %v", len(out.Reservations), out.NextToken)
	}
	first := out.Reservations[0].Instances[0]
	if aws.ToString(first.InstanceId) != ids[500] || first.InstanceLifecycle != ec2types.InstanceLifecycleTypeSpot ||
		first.State.Name != ec2types.InstanceStateNameRunning || aws.ToInt32(first.State.Code) != 16 ||
		aws.ToString(first.Placement.AvailabilityZone) != "us-east-1a" || first.InstanceType != ec2types.InstanceTypeM5Large ||
		aws.ToString(first.PrivateDnsName) == "" || first.LaunchTime == nil || !first.LaunchTime.Equal(epoch) {
		t.Errorf("instance decoded as %+v", first)
	}
	if od := out.Reservations[1].Instances[0]; od.InstanceLifecycle != "" {
		t.Errorf("on-demand instance has lifecycle %q", od.InstanceLifecycle)
	}

	for _, tc := range []struct {
		name string
		in   *ec2.DescribeInstancesInput
		code string
	}{
		{"1001 IDs", &ec2.DescribeInstancesInput{InstanceIds: ids[:1001]}, "InvalidParameterValue"},
		{"unknown ID", &ec2.DescribeInstancesInput{InstanceIds: []string{ids[0], "i-0123456789abcdef9"}}, "InvalidInstanceID.NotFound"},
		{"malformed ID", &ec2.DescribeInstancesInput{InstanceIds: []string{"node-1"}}, "InvalidInstanceID.Malformed"},
		{"IDs and MaxResults", &ec2.DescribeInstancesInput{InstanceIds: ids[:2], MaxResults: aws.Int32(5)}, "InvalidParameterCombination"},
		{"MaxResults too small", &ec2.DescribeInstancesInput{MaxResults: aws.Int32(4)}, "InvalidParameterValue"},
		{"bad token", &ec2.DescribeInstancesInput{NextToken: aws.String("nope")}, "InvalidPaginationToken"},
		{"unknown filter", &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{{Name: aws.String("color"), Values: []string{"red"}}}}, "InvalidParameterValue"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.ec2.DescribeInstances(ctx, tc.in)
			wantCode(t, err, tc.code)
		})
	}
}

func TestDescribeInstancesFilters(t *testing.T) {
	e := newEnv(t, Options{})
	e.group(t, "spot-a", true, withSize(0, 2, 5), withTags("team", "blue"))
	e.group(t, "od-b", false, withSize(0, 1, 5), withTags("team", "red"))
	e.s.Step()
	spotID := e.mustGroup(t, "spot-a").Instances[0].ID
	if err := e.s.TerminateInstance(spotID); err != nil {
		t.Fatal(err)
	}

	count := func(filters ...ec2types.Filter) int {
		t.Helper()
		out, err := e.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: filters})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, r := range out.Reservations {
			n += len(r.Instances)
		}
		return n
	}
	f := func(name string, values ...string) ec2types.Filter {
		return ec2types.Filter{Name: aws.String(name), Values: values}
	}
	for _, tc := range []struct {
		name    string
		filters []ec2types.Filter
		want    int
	}{
		{"none", nil, 3},
		{"group tag", []ec2types.Filter{f("tag:"+GroupNameTag, "spot-a")}, 2},
		{"group tag wildcard", []ec2types.Filter{f("tag:"+GroupNameTag, "*-?")}, 3},
		{"values are ORed", []ec2types.Filter{f("tag:team", "blue", "red")}, 3},
		{"filters are ANDed", []ec2types.Filter{f("tag:team", "blue"), f("instance-state-name", "running")}, 1},
		{"shutting down", []ec2types.Filter{f("instance-state-name", "shutting-down")}, 1},
		{"spot lifecycle", []ec2types.Filter{f("instance-lifecycle", "spot")}, 2},
		{"instance id", []ec2types.Filter{f("instance-id", spotID)}, 1},
		{"tag key", []ec2types.Filter{f("tag-key", "team")}, 3},
		{"zone", []ec2types.Filter{f("availability-zone", "us-east-1c")}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := count(tc.filters...); got != tc.want {
				t.Errorf("%d instances, want %d", got, tc.want)
			}
		})
	}

	out, err := e.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{spotID}})
	if err != nil {
		t.Fatal(err)
	}
	i := out.Reservations[0].Instances[0]
	if i.StateReason == nil || aws.ToString(i.StateReason.Code) != "Server.SpotInstanceTermination" {
		t.Errorf("state reason %+v", i.StateReason)
	}
	tags := map[string]string{}
	for _, tag := range i.Tags {
		tags[aws.ToString(tag.Key)] = aws.ToString(tag.Value)
	}
	if tags[GroupNameTag] != "spot-a" || tags["team"] != "blue" {
		t.Errorf("tags %v", tags)
	}
}

func TestTerminateInstances(t *testing.T) {
	e := newEnv(t, Options{TerminateDelay: time.Minute})
	e.group(t, "g", false, withSize(0, 2, 5))
	var terminated []string
	e.s.OnTerminate(func(i Instance) { terminated = append(terminated, i.ID) })
	e.s.Step()
	g := e.mustGroup(t, "g")
	victim := g.Instances[0].ID

	out, err := e.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{victim}})
	if err != nil {
		t.Fatal(err)
	}
	c := out.TerminatingInstances[0]
	if aws.ToString(c.InstanceId) != victim || c.CurrentState.Name != ec2types.InstanceStateNameShuttingDown || c.PreviousState.Name != ec2types.InstanceStateNameRunning {
		t.Errorf("state change %+v %+v", c.CurrentState, c.PreviousState)
	}
	if st := countStates(e.mustGroup(t, "g")); st[LifecycleTerminating] != 1 {
		t.Errorf("group states %v, want one Terminating", st)
	}

	// Shutting down lasts TerminateDelay; the group replaces the instance
	// at once, as its desired capacity did not change.
	if next := e.s.Step(); next != time.Minute {
		t.Errorf("Step returned %v, want 1m", next)
	}
	if st := countStates(e.mustGroup(t, "g")); st[LifecycleInService] != 2 || st[LifecycleTerminating] != 1 {
		t.Errorf("group states %v, want 2 InService and 1 Terminating", st)
	}
	e.clock.Step(time.Minute)
	e.s.Step()
	if st := countStates(e.mustGroup(t, "g")); st[LifecycleInService] != 2 || len(st) != 1 {
		t.Errorf("group states %v, want 2 InService", st)
	}
	if !slices.Equal(terminated, []string{victim}) {
		t.Errorf("OnTerminate saw %v", terminated)
	}
	if i, _ := e.s.Instance(victim); i.State != StateTerminated {
		t.Errorf("victim is %s", i.State)
	}
	// Terminated instances stay visible for an hour.
	if _, err := e.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{victim}}); err != nil {
		t.Errorf("terminated instance: %v", err)
	}
	e.clock.Step(time.Hour)
	e.s.Step()
	_, err = e.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{victim}})
	wantCode(t, err, "InvalidInstanceID.NotFound")

	_, err = e.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{"i-0123456789abcdef9"}})
	wantCode(t, err, "InvalidInstanceID.NotFound")
}

func TestDescribeSpotPriceHistory(t *testing.T) {
	e := newEnv(t, Options{})
	for h := range 4 {
		at := epoch.Add(time.Duration(h-3) * time.Hour)
		for _, typ := range []string{"m5.large", "c5.large"} {
			for _, z := range []string{"us-east-1a", "us-east-1b"} {
				e.s.SetSpotPrice(typ, z, 0.03+0.001*float64(h), at)
			}
		}
	}
	now := epoch

	// The current price of each pool: start and end at now.
	out, err := e.ec2.DescribeSpotPriceHistory(ctx, &ec2.DescribeSpotPriceHistoryInput{
		StartTime: &now, EndTime: &now, InstanceTypes: []ec2types.InstanceType{"m5.large"},
		ProductDescriptions: []string{"Linux/UNIX"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.SpotPriceHistory) != 2 {
		t.Fatalf("%d prices, want the 2 current m5.large ones", len(out.SpotPriceHistory))
	}
	for _, p := range out.SpotPriceHistory {
		if aws.ToString(p.SpotPrice) != "0.033000" || !p.Timestamp.Equal(epoch) || p.InstanceType != "m5.large" {
			t.Errorf("price %s at %v for %s", aws.ToString(p.SpotPrice), p.Timestamp, p.InstanceType)
		}
	}

	// A window reaching back 90 minutes: the prices inside it and the one
	// in effect at its start.
	start := epoch.Add(-90 * time.Minute)
	out, err = e.ec2.DescribeSpotPriceHistory(ctx, &ec2.DescribeSpotPriceHistoryInput{
		StartTime: &start, AvailabilityZone: aws.String("us-east-1a"),
		Filters: []ec2types.Filter{{Name: aws.String("instance-type"), Values: []string{"c5.*"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var prices []string
	for _, p := range out.SpotPriceHistory {
		prices = append(prices, aws.ToString(p.SpotPrice))
	}
	if !slices.Equal(prices, []string{"0.033000", "0.032000", "0.031000"}) {
		t.Errorf("prices %v, want newest first from the one in effect at the start", prices)
	}

	// All 16 entries, 5 at a time.
	p := ec2.NewDescribeSpotPriceHistoryPaginator(e.ec2, &ec2.DescribeSpotPriceHistoryInput{MaxResults: aws.Int32(5)})
	n, pages := 0, 0
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n += len(out.SpotPriceHistory)
		pages++
	}
	if n != 16 || pages != 4 {
		t.Errorf("%d prices in %d pages, want 16 in 4", n, pages)
	}
}

func TestDescribeLaunchTemplateVersions(t *testing.T) {
	e := newEnv(t, Options{})
	id, err := e.s.CreateLaunchTemplate("workers", LaunchTemplateData{InstanceType: "m5.large", ImageID: "ami-1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.CreateLaunchTemplateVersion("workers", LaunchTemplateData{InstanceType: "m5.xlarge", Spot: true, SpotMaxPrice: "0.1"}); err != nil {
		t.Fatal(err)
	}

	get := func(in *ec2.DescribeLaunchTemplateVersionsInput) []ec2types.LaunchTemplateVersion {
		t.Helper()
		out, err := e.ec2.DescribeLaunchTemplateVersions(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		return out.LaunchTemplateVersions
	}
	latest := get(&ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateId: &id, Versions: []string{"$Latest"}})
	if len(latest) != 1 || aws.ToInt64(latest[0].VersionNumber) != 2 || aws.ToBool(latest[0].DefaultVersion) {
		t.Fatalf("$Latest: %+v", latest)
	}
	d := latest[0].LaunchTemplateData
	if d.InstanceType != "m5.xlarge" || d.InstanceMarketOptions == nil || d.InstanceMarketOptions.MarketType != ec2types.MarketTypeSpot ||
		aws.ToString(d.InstanceMarketOptions.SpotOptions.MaxPrice) != "0.1" {
		t.Errorf("$Latest data %+v", d)
	}
	def := get(&ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateName: aws.String("workers"), Versions: []string{"$Default"}})
	if len(def) != 1 || aws.ToInt64(def[0].VersionNumber) != 1 || def[0].LaunchTemplateData.InstanceMarketOptions != nil ||
		aws.ToString(def[0].LaunchTemplateData.ImageId) != "ami-1" || aws.ToString(def[0].LaunchTemplateId) != id {
		t.Errorf("$Default: %+v", def)
	}
	if all := get(&ec2.DescribeLaunchTemplateVersionsInput{Versions: []string{"$Latest"}}); len(all) != 1 {
		t.Errorf("$Latest of every template: %d versions", len(all))
	}

	p := ec2.NewDescribeLaunchTemplateVersionsPaginator(e.ec2, &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateId: &id, MaxResults: aws.Int32(1)})
	var versions []int64
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range out.LaunchTemplateVersions {
			versions = append(versions, aws.ToInt64(v.VersionNumber))
		}
	}
	if !slices.Equal(versions, []int64{2, 1}) {
		t.Errorf("versions %v, want [2 1]", versions)
	}

	for _, tc := range []struct {
		name string
		in   *ec2.DescribeLaunchTemplateVersionsInput
		code string
	}{
		{"unknown ID", &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateId: aws.String("lt-0123456789abcdef0")}, "InvalidLaunchTemplateId.NotFound"},
		{"malformed ID", &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateId: aws.String("workers")}, "InvalidLaunchTemplateId.Malformed"},
		{"unknown name", &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateName: aws.String("nope")}, "InvalidLaunchTemplateName.NotFoundException"},
		{"unknown version", &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateId: &id, Versions: []string{"7"}}, "InvalidLaunchTemplateId.VersionNotFound"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.ec2.DescribeLaunchTemplateVersions(ctx, tc.in)
			wantCode(t, err, tc.code)
		})
	}
}

func TestDescribeInstanceTypes(t *testing.T) {
	e := newEnv(t, Options{})
	out, err := e.ec2.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []ec2types.InstanceType{"m5.xlarge", "g4dn.xlarge", "m6g.large"}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[ec2types.InstanceType]ec2types.InstanceTypeInfo{}
	for _, it := range out.InstanceTypes {
		got[it.InstanceType] = it
	}
	m5 := got["m5.xlarge"]
	if aws.ToInt32(m5.VCpuInfo.DefaultVCpus) != 4 || aws.ToInt64(m5.MemoryInfo.SizeInMiB) != 16384 ||
		!slices.Equal(m5.ProcessorInfo.SupportedArchitectures, []ec2types.ArchitectureType{"x86_64"}) ||
		!slices.Contains(m5.SupportedUsageClasses, ec2types.UsageClassTypeSpot) || m5.GpuInfo != nil {
		t.Errorf("m5.xlarge: %+v", m5)
	}
	if g := got["g4dn.xlarge"].GpuInfo; g == nil || len(g.Gpus) != 1 || aws.ToInt32(g.Gpus[0].Count) != 1 {
		t.Errorf("g4dn.xlarge GPUs: %+v", g)
	}
	if a := got["m6g.large"].ProcessorInfo.SupportedArchitectures; !slices.Equal(a, []ec2types.ArchitectureType{"arm64"}) {
		t.Errorf("m6g.large architectures %v", a)
	}

	p := ec2.NewDescribeInstanceTypesPaginator(e.ec2, &ec2.DescribeInstanceTypesInput{MaxResults: aws.Int32(5)})
	n := 0
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n += len(out.InstanceTypes)
	}
	if n != len(DefaultInstanceTypes()) {
		t.Errorf("%d types paginated, want %d", n, len(DefaultInstanceTypes()))
	}

	_, err = e.ec2.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []ec2types.InstanceType{"m5.large", "z9.huge"}})
	wantCode(t, err, "InvalidInstanceType")
}

// Right after a launch EC2 may not know the instance yet (SetDescribeLag):
// asked by ID it answers InvalidInstanceID.NotFound, a filter leaves it out;
// once the lag has passed, both find it. More than 200 filter values in one
// call are FilterLimitExceeded.
func TestDescribeLagAndFilterLimit(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := context.Background()
	e.s.SetDescribeLag(5 * time.Second)
	id, err := e.s.AddInstance(Instance{InstanceType: "m5.xlarge", AvailabilityZone: "us-east-1a", State: StateRunning})
	if err != nil {
		t.Fatal(err)
	}
	byID := func() error {
		_, err := e.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
		return err
	}
	byFilter := func() int {
		out, err := e.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{{Name: aws.String("instance-id"), Values: []string{id}}}})
		if err != nil {
			t.Fatal(err)
		}
		return len(out.Reservations)
	}
	var api smithy.APIError
	if err := byID(); !errors.As(err, &api) || api.ErrorCode() != "InvalidInstanceID.NotFound" {
		t.Errorf("by ID right after the launch: %v, want InvalidInstanceID.NotFound", err)
	}
	if n := byFilter(); n != 0 {
		t.Errorf("the filter found %d right after the launch, want 0", n)
	}
	e.clock.Step(5 * time.Second)
	if err := byID(); err != nil {
		t.Errorf("by ID after the lag: %v", err)
	}
	if n := byFilter(); n != 1 {
		t.Errorf("the filter found %d after the lag, want 1", n)
	}
	values := make([]string, 201)
	for i := range values {
		values[i] = fmt.Sprintf("i-%017d", i)
	}
	_, err = e.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{{Name: aws.String("instance-id"), Values: values}}})
	if !errors.As(err, &api) || api.ErrorCode() != "FilterLimitExceeded" {
		t.Errorf("201 filter values: %v, want FilterLimitExceeded", err)
	}
}
