package azure

import (
	"context"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v6"
)

// The parts of the ARM compute clients (armcompute) the provider calls, one
// interface per client. The *armcompute.XClient types implement them.

// ScaleSetsAPI is the part of armcompute.VirtualMachineScaleSetsClient the
// provider uses.
type ScaleSetsAPI interface {
	NewListPager(resourceGroupName string, options *armcompute.VirtualMachineScaleSetsClientListOptions) *runtime.Pager[armcompute.VirtualMachineScaleSetsClientListResponse]
	Get(ctx context.Context, resourceGroupName, vmScaleSetName string, options *armcompute.VirtualMachineScaleSetsClientGetOptions) (armcompute.VirtualMachineScaleSetsClientGetResponse, error)
	BeginUpdate(ctx context.Context, resourceGroupName, vmScaleSetName string, parameters armcompute.VirtualMachineScaleSetUpdate,
		options *armcompute.VirtualMachineScaleSetsClientBeginUpdateOptions) (*runtime.Poller[armcompute.VirtualMachineScaleSetsClientUpdateResponse], error)
	BeginDeleteInstances(ctx context.Context, resourceGroupName, vmScaleSetName string, vmInstanceIDs armcompute.VirtualMachineScaleSetVMInstanceRequiredIDs,
		options *armcompute.VirtualMachineScaleSetsClientBeginDeleteInstancesOptions) (*runtime.Poller[armcompute.VirtualMachineScaleSetsClientDeleteInstancesResponse], error)
}

// ScaleSetVMsAPI is the part of armcompute.VirtualMachineScaleSetVMsClient
// the provider uses.
type ScaleSetVMsAPI interface {
	NewListPager(resourceGroupName, virtualMachineScaleSetName string, options *armcompute.VirtualMachineScaleSetVMsClientListOptions) *runtime.Pager[armcompute.VirtualMachineScaleSetVMsClientListResponse]
}

// VMsAPI is the part of armcompute.VirtualMachinesClient the provider uses.
type VMsAPI interface {
	NewListPager(resourceGroupName string, options *armcompute.VirtualMachinesClientListOptions) *runtime.Pager[armcompute.VirtualMachinesClientListResponse]
	BeginDelete(ctx context.Context, resourceGroupName, vmName string, options *armcompute.VirtualMachinesClientBeginDeleteOptions) (*runtime.Poller[armcompute.VirtualMachinesClientDeleteResponse], error)
}

// SKUsAPI is the part of armcompute.ResourceSKUsClient the provider uses.
type SKUsAPI interface {
	NewListPager(options *armcompute.ResourceSKUsClientListOptions) *runtime.Pager[armcompute.ResourceSKUsClientListResponse]
}

// Clients are the ARM compute clients the provider calls.
type Clients struct {
	ScaleSets   ScaleSetsAPI
	ScaleSetVMs ScaleSetVMsAPI
	VMs         VMsAPI
	SKUs        SKUsAPI
}

var (
	_ ScaleSetsAPI   = (*armcompute.VirtualMachineScaleSetsClient)(nil)
	_ ScaleSetVMsAPI = (*armcompute.VirtualMachineScaleSetVMsClient)(nil)
	_ VMsAPI         = (*armcompute.VirtualMachinesClient)(nil)
	_ SKUsAPI        = (*armcompute.ResourceSKUsClient)(nil)
)

// NewClients builds the clients of a subscription with cred (nil: no
// Authorization header, for an http:// test endpoint) and opts (the cloud
// configuration, retries, transport).
func NewClients(subscriptionID string, cred azcore.TokenCredential, opts *arm.ClientOptions) (Clients, error) {
	f, err := armcompute.NewClientFactory(subscriptionID, cred, opts)
	if err != nil {
		return Clients{}, fmt.Errorf("the ARM compute clients: %w", err)
	}
	return Clients{ScaleSets: f.NewVirtualMachineScaleSetsClient(), ScaleSetVMs: f.NewVirtualMachineScaleSetVMsClient(),
		VMs: f.NewVirtualMachinesClient(), SKUs: f.NewResourceSKUsClient()}, nil
}
