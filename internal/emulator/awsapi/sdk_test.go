package awsapi

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/smithy-go"
	testingclock "k8s.io/utils/clock/testing"
)

// env is an emulator behind an httptest server with SDK clients on it.
type env struct {
	s     *Server
	clock *testingclock.FakeClock
	ec2   *ec2.Client
	as    *autoscaling.Client
	url   string
}

var epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// newEnv starts an emulator and SDK clients without retries.
func newEnv(t *testing.T, opts Options) *env {
	t.Helper()
	clk := testingclock.NewFakeClock(epoch)
	opts.Clock = clk
	s := New(opts)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	cfg := sdkConfig(t, srv.URL, func() aws.Retryer { return aws.NopRetryer{} })
	return &env{s: s, clock: clk, ec2: ec2.NewFromConfig(cfg), as: autoscaling.NewFromConfig(cfg), url: srv.URL}
}

// sdkConfig loads an SDK configuration the way a provider does, pointed at
// url with static credentials and no shared files.
func sdkConfig(t *testing.T, url string, retryer func() aws.Retryer) aws.Config {
	t.Helper()
	cfg, err := config.LoadDefaultConfig(context.Background(),
		config.WithRegion("us-east-1"),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", "")),
		config.WithSharedConfigFiles([]string{}),
		config.WithSharedCredentialsFiles([]string{}),
		config.WithBaseEndpoint(url),
		config.WithRetryer(retryer),
	)
	if err != nil {
		t.Fatal(err)
	}
	// Set after loading: the loader wants its own client type when the
	// environment names a CA bundle, and the emulator serves plain HTTP.
	cfg.HTTPClient = NewHTTPClient()
	return cfg
}

// apiError returns the API error code and HTTP status of err.
func apiError(t *testing.T, err error) (string, int) {
	t.Helper()
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("want an API error, got %v", err)
	}
	status := 0
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	return ae.ErrorCode(), status
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want %s, got no error", code)
	}
	if got, _ := apiError(t, err); got != code {
		t.Fatalf("want %s, got %v", code, err)
	}
}

// Builders for the state.

type groupOption func(*Group)

func withTags(kv ...string) groupOption {
	return func(g *Group) {
		if g.Tags == nil {
			g.Tags = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			g.Tags[kv[i]] = kv[i+1]
		}
	}
}

func withSize(minSize, desired, maxSize int32) groupOption {
	return func(g *Group) { g.MinSize, g.DesiredCapacity, g.MaxSize = minSize, desired, maxSize }
}

func withZones(zones ...string) groupOption {
	return func(g *Group) { g.AvailabilityZones = zones }
}

func withMixed(base, pct int32, types ...string) groupOption {
	return func(g *Group) {
		g.MixedInstancesPolicy = &MixedInstancesPolicy{
			LaunchTemplate: *g.LaunchTemplate,
			InstanceTypes:  types,
			InstancesDistribution: InstancesDistribution{
				OnDemandBaseCapacity: base, OnDemandPercentageAboveBaseCapacity: pct, SpotAllocationStrategy: "capacity-optimized",
			},
		}
		g.LaunchTemplate = nil
	}
}

// group creates a group on a new launch template of type m5.large.
func (e *env) group(t *testing.T, name string, spot bool, opts ...groupOption) {
	t.Helper()
	lt, err := e.s.CreateLaunchTemplate(name+"-lt", LaunchTemplateData{InstanceType: "m5.large", Spot: spot})
	if err != nil {
		t.Fatal(err)
	}
	g := Group{Name: name, MaxSize: 10, AvailabilityZones: []string{"us-east-1a", "us-east-1b"}, LaunchTemplate: &LaunchTemplateRef{ID: lt}}
	for _, o := range opts {
		o(&g)
	}
	if err := e.s.CreateGroup(g); err != nil {
		t.Fatal(err)
	}
}

func (e *env) mustGroup(t *testing.T, name string) GroupStatus {
	t.Helper()
	g, ok := e.s.GroupStatus(name)
	if !ok {
		t.Fatalf("no group %s", name)
	}
	return g
}

func countStates(g GroupStatus) map[string]int {
	out := map[string]int{}
	for _, i := range g.Instances {
		out[i.LifecycleState]++
	}
	return out
}

var ctx = context.Background()
