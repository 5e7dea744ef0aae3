package gcp

import (
	"context"
	"fmt"
	"strings"

	billing "cloud.google.com/go/billing/apiv1"
	compute "cloud.google.com/go/compute/apiv1"
	"google.golang.org/api/option"
	htransport "google.golang.org/api/transport/http"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"spotter.dev/spotter/internal/cloud/internal/providerkit"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// cloudPlatformScope is the OAuth scope of the Compute Engine and Cloud
// Billing clients (their DefaultAuthScopes).
const cloudPlatformScope = "https://www.googleapis.com/auth/cloud-platform"

// FromConfig builds the provider from Spotter's configuration: REST clients
// of the Compute Engine API and of the Cloud Billing Catalog API (prices)
// with Application Default Credentials, or, for an
// http:// cfg.Endpoint (tests, a local proxy), none: credentials are never
// sent in the clear. Its requests go at most requestsPerSecond a second
// (cloud.requestsPerSecond).
func FromConfig(ctx context.Context, kube kubernetes.Interface, clk clock.Clock, cfg v1alpha1.GCPConfig, requestsPerSecond int32, pricing v1alpha1.PricingConfig) (*Provider, error) {
	var opts []option.ClientOption
	if cfg.Endpoint != "" {
		opts = append(opts, option.WithEndpoint(strings.TrimSuffix(cfg.Endpoint, "/")))
		if strings.HasPrefix(cfg.Endpoint, "http://") {
			opts = append(opts, option.WithoutAuthentication())
		}
	}
	wrap := func(what string, err error) error {
		return fmt.Errorf("cloud.gcp: the Compute Engine %s client (Application Default Credentials): %w", what, err)
	}
	// One authenticated HTTP client for every client, its transport paced.
	hc, _, err := htransport.NewClient(ctx, append(opts, option.WithScopes(cloudPlatformScope))...)
	if err != nil {
		return nil, wrap("HTTP", err)
	}
	hc.Transport = providerkit.NewLimiter(requestsPerSecond).Transport(hc.Transport)
	opts = append(opts, option.WithHTTPClient(hc))
	var c Clients
	if c.Instances, err = compute.NewInstancesRESTClient(ctx, opts...); err != nil {
		return nil, wrap("instances", err)
	}
	if c.Groups, err = compute.NewInstanceGroupManagersRESTClient(ctx, opts...); err != nil {
		return nil, wrap("instance group managers", err)
	}
	if c.RegionalGroups, err = compute.NewRegionInstanceGroupManagersRESTClient(ctx, opts...); err != nil {
		return nil, wrap("regional instance group managers", err)
	}
	if c.Templates, err = compute.NewInstanceTemplatesRESTClient(ctx, opts...); err != nil {
		return nil, wrap("instance templates", err)
	}
	if c.RegionalTemplates, err = compute.NewRegionInstanceTemplatesRESTClient(ctx, opts...); err != nil {
		return nil, wrap("regional instance templates", err)
	}
	if c.MachineTypes, err = compute.NewMachineTypesRESTClient(ctx, opts...); err != nil {
		return nil, wrap("machine types", err)
	}
	// The Cloud Billing Catalog at the same endpoint when one is set: one
	// emulator (or proxy) serves both.
	if c.Billing, err = billing.NewCloudCatalogRESTClient(ctx, opts...); err != nil {
		return nil, fmt.Errorf("cloud.gcp: the Cloud Billing Catalog client (Application Default Credentials): %w", err)
	}
	return New(c, kube, clk, Options{Project: cfg.Project, ClusterName: cfg.ClusterName, NodeGroups: cfg.NodeGroups, Pricing: pricing})
}
