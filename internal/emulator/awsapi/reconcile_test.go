package awsapi

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

func TestStepLaunchDelayAndHooks(t *testing.T) {
	e := newEnv(t, Options{LaunchDelay: 90 * time.Second})
	e.group(t, "g", true, withSize(0, 0, 10), withTags("team", "blue"))
	var mu sync.Mutex
	var launched, terminated []Instance
	e.s.OnLaunch(func(i Instance) { mu.Lock(); launched = append(launched, i); mu.Unlock() })
	e.s.OnTerminate(func(i Instance) { mu.Lock(); terminated = append(terminated, i); mu.Unlock() })

	if _, err := e.as.SetDesiredCapacity(ctx, &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String("g"), DesiredCapacity: aws.Int32(3)}); err != nil {
		t.Fatal(err)
	}
	if next := e.s.Step(); next != 90*time.Second {
		t.Errorf("Step returned %v, want 90s", next)
	}
	if st := countStates(e.mustGroup(t, "g")); st[LifecyclePending] != 3 {
		t.Errorf("states %v, want 3 Pending", st)
	}
	out, err := e.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{{Name: aws.String("instance-state-name"), Values: []string{"pending"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Reservations) != 3 || out.Reservations[0].Instances[0].InstanceLifecycle != ec2types.InstanceLifecycleTypeSpot {
		t.Errorf("pending spot instances: %+v", out.Reservations)
	}
	if len(launched) != 0 {
		t.Errorf("OnLaunch before the delay: %v", launched)
	}

	e.clock.Step(time.Minute)
	e.s.Step()
	if len(launched) != 0 {
		t.Errorf("OnLaunch before the delay: %v", launched)
	}
	e.clock.Step(30 * time.Second)
	if next := e.s.Step(); next != 0 {
		t.Errorf("Step returned %v with nothing waiting", next)
	}
	if st := countStates(e.mustGroup(t, "g")); st[LifecycleInService] != 3 {
		t.Errorf("states %v, want 3 InService", st)
	}
	if len(launched) != 3 {
		t.Fatalf("OnLaunch saw %d instances, want 3", len(launched))
	}
	for _, i := range launched {
		if i.State != StateRunning || !i.Spot || i.Group != "g" || i.Tags[GroupNameTag] != "g" || i.Tags["team"] != "blue" || i.PrivateDNSName == "" {
			t.Errorf("launched %+v", i)
		}
	}
	// Zones are balanced.
	zones := map[string]int{}
	for _, i := range e.mustGroup(t, "g").Instances {
		zones[i.AvailabilityZone]++
	}
	if zones["us-east-1a"] != 2 || zones["us-east-1b"] != 1 {
		t.Errorf("zones %v", zones)
	}

	// Scale in: the zone with the most instances loses one, the oldest.
	if _, err := e.as.SetDesiredCapacity(ctx, &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String("g"), DesiredCapacity: aws.Int32(2)}); err != nil {
		t.Fatal(err)
	}
	e.s.Step()
	if len(terminated) != 1 || terminated[0].AvailabilityZone != "us-east-1a" || terminated[0].State != StateTerminated {
		t.Errorf("OnTerminate saw %+v", terminated)
	}
}

func TestStepMixedInstancesDistribution(t *testing.T) {
	for _, tc := range []struct {
		name           string
		base, pct      int32
		desired        int32
		onDemand, spot int
	}{
		{"all spot", 0, 0, 4, 0, 4},
		{"all on-demand", 0, 100, 4, 4, 0},
		{"base only", 2, 0, 5, 2, 3},
		{"base and half", 1, 50, 5, 3, 2},
		{"rounded towards on-demand", 0, 30, 5, 2, 3},
		{"base above desired", 6, 0, 3, 3, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Options{})
			e.group(t, "g", false, withSize(0, tc.desired, 10), withMixed(tc.base, tc.pct, "m5.large", "c5.large"))
			e.s.Step()
			od, spot := 0, 0
			for _, i := range e.mustGroup(t, "g").Instances {
				if i.Spot {
					spot++
				} else {
					od++
				}
			}
			if od != tc.onDemand || spot != tc.spot {
				t.Errorf("%d on-demand and %d spot, want %d and %d", od, spot, tc.onDemand, tc.spot)
			}
		})
	}
}

func TestStepSpotLowestPrice(t *testing.T) {
	e := newEnv(t, Options{})
	e.s.SetSpotPrice("m5.large", "us-east-1a", 0.05, time.Time{})
	e.s.SetSpotPrice("c5.large", "us-east-1a", 0.02, time.Time{})
	e.group(t, "g", false, withSize(0, 2, 10), withZones("us-east-1a"), withMixed(0, 0, "m5.large", "c5.large"))
	// withMixed chose capacity-optimized; switch the group to lowest-price.
	e.s.mu.Lock()
	e.s.groups["g"].MixedInstancesPolicy.InstancesDistribution.SpotAllocationStrategy = "lowest-price"
	e.s.mu.Unlock()
	e.s.Step()
	for _, i := range e.mustGroup(t, "g").Instances {
		if i.InstanceType != "c5.large" {
			t.Errorf("launched %s, want the cheaper c5.large", i.InstanceType)
		}
	}
}

func TestStepProtectedFromScaleIn(t *testing.T) {
	e := newEnv(t, Options{})
	e.group(t, "g", false, withSize(0, 2, 10), func(g *Group) { g.NewInstancesProtectedFromScaleIn = true })
	e.s.Step()
	if err := e.s.UpdateGroupSize("g", 0, 10, 0); err != nil {
		t.Fatal(err)
	}
	e.s.Step()
	if st := countStates(e.mustGroup(t, "g")); st[LifecycleInService] != 2 {
		t.Errorf("protected instances were removed: %v", st)
	}
}

func TestRunStepsOnTheClock(t *testing.T) {
	e := newEnv(t, Options{})
	e.group(t, "g", false, withSize(0, 1, 10))
	c, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { e.s.Run(c, 10*time.Second); close(done) }()
	launched := make(chan Instance, 1)
	e.s.OnLaunch(func(i Instance) { launched <- i })
	for !e.clock.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	e.clock.Step(10 * time.Second)
	i := <-launched
	cancel()
	<-done
	if i.Group != "g" {
		t.Errorf("launched %+v", i)
	}
}

func TestTerminateInstanceFromEC2Side(t *testing.T) {
	e := newEnv(t, Options{})
	e.group(t, "g", true, withSize(0, 2, 10))
	e.s.Step()
	victim := e.mustGroup(t, "g").Instances[0].ID
	if err := e.s.TerminateInstance(victim); err != nil {
		t.Fatal(err)
	}
	e.s.Step()
	g := e.mustGroup(t, "g")
	if len(g.Instances) != 2 || slices.ContainsFunc(g.Instances, func(i Instance) bool { return i.ID == victim }) {
		t.Errorf("instances after the interruption: %+v", g.Instances)
	}
	out, err := e.as.DescribeScalingActivities(ctx, &autoscaling.DescribeScalingActivitiesInput{AutoScalingGroupName: aws.String("g")})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, a := range out.Activities {
		if aws.ToString(a.Description) == "Terminating EC2 instance: "+victim {
			found = true
		}
	}
	if !found {
		t.Errorf("no termination activity for %s", victim)
	}
}

// A pool with capacity left for one instance delivers one of a request for
// three: the rest fails as a shortage in a scaling activity, as Auto
// Scaling reports a partial launch, and the pool stays short.
func TestStepPartialDelivery(t *testing.T) {
	e := newEnv(t, Options{})
	e.s.SetPoolCapacityLeft("m5.large", "us-east-1a", true, 1)
	e.group(t, "g", true, withSize(0, 3, 10), withZones("us-east-1a"))
	e.s.Step()
	g := e.mustGroup(t, "g")
	if len(g.Instances) != 1 || g.DesiredCapacity != 3 {
		t.Fatalf("%d instances of desired %d, want 1 of 3", len(g.Instances), g.DesiredCapacity)
	}
	e.s.Step()
	if g := e.mustGroup(t, "g"); len(g.Instances) != 1 {
		t.Errorf("%d instances after another step, want the pool still dry", len(g.Instances))
	}
	e.s.mu.Lock()
	var failed int
	for _, a := range e.s.activities {
		if a.group == "g" && a.statusCode == "Failed" && strings.Contains(a.statusMsg, "InsufficientInstanceCapacity") {
			failed++
		}
	}
	e.s.mu.Unlock()
	if failed == 0 {
		t.Error("no failed scaling activity for the instances not launched")
	}
	e.s.SetPoolCapacityLeft("m5.large", "us-east-1a", true, -1)
	e.s.Step()
	if g := e.mustGroup(t, "g"); len(g.Instances) != 3 {
		t.Errorf("%d instances once the limit is lifted, want 3", len(g.Instances))
	}
}
