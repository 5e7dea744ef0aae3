// Package providers builds the cloud provider a configuration names, for
// every command that asks a cloud (spotter controller, spotter plan,
// spotter simulate --from-cluster): one place that maps cloud.provider to
// its package and passes it its section of the configuration.
package providers

import (
	"context"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"spotter.dev/spotter/internal/cloud"
	awsprovider "spotter.dev/spotter/internal/cloud/aws"
	azureprovider "spotter.dev/spotter/internal/cloud/azure"
	"spotter.dev/spotter/internal/cloud/clusterapi"
	gcpprovider "spotter.dev/spotter/internal/cloud/gcp"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// Cloud builds the provider of a cloud or of Cluster API that cfg's
// cloud.provider names (aws, gcp, azure, clusterapi), from its section of
// cfg, cloud.requestsPerSecond and the pricing. workload reaches the
// workload cluster (the clusterapi provider's management cluster, unless its
// section names another). ok is false for the other providers (kubernetes,
// kwok), which ask no cloud: the caller builds those, or none.
func Cloud(ctx context.Context, cfg *v1alpha1.SpotterConfiguration, workload *rest.Config, kube kubernetes.Interface, clk clock.Clock) (p cloud.Provider, ok bool, err error) {
	c := cfg.Cloud
	switch c.Provider {
	case v1alpha1.ProviderAWS:
		p, err = awsprovider.FromConfig(ctx, kube, clk, c.AWS, c.RequestsPerSecond, cfg.Pricing)
	case v1alpha1.ProviderGCP:
		p, err = gcpprovider.FromConfig(ctx, kube, clk, c.GCP, c.RequestsPerSecond, cfg.Pricing)
	case v1alpha1.ProviderAzure:
		p, err = azureprovider.FromConfig(ctx, kube, clk, c.Azure, c.RequestsPerSecond, cfg.Pricing)
	case v1alpha1.ProviderClusterAPI:
		p, err = clusterapi.FromConfig(workload, kube, clk, c.ClusterAPI, cfg.Pricing)
	default:
		return nil, false, nil
	}
	if err != nil {
		return nil, true, err
	}
	return p, true, nil
}
