package aws

import (
	"context"
	"fmt"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// FromConfig builds the provider from Spotter's configuration: the SDK's
// standard credential chain and region (cfg.Region overrides the region), the
// standard endpoint variables, and the groups cfg names or its cluster's tags
// select.
func FromConfig(ctx context.Context, kube kubernetes.Interface, clk clock.Clock, cfg v1alpha1.AWSConfig, pricing v1alpha1.PricingConfig) (*Provider, error) {
	// Without a region elsewhere, the instance metadata service's.
	opts := []func(*awsconfig.LoadOptions) error{awsconfig.WithEC2IMDSRegion()}
	if cfg.Region != "" {
		opts = append(opts, awsconfig.WithRegion(cfg.Region))
	}
	sdk, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("cloud.aws: loading the AWS SDK configuration: %w", err)
	}
	if sdk.Region == "" {
		return nil, fmt.Errorf("cloud.aws: no region: set cloud.aws.region or AWS_REGION, or run where the instance metadata service answers")
	}
	return New(ec2.NewFromConfig(sdk), autoscaling.NewFromConfig(sdk), kube, clk,
		Options{ClusterName: cfg.ClusterName, GroupNames: cfg.AutoScalingGroups, Pricing: pricing})
}
