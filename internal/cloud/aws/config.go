package aws

import (
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"spotter.dev/spotter/internal/cloud/internal/providerkit"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// FromConfig builds the provider from Spotter's configuration: the SDK's
// standard credential chain and region (cfg.Region overrides the region), the
// standard endpoint variables, and the groups cfg names or its cluster's tags
// select. Its requests go at most requestsPerSecond a second
// (cloud.requestsPerSecond).
func FromConfig(ctx context.Context, kube kubernetes.Interface, clk clock.Clock, cfg v1alpha1.AWSConfig, requestsPerSecond int32, pricing v1alpha1.PricingConfig) (*Provider, error) {
	sdk, err := SDKConfig(ctx, cfg, requestsPerSecond)
	if err != nil {
		return nil, err
	}
	return New(newEC2Direct(ec2.NewFromConfig(sdk)), newAutoScalingDirect(autoscaling.NewFromConfig(sdk)), kube, clk,
		Options{ClusterName: cfg.ClusterName, GroupNames: cfg.AutoScalingGroups, Pricing: pricing, Region: sdk.Region,
			TerminateOutsideGroups: cfg.TerminateInstancesOutsideGroups})
}

// SDKConfig loads the AWS SDK's configuration as Spotter uses it: the
// standard credential chain, region and endpoint variables, cfg.Region
// overriding the region, requests paced at requestsPerSecond.
func SDKConfig(ctx context.Context, cfg v1alpha1.AWSConfig, requestsPerSecond int32) (aws.Config, error) {
	// Without a region elsewhere, the instance metadata service's.
	opts := []func(*awsconfig.LoadOptions) error{awsconfig.WithEC2IMDSRegion()}
	if cfg.Region != "" {
		opts = append(opts, awsconfig.WithRegion(cfg.Region))
	}
	sdk, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("cloud.aws: loading the AWS SDK configuration: %w", err)
	}
	sdk.HTTPClient = readOnlyBodies{providerkit.NewLimiter(requestsPerSecond).Doer(sdk.HTTPClient)}
	if sdk.Region == "" {
		return aws.Config{}, fmt.Errorf("cloud.aws: no region: set cloud.aws.region or AWS_REGION, or run where the instance metadata service answers")
	}
	return sdk, nil
}

// readOnlyBodies sends requests with their bodies reduced to Read and Close.
// The SDK closes a request's body once the response headers arrive, and the
// closed body answers WriteTo with io.EOF as an error; net/http, checking for
// extra bytes after a body of known length, prefers WriteTo, and when the
// answer came first (a server that answers at once, such as a local
// endpoint) it takes that io.EOF for a failed write and closes the connection
// under the response being read. Read on a closed body is a clean end.
type readOnlyBodies struct{ next aws.HTTPClient }

// Do implements aws.HTTPClient.
func (c readOnlyBodies) Do(r *http.Request) (*http.Response, error) {
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = readCloser{r.Body}
	}
	return c.next.Do(r)
}

// readCloser exposes only Read and Close of a body.
type readCloser struct{ rc io.ReadCloser }

func (b readCloser) Read(p []byte) (int, error) { return b.rc.Read(p) }
func (b readCloser) Close() error               { return b.rc.Close() }
