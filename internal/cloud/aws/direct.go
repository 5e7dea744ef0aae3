package aws

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
)

// ec2Direct and autoScalingDirect hand the provider the SDK clients'
// operations it calls, as method values, and not the clients themselves.
// Converting a client (or a struct holding one) to an interface, as EC2API
// and AutoScalingAPI are, makes the linker keep every exported method of it
// in a binary that looks methods up by name (text/template does, and cobra
// and cel-go bring it in): all of EC2's operations, about 19 MB of machine
// code (BENCHMARKS.md, "Controller at scale").
type ec2Direct struct {
	describeInstances              func(context.Context, *ec2.DescribeInstancesInput, ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error)
	terminateInstances             func(context.Context, *ec2.TerminateInstancesInput, ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error)
	describeSpotPriceHistory       func(context.Context, *ec2.DescribeSpotPriceHistoryInput, ...func(*ec2.Options)) (*ec2.DescribeSpotPriceHistoryOutput, error)
	describeLaunchTemplateVersions func(context.Context, *ec2.DescribeLaunchTemplateVersionsInput, ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplateVersionsOutput, error)
	describeInstanceTypes          func(context.Context, *ec2.DescribeInstanceTypesInput, ...func(*ec2.Options)) (*ec2.DescribeInstanceTypesOutput, error)
	typesFromRequirements          func(context.Context, *ec2.GetInstanceTypesFromInstanceRequirementsInput, ...func(*ec2.Options)) (*ec2.GetInstanceTypesFromInstanceRequirementsOutput, error)
	describeImages                 func(context.Context, *ec2.DescribeImagesInput, ...func(*ec2.Options)) (*ec2.DescribeImagesOutput, error)
}

func newEC2Direct(c *ec2.Client) ec2Direct {
	return ec2Direct{
		describeInstances:              c.DescribeInstances,
		terminateInstances:             c.TerminateInstances,
		describeSpotPriceHistory:       c.DescribeSpotPriceHistory,
		describeLaunchTemplateVersions: c.DescribeLaunchTemplateVersions,
		describeInstanceTypes:          c.DescribeInstanceTypes,
		typesFromRequirements:          c.GetInstanceTypesFromInstanceRequirements,
		describeImages:                 c.DescribeImages,
	}
}

func (d ec2Direct) GetInstanceTypesFromInstanceRequirements(ctx context.Context, in *ec2.GetInstanceTypesFromInstanceRequirementsInput, o ...func(*ec2.Options)) (*ec2.GetInstanceTypesFromInstanceRequirementsOutput, error) {
	return d.typesFromRequirements(ctx, in, o...)
}

func (d ec2Direct) DescribeImages(ctx context.Context, in *ec2.DescribeImagesInput, o ...func(*ec2.Options)) (*ec2.DescribeImagesOutput, error) {
	return d.describeImages(ctx, in, o...)
}

func (d ec2Direct) DescribeInstances(ctx context.Context, in *ec2.DescribeInstancesInput, o ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error) {
	return d.describeInstances(ctx, in, o...)
}

func (d ec2Direct) TerminateInstances(ctx context.Context, in *ec2.TerminateInstancesInput, o ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error) {
	return d.terminateInstances(ctx, in, o...)
}

func (d ec2Direct) DescribeSpotPriceHistory(ctx context.Context, in *ec2.DescribeSpotPriceHistoryInput, o ...func(*ec2.Options)) (*ec2.DescribeSpotPriceHistoryOutput, error) {
	return d.describeSpotPriceHistory(ctx, in, o...)
}

func (d ec2Direct) DescribeLaunchTemplateVersions(ctx context.Context, in *ec2.DescribeLaunchTemplateVersionsInput, o ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplateVersionsOutput, error) {
	return d.describeLaunchTemplateVersions(ctx, in, o...)
}

func (d ec2Direct) DescribeInstanceTypes(ctx context.Context, in *ec2.DescribeInstanceTypesInput, o ...func(*ec2.Options)) (*ec2.DescribeInstanceTypesOutput, error) {
	return d.describeInstanceTypes(ctx, in, o...)
}

type autoScalingDirect struct {
	describeAutoScalingGroups           func(context.Context, *autoscaling.DescribeAutoScalingGroupsInput, ...func(*autoscaling.Options)) (*autoscaling.DescribeAutoScalingGroupsOutput, error)
	setDesiredCapacity                  func(context.Context, *autoscaling.SetDesiredCapacityInput, ...func(*autoscaling.Options)) (*autoscaling.SetDesiredCapacityOutput, error)
	terminateInstanceInAutoScalingGroup func(context.Context, *autoscaling.TerminateInstanceInAutoScalingGroupInput, ...func(*autoscaling.Options)) (*autoscaling.TerminateInstanceInAutoScalingGroupOutput, error)
	describeScalingActivities           func(context.Context, *autoscaling.DescribeScalingActivitiesInput, ...func(*autoscaling.Options)) (*autoscaling.DescribeScalingActivitiesOutput, error)
}

func newAutoScalingDirect(c *autoscaling.Client) autoScalingDirect {
	return autoScalingDirect{
		describeAutoScalingGroups:           c.DescribeAutoScalingGroups,
		setDesiredCapacity:                  c.SetDesiredCapacity,
		terminateInstanceInAutoScalingGroup: c.TerminateInstanceInAutoScalingGroup,
		describeScalingActivities:           c.DescribeScalingActivities,
	}
}

func (d autoScalingDirect) DescribeAutoScalingGroups(ctx context.Context, in *autoscaling.DescribeAutoScalingGroupsInput, o ...func(*autoscaling.Options)) (*autoscaling.DescribeAutoScalingGroupsOutput, error) {
	return d.describeAutoScalingGroups(ctx, in, o...)
}

func (d autoScalingDirect) SetDesiredCapacity(ctx context.Context, in *autoscaling.SetDesiredCapacityInput, o ...func(*autoscaling.Options)) (*autoscaling.SetDesiredCapacityOutput, error) {
	return d.setDesiredCapacity(ctx, in, o...)
}

func (d autoScalingDirect) TerminateInstanceInAutoScalingGroup(ctx context.Context, in *autoscaling.TerminateInstanceInAutoScalingGroupInput, o ...func(*autoscaling.Options)) (*autoscaling.TerminateInstanceInAutoScalingGroupOutput, error) {
	return d.terminateInstanceInAutoScalingGroup(ctx, in, o...)
}

func (d autoScalingDirect) DescribeScalingActivities(ctx context.Context, in *autoscaling.DescribeScalingActivitiesInput, o ...func(*autoscaling.Options)) (*autoscaling.DescribeScalingActivitiesOutput, error) {
	return d.describeScalingActivities(ctx, in, o...)
}
