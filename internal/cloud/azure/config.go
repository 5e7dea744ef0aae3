package azure

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	azcloud "github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"spotter.dev/spotter/internal/cloud/internal/providerkit"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// FromConfig builds the provider from Spotter's configuration: ARM compute
// clients of the subscription with workload identity (when the AKS workload
// identity webhook set AZURE_FEDERATED_TOKEN_FILE) or else a managed
// identity, or, for an http:// cfg.Endpoint (tests, a local proxy), no
// credential: a token is never sent in the clear. Its requests go at most
// requestsPerSecond a second (cloud.requestsPerSecond), the Retail Prices
// API's included.
func FromConfig(_ context.Context, kube kubernetes.Interface, clk clock.Clock, cfg v1alpha1.AzureConfig, requestsPerSecond int32, pricing v1alpha1.PricingConfig) (*Provider, error) {
	paced := providerkit.NewLimiter(requestsPerSecond).Doer(&http.Client{})
	opts := ClientOptions(cfg.Endpoint)
	opts.Transport = paced
	var cred azcore.TokenCredential
	if !strings.HasPrefix(cfg.Endpoint, "http://") {
		var err error
		if cred, err = credential(cfg.ManagedIdentityClientID); err != nil {
			return nil, err
		}
	}
	c, err := NewClients(cfg.SubscriptionID, cred, opts)
	if err != nil {
		return nil, fmt.Errorf("cloud.azure: %w", err)
	}
	// The Retail Prices API at the endpoint when one is set (one emulator or
	// proxy serves both), without a credential: it is public.
	retail, err := NewRetailPrices(cfg.Endpoint, 4, time.Second, paced)
	if err != nil {
		return nil, fmt.Errorf("cloud.azure: endpoint: %w", err)
	}
	p, err := New(c, kube, clk, Options{SubscriptionID: cfg.SubscriptionID, ResourceGroup: cfg.ResourceGroup, NodeGroups: cfg.NodeGroups, Pricing: pricing})
	if err != nil {
		return nil, err
	}
	return p.WithRetailPrices(retail), nil
}

// credential is workload identity when its environment is set, else a
// managed identity (the user-assigned one with clientID, when given). No
// other source (no secret, no CLI login) is tried.
func credential(clientID string) (azcore.TokenCredential, error) {
	if os.Getenv("AZURE_FEDERATED_TOKEN_FILE") != "" {
		c, err := azidentity.NewWorkloadIdentityCredential(nil)
		if err != nil {
			return nil, fmt.Errorf("cloud.azure: workload identity (AZURE_FEDERATED_TOKEN_FILE, AZURE_CLIENT_ID, AZURE_TENANT_ID): %w", err)
		}
		return c, nil
	}
	o := &azidentity.ManagedIdentityCredentialOptions{}
	if clientID != "" {
		o.ID = azidentity.ClientID(clientID)
	}
	c, err := azidentity.NewManagedIdentityCredential(o)
	if err != nil {
		return nil, fmt.Errorf("cloud.azure: managed identity: %w", err)
	}
	return c, nil
}

// ClientOptions are the ARM client options the provider uses: endpoint
// (empty: Azure's public cloud) as the Resource Manager endpoint, no
// resource provider registration (Spotter registers nothing), and no retry
// of 429: a throttled call becomes a *cloud.ThrottledError at once, with
// ARM's Retry-After, rather than a sleep inside the SDK (ARM's throttling
// windows last minutes). 408, 500, 502, 503 and 504 are retried by the SDK
// (three times, from 800 ms).
func ClientOptions(endpoint string) *arm.ClientOptions {
	o := &arm.ClientOptions{DisableRPRegistration: true}
	if endpoint != "" {
		o.Cloud = azcloud.Configuration{
			ActiveDirectoryAuthorityHost: azcloud.AzurePublic.ActiveDirectoryAuthorityHost,
			Services: map[azcloud.ServiceName]azcloud.ServiceConfiguration{
				azcloud.ResourceManager: {Endpoint: strings.TrimSuffix(endpoint, "/"), Audience: "https://management.core.windows.net/"},
			},
		}
	}
	o.Retry = policy.RetryOptions{StatusCodes: []int{http.StatusRequestTimeout, http.StatusInternalServerError, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout}}
	return o
}
