package gcp

import (
	"context"

	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/googleapis/gax-go/v2"
)

// The parts of the Compute Engine client (cloud.google.com/go/compute/apiv1)
// the provider calls, one interface per client. The *compute.XClient types
// implement them.

// InstancesAPI is the part of compute.InstancesClient the provider uses.
type InstancesAPI interface {
	AggregatedList(context.Context, *computepb.AggregatedListInstancesRequest, ...gax.CallOption) *compute.InstancesScopedListPairIterator
	Get(context.Context, *computepb.GetInstanceRequest, ...gax.CallOption) (*computepb.Instance, error)
	Delete(context.Context, *computepb.DeleteInstanceRequest, ...gax.CallOption) (*compute.Operation, error)
}

// ZonalGroupsAPI is the part of compute.InstanceGroupManagersClient the
// provider uses.
type ZonalGroupsAPI interface {
	AggregatedList(context.Context, *computepb.AggregatedListInstanceGroupManagersRequest, ...gax.CallOption) *compute.InstanceGroupManagersScopedListPairIterator
	Get(context.Context, *computepb.GetInstanceGroupManagerRequest, ...gax.CallOption) (*computepb.InstanceGroupManager, error)
	Resize(context.Context, *computepb.ResizeInstanceGroupManagerRequest, ...gax.CallOption) (*compute.Operation, error)
	DeleteInstances(context.Context, *computepb.DeleteInstancesInstanceGroupManagerRequest, ...gax.CallOption) (*compute.Operation, error)
	ListManagedInstances(context.Context, *computepb.ListManagedInstancesInstanceGroupManagersRequest, ...gax.CallOption) *compute.ManagedInstanceIterator
}

// RegionalGroupsAPI is the part of compute.RegionInstanceGroupManagersClient
// the provider uses.
type RegionalGroupsAPI interface {
	Get(context.Context, *computepb.GetRegionInstanceGroupManagerRequest, ...gax.CallOption) (*computepb.InstanceGroupManager, error)
	Resize(context.Context, *computepb.ResizeRegionInstanceGroupManagerRequest, ...gax.CallOption) (*compute.Operation, error)
	DeleteInstances(context.Context, *computepb.DeleteInstancesRegionInstanceGroupManagerRequest, ...gax.CallOption) (*compute.Operation, error)
	ListManagedInstances(context.Context, *computepb.ListManagedInstancesRegionInstanceGroupManagersRequest, ...gax.CallOption) *compute.ManagedInstanceIterator
}

// TemplatesAPI is the part of compute.InstanceTemplatesClient the provider
// uses.
type TemplatesAPI interface {
	Get(context.Context, *computepb.GetInstanceTemplateRequest, ...gax.CallOption) (*computepb.InstanceTemplate, error)
}

// RegionalTemplatesAPI is the part of compute.RegionInstanceTemplatesClient
// the provider uses.
type RegionalTemplatesAPI interface {
	Get(context.Context, *computepb.GetRegionInstanceTemplateRequest, ...gax.CallOption) (*computepb.InstanceTemplate, error)
}

// MachineTypesAPI is the part of compute.MachineTypesClient the provider
// uses.
type MachineTypesAPI interface {
	Get(context.Context, *computepb.GetMachineTypeRequest, ...gax.CallOption) (*computepb.MachineType, error)
}

// Clients are the Compute Engine clients the provider calls.
type Clients struct {
	Instances         InstancesAPI
	Groups            ZonalGroupsAPI
	RegionalGroups    RegionalGroupsAPI
	Templates         TemplatesAPI
	RegionalTemplates RegionalTemplatesAPI
	MachineTypes      MachineTypesAPI
	// Billing reads prices from the Cloud Billing Catalog; nil: configured
	// prices only.
	Billing BillingAPI
}

var (
	_ InstancesAPI         = (*compute.InstancesClient)(nil)
	_ ZonalGroupsAPI       = (*compute.InstanceGroupManagersClient)(nil)
	_ RegionalGroupsAPI    = (*compute.RegionInstanceGroupManagersClient)(nil)
	_ TemplatesAPI         = (*compute.InstanceTemplatesClient)(nil)
	_ RegionalTemplatesAPI = (*compute.RegionInstanceTemplatesClient)(nil)
	_ MachineTypesAPI      = (*compute.MachineTypesClient)(nil)
)
