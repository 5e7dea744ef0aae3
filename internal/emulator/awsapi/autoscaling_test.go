package awsapi

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
)

const (
	enabledTag = "k8s.io/cluster-autoscaler/enabled"
	clusterTag = "k8s.io/cluster-autoscaler/lab"
)

func TestDescribeAutoScalingGroups(t *testing.T) {
	e := newEnv(t, Options{})
	for n := range 5 {
		e.group(t, fmt.Sprintf("ng-%d", n), false, withSize(0, 1, 10), withTags(enabledTag, "true", clusterTag, "owned"))
	}
	e.group(t, "other", false, withSize(0, 0, 3))
	e.group(t, "mixed", false, withSize(1, 2, 20), withZones("us-east-1a", "us-east-1b", "us-east-1c"), withMixed(1, 25, "m5.large", "m5a.large"),
		withTags(enabledTag, "true", clusterTag, "owned",
			"k8s.io/cluster-autoscaler/node-template/label/spotter.dev/pool", "batch",
			"k8s.io/cluster-autoscaler/node-template/taint/dedicated", "batch:NoSchedule",
			"k8s.io/cluster-autoscaler/node-template/resources/ephemeral-storage", "100Gi"))
	e.s.Step()

	// By tag filters, paginated two at a time.
	p := autoscaling.NewDescribeAutoScalingGroupsPaginator(e.as, &autoscaling.DescribeAutoScalingGroupsInput{
		Filters: []astypes.Filter{
			{Name: aws.String("tag-key"), Values: []string{enabledTag}},
			{Name: aws.String("tag:" + clusterTag), Values: []string{"owned", "shared"}},
		},
		MaxRecords: aws.Int32(2),
	})
	var names []string
	pages := 0
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, g := range out.AutoScalingGroups {
			names = append(names, aws.ToString(g.AutoScalingGroupName))
		}
	}
	if want := []string{"mixed", "ng-0", "ng-1", "ng-2", "ng-3", "ng-4"}; !slices.Equal(names, want) || pages != 3 {
		t.Errorf("groups %v in %d pages, want %v in 3", names, pages, want)
	}

	// By name: unknown names are left out.
	out, err := e.as.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{"mixed", "ng-3", "nope"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.AutoScalingGroups) != 2 {
		t.Fatalf("%d groups, want 2", len(out.AutoScalingGroups))
	}
	m := out.AutoScalingGroups[0]
	if aws.ToInt32(m.MinSize) != 1 || aws.ToInt32(m.MaxSize) != 20 || aws.ToInt32(m.DesiredCapacity) != 2 ||
		!slices.Equal(m.AvailabilityZones, []string{"us-east-1a", "us-east-1b", "us-east-1c"}) ||
		!strings.HasSuffix(aws.ToString(m.AutoScalingGroupARN), ":autoScalingGroupName/mixed") || m.LaunchTemplate != nil {
		t.Errorf("group %+v", m)
	}
	mp := m.MixedInstancesPolicy
	if mp == nil || aws.ToInt32(mp.InstancesDistribution.OnDemandBaseCapacity) != 1 ||
		aws.ToInt32(mp.InstancesDistribution.OnDemandPercentageAboveBaseCapacity) != 25 ||
		aws.ToString(mp.InstancesDistribution.SpotAllocationStrategy) != "capacity-optimized" ||
		aws.ToString(mp.LaunchTemplate.LaunchTemplateSpecification.LaunchTemplateName) != "mixed-lt" ||
		len(mp.LaunchTemplate.Overrides) != 2 || aws.ToString(mp.LaunchTemplate.Overrides[1].InstanceType) != "m5a.large" {
		t.Errorf("mixed instances policy %+v", mp)
	}
	tags := map[string]string{}
	for _, tag := range m.Tags {
		if aws.ToString(tag.ResourceId) != "mixed" || aws.ToString(tag.ResourceType) != "auto-scaling-group" || !aws.ToBool(tag.PropagateAtLaunch) {
			t.Errorf("tag %+v", tag)
		}
		tags[aws.ToString(tag.Key)] = aws.ToString(tag.Value)
	}
	if tags["k8s.io/cluster-autoscaler/node-template/taint/dedicated"] != "batch:NoSchedule" || len(tags) != 5 {
		t.Errorf("tags %v", tags)
	}
	if len(m.Instances) != 2 {
		t.Fatalf("%d instances, want 2", len(m.Instances))
	}
	for _, i := range m.Instances {
		if i.LifecycleState != astypes.LifecycleStateInService || aws.ToString(i.HealthStatus) != "Healthy" ||
			aws.ToString(i.LaunchTemplate.LaunchTemplateName) != "mixed-lt" || aws.ToString(i.AvailabilityZone) == "" {
			t.Errorf("instance %+v", i)
		}
	}
	ng := out.AutoScalingGroups[1]
	if ng.LaunchTemplate == nil || aws.ToString(ng.LaunchTemplate.LaunchTemplateName) != "ng-3-lt" || aws.ToString(ng.LaunchTemplate.Version) != "$Default" {
		t.Errorf("launch template %+v", ng.LaunchTemplate)
	}

	out, err = e.as.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{"mixed"}, IncludeInstances: aws.Bool(false)})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.AutoScalingGroups[0].Instances) != 0 {
		t.Errorf("IncludeInstances false still lists instances")
	}

	_, err = e.as.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{NextToken: aws.String("nope")})
	wantCode(t, err, "InvalidNextToken")
	_, err = e.as.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{Filters: []astypes.Filter{{Name: aws.String("color"), Values: []string{"red"}}}})
	wantCode(t, err, "ValidationError")
}

func TestSetDesiredCapacity(t *testing.T) {
	e := newEnv(t, Options{})
	e.group(t, "g", false, withSize(1, 2, 5))
	for _, tc := range []struct {
		name    string
		group   string
		desired int32
		message string // "" for success
	}{
		{"within bounds", "g", 4, ""},
		{"at max", "g", 5, ""},
		{"at min", "g", 1, ""},
		{"above max", "g", 6, "New SetDesiredCapacity value 6 is above max value 5 for the AutoScalingGroup."},
		{"below min", "g", 0, "New SetDesiredCapacity value 0 is below min value 1 for the AutoScalingGroup."},
		{"unknown group", "nope", 1, "AutoScalingGroup name not found - AutoScalingGroup 'nope' not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.as.SetDesiredCapacity(ctx, &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: &tc.group, DesiredCapacity: &tc.desired})
			if tc.message == "" {
				if err != nil {
					t.Fatal(err)
				}
				if got := e.mustGroup(t, "g").DesiredCapacity; got != tc.desired {
					t.Errorf("desired %d, want %d", got, tc.desired)
				}
				return
			}
			code, status := apiError(t, err)
			if code != "ValidationError" || status != 400 || !strings.Contains(err.Error(), tc.message) {
				t.Errorf("got %s (HTTP %d) %v, want ValidationError %q", code, status, err, tc.message)
			}
		})
	}
}

func TestTerminateInstanceInAutoScalingGroup(t *testing.T) {
	e := newEnv(t, Options{})
	e.group(t, "g", false, withSize(1, 3, 5))
	e.s.Step()
	ids := func() []string {
		var out []string
		for _, i := range e.mustGroup(t, "g").Instances {
			if i.LifecycleState == LifecycleInService {
				out = append(out, i.ID)
			}
		}
		return out
	}
	live := ids()

	// With decrement: the group shrinks and no replacement comes.
	out, err := e.as.TerminateInstanceInAutoScalingGroup(ctx, &autoscaling.TerminateInstanceInAutoScalingGroupInput{
		InstanceId: &live[0], ShouldDecrementDesiredCapacity: aws.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	a := out.Activity
	if a == nil || aws.ToString(a.Description) != "Terminating EC2 instance: "+live[0] || a.StatusCode != astypes.ScalingActivityStatusCodeInProgress ||
		!strings.Contains(aws.ToString(a.Cause), "shrinking the capacity from 3 to 2") {
		t.Errorf("activity %+v", a)
	}
	// Asking again answers with the termination under way.
	again, err := e.as.TerminateInstanceInAutoScalingGroup(ctx, &autoscaling.TerminateInstanceInAutoScalingGroupInput{
		InstanceId: &live[0], ShouldDecrementDesiredCapacity: aws.Bool(true),
	})
	if err != nil || aws.ToString(again.Activity.ActivityId) != aws.ToString(a.ActivityId) {
		t.Errorf("second call: %v, %+v", err, again)
	}
	e.s.Step()
	if g := e.mustGroup(t, "g"); g.DesiredCapacity != 2 || len(ids()) != 2 || len(g.Instances) != 2 {
		t.Errorf("after decrementing: desired %d, %d in service of %d", g.DesiredCapacity, len(ids()), len(g.Instances))
	}

	// Without decrement: a replacement launches.
	live = ids()
	if _, err := e.as.TerminateInstanceInAutoScalingGroup(ctx, &autoscaling.TerminateInstanceInAutoScalingGroupInput{
		InstanceId: &live[0], ShouldDecrementDesiredCapacity: aws.Bool(false),
	}); err != nil {
		t.Fatal(err)
	}
	e.s.Step()
	if now := ids(); len(now) != 2 || slices.Contains(now, live[0]) {
		t.Errorf("after replacing: in service %v", now)
	}

	// Decrementing below the minimum is refused.
	if _, err := e.as.SetDesiredCapacity(ctx, &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String("g"), DesiredCapacity: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}
	e.s.Step()
	live = ids()
	_, err = e.as.TerminateInstanceInAutoScalingGroup(ctx, &autoscaling.TerminateInstanceInAutoScalingGroupInput{
		InstanceId: &live[0], ShouldDecrementDesiredCapacity: aws.Bool(true),
	})
	wantCode(t, err, "ValidationError")
	if !strings.Contains(err.Error(), "Currently, desiredSize equals minSize (1). Terminating instance without replacement will violate group's min size constraint.") {
		t.Errorf("message: %v", err)
	}

	// Batches name the group.
	if err := e.s.UpdateGroupSize("g", 0, 5, 3); err != nil {
		t.Fatal(err)
	}
	e.s.Step()
	live = ids()
	batch, err := e.as.TerminateInstanceInAutoScalingGroup(ctx, &autoscaling.TerminateInstanceInAutoScalingGroupInput{
		AutoScalingGroupName: aws.String("g"), InstanceIds: live[:2], ShouldDecrementDesiredCapacity: aws.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(batch.Activities) != 2 || e.mustGroup(t, "g").DesiredCapacity != 1 {
		t.Errorf("batch: %d activities, desired %d", len(batch.Activities), e.mustGroup(t, "g").DesiredCapacity)
	}

	_, err = e.as.TerminateInstanceInAutoScalingGroup(ctx, &autoscaling.TerminateInstanceInAutoScalingGroupInput{
		InstanceId: aws.String("i-0123456789abcdef9"), ShouldDecrementDesiredCapacity: aws.Bool(false),
	})
	wantCode(t, err, "ValidationError")
	if !strings.Contains(err.Error(), "Instance Id not found") {
		t.Errorf("message: %v", err)
	}
}

func TestDescribeAutoScalingInstancesAndActivities(t *testing.T) {
	e := newEnv(t, Options{})
	e.group(t, "a", true, withSize(0, 30, 40))
	e.group(t, "b", false, withSize(0, 40, 40))
	e.s.Step()

	p := autoscaling.NewDescribeAutoScalingInstancesPaginator(e.as, &autoscaling.DescribeAutoScalingInstancesInput{})
	byGroup := map[string]int{}
	pages := 0
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, i := range out.AutoScalingInstances {
			byGroup[aws.ToString(i.AutoScalingGroupName)]++
			if aws.ToString(i.LifecycleState) != LifecycleInService || aws.ToString(i.InstanceType) != "m5.large" {
				t.Errorf("instance %+v", i)
			}
		}
	}
	if byGroup["a"] != 30 || byGroup["b"] != 40 || pages != 2 {
		t.Errorf("instances by group %v in %d pages", byGroup, pages)
	}

	some := []string{e.mustGroup(t, "b").Instances[3].ID, "i-0123456789abcdef9"}
	out, err := e.as.DescribeAutoScalingInstances(ctx, &autoscaling.DescribeAutoScalingInstancesInput{InstanceIds: some})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.AutoScalingInstances) != 1 || aws.ToString(out.AutoScalingInstances[0].InstanceId) != some[0] {
		t.Errorf("by ID: %+v", out.AutoScalingInstances)
	}
	_, err = e.as.DescribeAutoScalingInstances(ctx, &autoscaling.DescribeAutoScalingInstancesInput{MaxRecords: aws.Int32(51)})
	wantCode(t, err, "ValidationError")

	// 40 launch activities for b, newest first, 100 a page at most.
	ap := autoscaling.NewDescribeScalingActivitiesPaginator(e.as, &autoscaling.DescribeScalingActivitiesInput{AutoScalingGroupName: aws.String("b"), MaxRecords: aws.Int32(15)})
	var acts []astypes.Activity
	for ap.HasMorePages() {
		out, err := ap.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		acts = append(acts, out.Activities...)
	}
	if len(acts) != 40 {
		t.Fatalf("%d activities, want 40", len(acts))
	}
	last := e.mustGroup(t, "b").Instances[39].ID
	if a := acts[0]; aws.ToString(a.Description) != "Launching a new EC2 instance: "+last || a.StatusCode != astypes.ScalingActivityStatusCodeSuccessful ||
		aws.ToInt32(a.Progress) != 100 || a.EndTime == nil || !strings.Contains(aws.ToString(a.Details), "Availability Zone") {
		t.Errorf("newest activity %+v", a)
	}
	all, err := e.as.DescribeScalingActivities(ctx, &autoscaling.DescribeScalingActivitiesInput{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Activities) != 70 {
		t.Errorf("%d activities over all groups, want 70", len(all.Activities))
	}
}
