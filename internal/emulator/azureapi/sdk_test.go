package azureapi

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	azcloud "github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v6"
	testingclock "k8s.io/utils/clock/testing"
)

const (
	sub   = "0b1f6471-1bf0-4dda-aec3-111122223333"
	rg    = "MC_lab_aks_westeurope"
	token = "lab-token"
)

var epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// fixedToken is a credential that returns one token, never expiring within
// a test.
type fixedToken struct{}

func (fixedToken) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{Token: token, ExpiresOn: time.Now().Add(time.Hour)}, nil
}

// env is an emulator behind an httptest server with the official clients on
// it, authenticating with a fixed token.
type env struct {
	s     *Server
	clock *testingclock.FakeClock
	sets  *armcompute.VirtualMachineScaleSetsClient
	svms  *armcompute.VirtualMachineScaleSetVMsClient
	vms   *armcompute.VirtualMachinesClient
	skus  *armcompute.ResourceSKUsClient
	url   string
}

func newEnv(t *testing.T, opts Options) *env {
	t.Helper()
	clk := testingclock.NewFakeClock(epoch)
	opts.Clock, opts.Token = clk, token
	s := New(opts)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	o := &arm.ClientOptions{DisableRPRegistration: true, ClientOptions: policy.ClientOptions{
		Cloud: azcloud.Configuration{Services: map[azcloud.ServiceName]azcloud.ServiceConfiguration{
			azcloud.ResourceManager: {Endpoint: srv.URL, Audience: "https://management.core.windows.net/"}}},
		InsecureAllowCredentialWithHTTP: true,
		Retry:                           policy.RetryOptions{MaxRetries: -1},
	}}
	f, err := armcompute.NewClientFactory(sub, fixedToken{}, o)
	if err != nil {
		t.Fatal(err)
	}
	return &env{s: s, clock: clk, sets: f.NewVirtualMachineScaleSetsClient(), svms: f.NewVirtualMachineScaleSetVMsClient(),
		vms: f.NewVirtualMachinesClient(), skus: f.NewResourceSKUsClient(), url: srv.URL}
}

// setup creates an on-demand Uniform set of 3, a spot Uniform set (empty),
// a spot Flexible set of 2, and a standalone VM.
func (e *env) setup(t *testing.T) {
	t.Helper()
	for _, ss := range []ScaleSet{
		{Subscription: sub, ResourceGroup: rg, Name: "aks-od-1234-vmss", Location: "westeurope", Zones: []string{"1", "2"}, SKU: "Standard_D4s_v5", Capacity: 3,
			Tags: map[string]string{"aks-managed-poolName": "od"}},
		{Subscription: sub, ResourceGroup: rg, Name: "aks-spot-1234-vmss", Location: "westeurope", SKU: "Standard_D4s_v5", Priority: PrioritySpot,
			EvictionPolicy: EvictDelete, MaxPrice: -1, Tags: map[string]string{"aks-managed-poolName": "spot"}},
		{Subscription: sub, ResourceGroup: rg, Name: "flex", Location: "westeurope", Flexible: true, SKU: "Standard_E4s_v5", Capacity: 2, Priority: PrioritySpot, MaxPrice: 0.2},
	} {
		if err := e.s.CreateScaleSet(ss); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.s.AddVM(VM{Subscription: sub, ResourceGroup: rg, Name: "lone", Location: "westeurope", Size: "Standard_B2s"}); err != nil {
		t.Fatal(err)
	}
	e.s.Step()
}

func responseError(t *testing.T, err error) *azcore.ResponseError {
	t.Helper()
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		t.Fatalf("error %v (%T) is not an *azcore.ResponseError", err, err)
	}
	return re
}

// The SDK reads what the emulator writes: scale sets (Uniform and Flexible,
// spot fields), their VMs with instance views, in pages; VMs of a resource
// group and of a Flexible set; resource SKUs.
func TestWireFormat(t *testing.T) {
	e := newEnv(t, Options{PageSize: 2})
	e.setup(t)
	ctx := context.Background()

	var sets []*armcompute.VirtualMachineScaleSet
	for p := e.sets.NewListPager(rg, nil); p.More(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sets = append(sets, page.Value...)
	}
	if len(sets) != 3 {
		t.Fatalf("%d scale sets, want 3", len(sets))
	}
	byName := map[string]*armcompute.VirtualMachineScaleSet{}
	for _, s := range sets {
		byName[*s.Name] = s
	}
	spot := byName["aks-spot-1234-vmss"]
	if p := spot.Properties.VirtualMachineProfile; *p.Priority != armcompute.VirtualMachinePriorityTypesSpot ||
		*p.EvictionPolicy != armcompute.VirtualMachineEvictionPolicyTypesDelete || *p.BillingProfile.MaxPrice != -1 ||
		*spot.Tags["aks-managed-poolName"] != "spot" || *spot.SKU.Capacity != 0 || *spot.Properties.OrchestrationMode != armcompute.OrchestrationModeUniform {
		t.Errorf("spot scale set %+v", spot.Properties.VirtualMachineProfile)
	}
	if f := byName["flex"]; *f.Properties.OrchestrationMode != armcompute.OrchestrationModeFlexible || *f.SKU.Name != "Standard_E4s_v5" {
		t.Errorf("flexible set %+v", f)
	}

	var vms []*armcompute.VirtualMachineScaleSetVM
	pages := 0
	for p := e.svms.NewListPager(rg, "aks-od-1234-vmss", &armcompute.VirtualMachineScaleSetVMsClientListOptions{Expand: to.Ptr("instanceView")}); p.More(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		vms = append(vms, page.Value...)
	}
	if len(vms) != 3 || pages != 2 {
		t.Fatalf("%d VMs in %d pages, want 3 in 2", len(vms), pages)
	}
	v := vms[1]
	if *v.InstanceID != "1" || *v.Name != "aks-od-1234-vmss_1" || *v.Properties.ProvisioningState != "Succeeded" || *v.Zones[0] != "2" ||
		*v.Properties.OSProfile.ComputerName != "aks-od-1234-vmss000001" || *v.SKU.Name != "Standard_D4s_v5" ||
		*v.Properties.InstanceView.Statuses[1].Code != "PowerState/running" ||
		!strings.HasSuffix(*v.ID, "/virtualMachineScaleSets/aks-od-1234-vmss/virtualMachines/1") {
		t.Errorf("VM %s: %+v", *v.ID, v.Properties.InstanceView.Statuses)
	}

	var all []*armcompute.VirtualMachine
	for p := e.vms.NewListPager(rg, nil); p.More(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, page.Value...)
	}
	if len(all) != 3 { // 2 Flexible members, 1 standalone
		t.Fatalf("%d VMs in the resource group, want 3", len(all))
	}
	flexID := byName["flex"].ID
	filter := "'virtualMachineScaleSet/id' eq '" + *flexID + "'"
	var members []*armcompute.VirtualMachine
	for p := e.vms.NewListPager(rg, &armcompute.VirtualMachinesClientListOptions{Filter: &filter, Expand: to.Ptr(armcompute.ExpandTypeForListVMsInstanceView)}); p.More(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		members = append(members, page.Value...)
	}
	if len(members) != 2 || *members[0].Properties.Priority != armcompute.VirtualMachinePriorityTypesSpot ||
		*members[0].Properties.BillingProfile.MaxPrice != 0.2 || !strings.EqualFold(*members[0].Properties.VirtualMachineScaleSet.ID, *flexID) ||
		*members[0].Properties.HardwareProfile.VMSize != "Standard_E4s_v5" || len(members[0].Properties.InstanceView.Statuses) != 2 {
		t.Errorf("flexible members %d: %+v", len(members), members)
	}
	// The instance view of a list needs the filter, as on ARM.
	if _, err := e.vms.NewListPager(rg, &armcompute.VirtualMachinesClientListOptions{Expand: to.Ptr(armcompute.ExpandTypeForListVMsInstanceView)}).NextPage(ctx); err == nil {
		t.Error("instanceView without a filter accepted")
	}

	page, err := e.skus.NewListPager(&armcompute.ResourceSKUsClientListOptions{Filter: to.Ptr("location eq 'westeurope'")}).NextPage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, sku := range page.Value {
		if *sku.Name == "Standard_DS2_v2" {
			caps := map[string]string{}
			for _, c := range sku.Capabilities {
				caps[*c.Name] = *c.Value
			}
			found = caps["vCPUs"] == "2" && caps["MemoryGB"] == "7" && *sku.Locations[0] == "westeurope"
		}
	}
	if !found {
		t.Error("Standard_DS2_v2 (2 vCPUs, 7 GB) not in the resource SKUs")
	}
}

// pollDone polls an operation until it is done, stepping the clock.
func pollDone[T any](t *testing.T, e *env, p interface {
	Poll(context.Context) (*http.Response, error)
	Done() bool
	Result(context.Context) (T, error)
}) error {
	t.Helper()
	for range 100 {
		resp, err := p.Poll(context.Background())
		if err != nil {
			return err
		}
		_ = resp.Body.Close() // read already: the SDK buffers it

		if p.Done() {
			_, err := p.Result(context.Background())
			return err
		}
		e.clock.Step(time.Second)
	}
	t.Fatal("the operation never finished")
	return nil
}

// Writes are long-running operations the SDK's pollers follow through the
// Azure-AsyncOperation header: capacity up (done once the new VMs run),
// delete instances (capacity down by as many), delete a VM.
func TestOperations(t *testing.T) {
	e := newEnv(t, Options{CreateDelay: 3 * time.Second, DeleteDelay: 2 * time.Second, OperationDelay: time.Second})
	e.setup(t)
	ctx := context.Background()
	p, err := e.sets.BeginUpdate(ctx, rg, "aks-spot-1234-vmss", armcompute.VirtualMachineScaleSetUpdate{SKU: &armcompute.SKU{Capacity: to.Ptr[int64](2)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Recorded at once: the capacity is the new one, its VMs Creating.
	got, err := e.sets.Get(ctx, rg, "aks-spot-1234-vmss", nil)
	if err != nil || *got.SKU.Capacity != 2 || *got.Properties.ProvisioningState != "Updating" {
		t.Fatalf("after the update: %v %v", got.SKU, err)
	}
	vms := e.s.ScaleSetVMs(*got.ID)
	if len(vms) != 2 || vms[0].ProvisioningState != StateCreating {
		t.Fatalf("VMs %+v", vms)
	}
	start := e.clock.Now()
	if err := pollDone(t, e, p); err != nil {
		t.Fatal(err)
	}
	if waited := e.clock.Since(start); waited < 3*time.Second {
		t.Errorf("the increase was done after %s, before its VMs ran", waited)
	}
	if e.s.Calls(MethodGetAsyncStatus) < 3 || e.s.Calls(MethodGetScaleSet) != 2 {
		t.Errorf("calls %v: want the async status polled and the final GET of the scale set", e.s.AllCalls())
	}

	del, err := e.sets.BeginDeleteInstances(ctx, rg, "aks-spot-1234-vmss", armcompute.VirtualMachineScaleSetVMInstanceRequiredIDs{InstanceIDs: []*string{to.Ptr("1")}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := pollDone(t, e, del); err != nil {
		t.Fatal(err)
	}
	set, _ := e.s.GetScaleSet(*got.ID)
	if vms := e.s.ScaleSetVMs(set.ID()); set.Capacity != 1 || len(vms) != 1 || vms[0].InstanceID != "0" {
		t.Errorf("after deleting instance 1: capacity %d, VMs %+v", set.Capacity, vms)
	}
	if e.s.Calls(MethodGetLocationState) != 1 {
		t.Errorf("%d Location polls, want the final one", e.s.Calls(MethodGetLocationState))
	}
	if _, err := e.sets.BeginDeleteInstances(ctx, rg, "aks-spot-1234-vmss", armcompute.VirtualMachineScaleSetVMInstanceRequiredIDs{InstanceIDs: []*string{to.Ptr("7")}}, nil); responseError(t, err).StatusCode != http.StatusBadRequest {
		t.Errorf("an instance not in the set: %v", err)
	}

	dv, err := e.vms.BeginDelete(ctx, rg, "lone", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := pollDone(t, e, dv); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.s.GetVM("/subscriptions/" + sub + "/resourceGroups/" + rg + "/providers/Microsoft.Compute/virtualMachines/lone"); ok {
		t.Error("the standalone VM still exists")
	}
}

// Faults: throttling with Retry-After, an injected error, an allocation
// failure that fails the increase's operation with AllocationFailed and
// leaves the VMs Failed, an unauthenticated request.
func TestFaults(t *testing.T) {
	e := newEnv(t, Options{})
	e.setup(t)
	ctx := context.Background()
	e.s.SetRetryAfter(17)
	e.s.ThrottleNext(1)
	_, err := e.sets.Get(ctx, rg, "flex", nil)
	if re := responseError(t, err); re.StatusCode != http.StatusTooManyRequests || re.ErrorCode != CodeTooManyRequests || re.RawResponse.Header.Get("Retry-After") != "17" {
		t.Errorf("throttled: %v", err)
	}
	e.s.FailNext(MethodUpdateScaleSet, APIError{Code: CodeSkuNotAvailable, Message: "The requested VM size Standard_D4s_v5 is not available in the current region."})
	_, err = e.sets.BeginUpdate(ctx, rg, "aks-spot-1234-vmss", armcompute.VirtualMachineScaleSetUpdate{SKU: &armcompute.SKU{Capacity: to.Ptr[int64](1)}}, nil)
	if re := responseError(t, err); re.StatusCode != http.StatusConflict || re.ErrorCode != CodeSkuNotAvailable {
		t.Errorf("injected: %v", err)
	}

	e.s.SetAllocationFailure("aks-spot-1234-vmss", CodeAllocationFailed)
	p, err := e.sets.BeginUpdate(ctx, rg, "aks-spot-1234-vmss", armcompute.VirtualMachineScaleSetUpdate{SKU: &armcompute.SKU{Capacity: to.Ptr[int64](2)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = pollDone(t, e, p)
	if re := responseError(t, err); re.ErrorCode != CodeAllocationFailed {
		t.Errorf("allocation failure: %v", err)
	}
	pager := e.svms.NewListPager(rg, "aks-spot-1234-vmss", &armcompute.VirtualMachineScaleSetVMsClientListOptions{Expand: to.Ptr("instanceView")})
	page, err := pager.NextPage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Value) != 2 || *page.Value[0].Properties.ProvisioningState != "Failed" ||
		*page.Value[0].Properties.InstanceView.Statuses[0].Code != "ProvisioningState/failed/AllocationFailed" {
		t.Errorf("failed VMs %+v", page.Value)
	}

	// Without the token.
	res, err := http.Get(e.url + "/subscriptions/" + sub + "/resourceGroups/" + rg + "/providers/Microsoft.Compute/virtualMachineScaleSets?api-version=2024-11-01")
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Errorf("without a token: %s", res.Status)
	}
}
