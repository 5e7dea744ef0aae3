package azure

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	testingclock "k8s.io/utils/clock/testing"

	"spotter.dev/spotter/internal/cloud"
	"spotter.dev/spotter/internal/cloud/internal/providertest"
	"spotter.dev/spotter/internal/emulator/azureapi"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

const (
	sub   = "0b1f6471-1bf0-4dda-aec3-111122223333"
	rg    = "MC_prod_aks_westeurope"
	token = "lab-token"
)

var epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// fixedToken is a credential with one token, as a test stands in for
// workload identity.
type fixedToken struct{}

func (fixedToken) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{Token: token, ExpiresOn: time.Now().Add(time.Hour)}, nil
}

// lab is the ARM emulator with the provider on it, through the official
// SDK, with a fixed bearer token the emulator checks.
type lab struct {
	emu   *azureapi.Server
	clock *testingclock.FakeClock
	kube  *fake.Clientset
	p     *Provider
	url   string // the emulator's
}

// prodGroups selects: the on-demand set by name, the AKS spot pool by node
// pool, the rest by prefix.
var prodGroups = []v1alpha1.AzureNodeGroup{
	{ScaleSet: "aks-od-12345678-vmss", MinSize: 1, MaxSize: 10},
	{NodePool: "spot", MaxSize: 5},
	{NamePrefix: "aks-", MaxSize: 3},
}

func newLab(t testing.TB, groups []v1alpha1.AzureNodeGroup, opts azureapi.Options) *lab {
	t.Helper()
	clk := testingclock.NewFakeClock(epoch)
	opts.Clock, opts.Token = clk, token
	emu := azureapi.New(opts)
	srv := httptest.NewServer(emu)
	t.Cleanup(srv.Close)
	o := ClientOptions(srv.URL)
	o.InsecureAllowCredentialWithHTTP = true // the test's token, to the test's server
	c, err := NewClients(sub, fixedToken{}, o)
	if err != nil {
		t.Fatal(err)
	}
	kube := fake.NewClientset()
	p, err := New(c, kube, clk, Options{SubscriptionID: sub, ResourceGroup: rg, NodeGroups: groups,
		Pricing: v1alpha1.PricingConfig{Currency: "USD", InstanceTypes: map[string]v1alpha1.InstancePrice{"Standard_D4s_v5": {OnDemand: 0.192, Spot: 0.04}}}})
	if err != nil {
		t.Fatal(err)
	}
	return &lab{emu: emu, clock: clk, kube: kube, p: p, url: srv.URL}
}

func scaleSetID(name string) string {
	return azureapi.ScaleSet{Subscription: sub, ResourceGroup: rg, Name: name}.ID()
}

// sets creates, in the resource group: aks-od-12345678-vmss (Uniform, 2 VMs,
// pool od), aks-spot-12345678-vmss (Uniform, spot, Delete, pool spot,
// empty), aks-spotd-12345678-vmss (Uniform, spot, Deallocate, pool spotd,
// maxPrice 0.05, empty), flex-spot (Flexible, spot, empty, pool spot),
// other (not selected, 1 VM).
func (l *lab) sets(t testing.TB) {
	t.Helper()
	for _, s := range []azureapi.ScaleSet{
		{Name: "aks-od-12345678-vmss", SKU: "Standard_D4s_v5", Capacity: 2, Zones: []string{"1", "2", "3"}, Tags: map[string]string{PoolNameTag: "od"}},
		{Name: "aks-spot-12345678-vmss", SKU: "Standard_D4s_v5", Priority: azureapi.PrioritySpot, EvictionPolicy: azureapi.EvictDelete, MaxPrice: -1,
			Zones: []string{"1"}, Tags: map[string]string{PoolNameTag: "spot", NodeTemplateLabelTag + "tier": "batch",
				NodeTemplateTaintTag + "dedicated": "spot:NoExecute", NodeTemplateResourcesTag + "ephemeral-storage": "100Gi"}},
		{Name: "aks-spotd-12345678-vmss", SKU: "Standard_D8s_v5", Priority: azureapi.PrioritySpot, EvictionPolicy: azureapi.EvictDeallocate, MaxPrice: 0.05,
			Tags: map[string]string{PoolNameTag: "spotd"}},
		{Name: "flex-spot", Flexible: true, SKU: "Standard_E4s_v5", Priority: azureapi.PrioritySpot, Tags: map[string]string{PoolNameTag: "spot"}},
		{Name: "other", SKU: "Standard_B2s", Capacity: 1},
	} {
		s.Subscription, s.ResourceGroup, s.Location = sub, rg, "westeurope"
		if err := l.emu.CreateScaleSet(s); err != nil {
			t.Fatal(err)
		}
	}
	l.emu.Step()
}

// nodes creates a Node for every VM that runs, named as AKS names them (the
// computer name), and returns them.
func (l *lab) nodes(t testing.TB) []*corev1.Node {
	t.Helper()
	var out []*corev1.Node
	for _, v := range l.emu.VMs() {
		if v.ProvisioningState != azureapi.StateSucceeded {
			continue
		}
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: v.ComputerName}, Spec: corev1.NodeSpec{ProviderID: v.ProviderID()}}
		if _, err := l.kube.CoreV1().Nodes().Get(context.Background(), n.Name, metav1.GetOptions{}); err != nil {
			if _, err := l.kube.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		out = append(out, n)
	}
	return out
}

func (l *lab) group(t testing.TB, id string) *NodeGroup {
	t.Helper()
	g, err := l.p.group(context.Background(), strings.ToLower(rg)+"/"+id)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestDiscoveryAndSpot(t *testing.T) {
	l := newLab(t, prodGroups, azureapi.Options{})
	l.sets(t)
	ctx := context.Background()
	groups, err := l.p.NodeGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := ""
	for _, g := range groups {
		got += fmt.Sprintf("%s:%v:%d-%d ", strings.TrimPrefix(g.ID(), strings.ToLower(rg)+"/"), g.Spot(), g.MinSize(), g.MaxSize())
	}
	want := "aks-od-12345678-vmss:false:1-10 aks-spot-12345678-vmss:true:0-5 aks-spotd-12345678-vmss:true:0-3 flex-spot:true:0-5 "
	if got != want {
		t.Errorf("groups %q, want %q (the first entry that selects a set gives its sizes; other is selected by none)", got, want)
	}
	if n := l.emu.Calls(azureapi.MethodListScaleSets); n != 1 {
		t.Errorf("%d scale set lists, want 1", n)
	}
	if _, err := l.p.NodeGroups(ctx); err != nil || l.emu.Calls(azureapi.MethodListScaleSets) != 1 {
		t.Errorf("a second read within GroupTTL asked ARM again: %v", err)
	}
	l.clock.Step(31 * time.Second)
	if _, err := l.p.NodeGroups(ctx); err != nil || l.emu.Calls(azureapi.MethodListScaleSets) != 2 {
		t.Errorf("after GroupTTL: %v, calls %v", err, l.emu.AllCalls())
	}
	spotd := l.group(t, "aks-spotd-12345678-vmss")
	if price, ok := spotd.PricePerHour(); !ok || price != 0.05 {
		t.Errorf("a spot set without a configured price: %v %v, want its maxPrice 0.05", price, ok)
	}
	if price, ok := l.group(t, "aks-spot-12345678-vmss").PricePerHour(); !ok || price != 0.04 {
		t.Errorf("spot price %v %v, want the configured 0.04", price, ok)
	}
}

// Instances: one list of a Uniform set's VMs (pages of 1,000) per set with
// an unknown VM, one list of the resource group's VMs for the others; then
// the cache; VMs a list lacks are left out, and asked about again only
// after GoneTTL.
func TestInstancesBatchedAndCached(t *testing.T) {
	l := newLab(t, prodGroups, azureapi.Options{})
	l.sets(t)
	ctx := context.Background()
	if err := l.emu.SetCapacity(scaleSetID("aks-od-12345678-vmss"), 2500); err != nil {
		t.Fatal(err)
	}
	if err := l.emu.SetCapacity(scaleSetID("flex-spot"), 2); err != nil {
		t.Fatal(err)
	}
	if _, err := l.emu.AddVM(azureapi.VM{Subscription: sub, ResourceGroup: rg, Name: "lone", Location: "westeurope", Size: "Standard_B2s"}); err != nil {
		t.Fatal(err)
	}
	l.emu.Step()
	var nodes []*corev1.Node // not in the API server: Instances reads none
	for _, v := range l.emu.VMs() {
		nodes = append(nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: v.ComputerName}, Spec: corev1.NodeSpec{ProviderID: v.ProviderID()}})
	}
	gone := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gone"}, Spec: corev1.NodeSpec{ProviderID: "azure:///subscriptions/" + sub + "/resourceGroups/" +
		strings.ToLower(rg) + "/providers/Microsoft.Compute/virtualMachineScaleSets/aks-od-12345678-vmss/virtualMachines/99999"}}
	nodes = append(nodes, gone, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "not-azure"}, Spec: corev1.NodeSpec{ProviderID: "kwok://x/y"}})
	l.emu.ResetCalls()
	got, err := l.p.Instances(ctx, nodes)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2504 { // 2,500 od, 2 flex, 1 other, 1 lone
		t.Errorf("%d instances, want 2504", len(got))
	}
	calls := l.emu.AllCalls()
	if calls[azureapi.MethodListScaleSetVMs] != 4 || calls[azureapi.MethodListVMs] != 1 || calls[azureapi.MethodGetScaleSet] != 2 {
		t.Errorf("calls %v: want 3 pages of od's VMs and 1 of other's, one list of the resource group, a get of each set", calls)
	}
	var od *corev1.Node
	for _, n := range nodes {
		if strings.Contains(n.Spec.ProviderID, "/aks-od-12345678-vmss/virtualMachines/0") {
			od = n
		}
	}
	inst := got[od.Name]
	if inst.Spot || inst.InstanceType != "Standard_D4s_v5" || inst.Zone != "westeurope-1" || inst.NodeGroup != strings.ToLower(rg)+"/aks-od-12345678-vmss" ||
		!inst.PriceKnown || inst.PricePerHour != 0.192 || inst.ID != od.Spec.ProviderID || inst.State != cloud.InstanceRunning {
		t.Errorf("instance %+v", inst)
	}
	flex := 0
	for _, i := range got {
		if i.Spot && i.NodeGroup == strings.ToLower(rg)+"/flex-spot" && i.InstanceType == "Standard_E4s_v5" {
			flex++
		}
	}
	if flex != 2 {
		t.Errorf("%d spot VMs of flex-spot, want 2", flex)
	}
	if lone := got["lone"]; lone.NodeGroup != "" || lone.InstanceType != "Standard_B2s" {
		t.Errorf("standalone VM %+v", lone)
	}
	l.emu.ResetCalls()
	if _, err := l.p.Instances(ctx, nodes); err != nil || len(l.emu.AllCalls()) != 0 {
		t.Errorf("known (and gone) VMs asked about again: %v, %v", l.emu.AllCalls(), err)
	}
	l.clock.Step(5 * time.Minute)
	if _, err := l.p.Instances(ctx, nodes); err != nil || l.emu.Calls(azureapi.MethodListScaleSetVMs) != 3 {
		t.Errorf("after GoneTTL the missing VM's set is listed again: %v, %v", l.emu.AllCalls(), err)
	}
}

func TestSizes(t *testing.T) {
	l := newLab(t, prodGroups, azureapi.Options{CreateDelay: time.Minute})
	l.sets(t)
	ctx := context.Background()
	g := l.group(t, "aks-spot-12345678-vmss")
	providertest.Grow(t, g)
	insts, err := g.Nodes(ctx)
	if err != nil || len(insts) != 2 || insts[0].State != cloud.InstanceCreating || insts[0].Err != nil {
		t.Fatalf("nodes being created %+v %v", insts, err)
	}
	// Being created: both may be cancelled, not three.
	providertest.CancelOne(t, g)
	vms := l.emu.ScaleSetVMs(scaleSetID("aks-spot-12345678-vmss"))
	if len(vms) != 1 || vms[0].InstanceID != "0" {
		t.Errorf("VMs %+v: want the newest cancelled", vms)
	}
	l.clock.Step(time.Minute)
	l.emu.Step()
	// Running: nothing left to cancel.
	if err := g.DecreaseTargetSize(ctx, 1); !errors.Is(err, cloud.ErrNotUnfulfilled) {
		t.Errorf("cancel a running VM: %v", err)
	}
	insts, err = g.Nodes(ctx)
	if err != nil || len(insts) != 1 || insts[0].State != cloud.InstanceRunning || !insts[0].Spot || insts[0].InstanceType != "Standard_D4s_v5" {
		t.Errorf("nodes %+v %v", insts, err)
	}
	// The minimum holds for cancellations too.
	od := l.group(t, "aks-od-12345678-vmss")
	if err := od.IncreaseSize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := od.DecreaseTargetSize(ctx, 1); err != nil {
		t.Errorf("cancel the one being created: %v", err)
	}
	if s, _ := l.emu.GetScaleSet(scaleSetID("aks-od-12345678-vmss")); s.Capacity != 2 {
		t.Errorf("od capacity %d after the cancellation, want 2", s.Capacity)
	}
}

// An allocation failure: ARM accepts the capacity and cannot allocate the
// VMs; they are Failed with AllocationFailed, which Nodes reports as a
// *cloud.CapacityUnavailableError on each, and the request can be cancelled.
func TestAllocationFailure(t *testing.T) {
	for _, code := range []string{azureapi.CodeAllocationFailed, azureapi.CodeOverconstrainedAllocationRequest} {
		t.Run(code, func(t *testing.T) {
			l := newLab(t, prodGroups, azureapi.Options{})
			l.sets(t)
			ctx := context.Background()
			g := l.group(t, "flex-spot")
			l.emu.SetAllocationFailure("flex-spot", code)
			if err := g.IncreaseSize(ctx, 2); err != nil {
				t.Fatal(err)
			}
			l.emu.Step()
			insts, err := g.Nodes(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var cu *cloud.CapacityUnavailableError
			if len(insts) != 2 || insts[0].State != cloud.InstanceCreating || !errors.As(insts[0].Err, &cu) || cu.NodeGroup != g.ID() ||
				!strings.Contains(insts[0].Err.Error(), code) {
				t.Fatalf("nodes %+v, want two requests Azure could not allocate", insts)
			}
			if err := g.DecreaseTargetSize(ctx, 2); err != nil {
				t.Errorf("cancelling the requests that cannot be met: %v", err)
			}
			if s, _ := l.emu.GetScaleSet(scaleSetID("flex-spot")); s.Capacity != 0 || len(l.emu.ScaleSetVMs(s.ID())) != 0 {
				t.Errorf("after the cancellation: capacity %d, VMs %v", s.Capacity, l.emu.ScaleSetVMs(s.ID()))
			}
		})
	}
}

// Errors of calls and of operations become the seam's typed errors.
func TestErrors(t *testing.T) {
	l := newLab(t, prodGroups, azureapi.Options{})
	l.sets(t)
	ctx := context.Background()
	nodes := l.nodes(t)
	g := l.group(t, "aks-spot-12345678-vmss")

	l.emu.ThrottleNext(1)
	if _, err := l.p.Instances(ctx, nodes); !cloud.IsThrottled(err) {
		t.Errorf("throttled list: %v", err)
	}
	l.emu.SetRetryAfter(17)
	l.emu.ThrottleNext(1)
	if _, err := g.TargetSize(ctx); !cloud.IsThrottled(err) {
		t.Errorf("throttled get: %v", err)
	} else if d, _ := cloud.RetryAfter(err); d != 17*time.Second {
		t.Errorf("retry after %s, want the answer's 17s", d)
	}
	for _, e := range []azureapi.APIError{
		{Code: azureapi.CodeSkuNotAvailable, Message: "The requested VM size for resource 'Following SKUs have failed for Capacity Restrictions: Standard_D4s_v5' is currently not available in location 'westeurope'."},
		{Code: azureapi.CodeOperationNotAllowed, Message: "Operation could not be completed as it results in exceeding approved Total Regional Low-priority vCPUs quota."},
		{Code: "QuotaExceeded", Message: "Quota exceeded."},
	} {
		l.emu.FailNext(azureapi.MethodUpdateScaleSet, e)
		var cu *cloud.CapacityUnavailableError
		if err := g.IncreaseSize(ctx, 1); !errors.As(err, &cu) || cu.NodeGroup != g.ID() {
			t.Errorf("%s: %v", e.Code, err)
		}
	}
	if s, _ := l.emu.GetScaleSet(scaleSetID("aks-spot-12345678-vmss")); s.Capacity != 0 {
		t.Errorf("capacity %d after refusals, want 0", s.Capacity)
	}
	l.emu.FailNext(azureapi.MethodUpdateScaleSet, azureapi.APIError{Code: azureapi.CodeOperationNotAllowed, Message: "The scale set is being deleted."})
	if err := g.IncreaseSize(ctx, 1); err == nil || cloud.IsCapacityUnavailable(err) || !strings.Contains(err.Error(), "OperationNotAllowed") {
		t.Errorf("not a quota: %v", err)
	}
	missing := &NodeGroup{p: l.p, facts: &setFacts{key: newSetKey(sub, rg, "nope"), name: "nope"}}
	if _, err := missing.TargetSize(ctx); !cloud.IsNotFound(err) {
		t.Errorf("a scale set that does not exist: %v", err)
	}
}

// Operations are polled with backoff until they are done; a throttled poll
// is retried.
func TestSlowOperation(t *testing.T) {
	l := newLab(t, prodGroups, azureapi.Options{})
	l.sets(t)
	ctx := context.Background()
	nodes := l.nodes(t)
	g := l.group(t, "aks-od-12345678-vmss")
	l.emu.SetOperationDelay(20 * time.Second)
	done := make(chan error, 1)
	go func() { done <- g.DeleteNodes(ctx, nodes[:1]) }()
	providertest.WaitWaiters(t, l.clock)
	l.emu.ThrottleNext(1)
	for range 100 {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			polls := l.emu.Calls(azureapi.MethodGetAsyncStatus)
			// From 0.8-1 s doubling to 15 s: about 6 polls in 20 s, and the
			// throttled one.
			if polls < 3 || polls > 10 || l.emu.Throttled(azureapi.MethodGetAsyncStatus) != 1 {
				t.Errorf("%d polls (%d throttled) of a 20 s operation", polls, l.emu.Throttled(azureapi.MethodGetAsyncStatus))
			}
			if n, _ := g.TargetSize(ctx); n != 1 {
				t.Errorf("capacity %d after the operation, want 1", n)
			}
			return
		default:
		}
		l.clock.Step(time.Second)
		providertest.WaitWaitersOrDone(l.clock, done)
	}
	t.Fatal("the operation never finished")
}

func TestDeleteNodes(t *testing.T) {
	l := newLab(t, prodGroups, azureapi.Options{})
	l.sets(t)
	ctx := context.Background()
	byGroup := map[string][]*corev1.Node{}
	for _, n := range l.nodes(t) {
		v, _ := l.emu.GetVM(n.Spec.ProviderID)
		byGroup[v.ScaleSet] = append(byGroup[v.ScaleSet], n)
	}
	g := l.group(t, "aks-od-12345678-vmss")
	providertest.DeleteNodesRefused(t, g, byGroup["other"], byGroup["aks-od-12345678-vmss"])
	victim := byGroup["aks-od-12345678-vmss"][0]
	if err := l.p.DeleteInstance(ctx, victim); err != nil {
		t.Fatal(err)
	}
	if s, _ := l.emu.GetScaleSet(scaleSetID("aks-od-12345678-vmss")); s.Capacity != 1 {
		t.Errorf("capacity %d after deleting one of 2, want 1", s.Capacity)
	}
	if _, ok := l.emu.GetVM(victim.Spec.ProviderID); ok {
		t.Errorf("VM %s still exists", victim.Name)
	}
	if _, err := l.kube.CoreV1().Nodes().Get(ctx, victim.Name, metav1.GetOptions{}); err == nil {
		t.Error("the Node object was not deleted")
	}
	if err := l.p.DeleteInstance(ctx, victim); !cloud.IsNotFound(err) {
		t.Errorf("deleting it again: %v", err)
	}
	if got, err := l.p.NodeGroupForNode(ctx, byGroup["aks-od-12345678-vmss"][1]); err != nil || got.ID() != g.ID() {
		t.Errorf("group of a node: %v %v", got, err)
	}
	if _, err := l.p.NodeGroupForNode(ctx, byGroup["other"][0]); !cloud.IsNotFound(err) {
		t.Errorf("group of a node of a set Spotter does not scale: %v", err)
	}

	// A node of a set Spotter does not scale goes through its set all the
	// same (else the set would recreate it), with its capacity lowered.
	if err := l.p.DeleteInstance(ctx, byGroup["other"][0]); err != nil {
		t.Fatal(err)
	}
	if s, _ := l.emu.GetScaleSet(scaleSetID("other")); s.Capacity != 0 {
		t.Errorf("other's capacity %d, want 0", s.Capacity)
	}
	// A standalone VM is deleted as a VM.
	lone, err := l.emu.AddVM(azureapi.VM{Subscription: sub, ResourceGroup: rg, Name: "lone", Location: "westeurope", Size: "Standard_B2s"})
	if err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "lone"}, Spec: corev1.NodeSpec{ProviderID: lone.ProviderID()}}
	if err := l.p.DeleteInstance(ctx, node); err != nil {
		t.Fatal(err)
	}
	if l.emu.Calls(azureapi.MethodDeleteVM) != 1 {
		t.Errorf("VM delete called %d times, want 1", l.emu.Calls(azureapi.MethodDeleteVM))
	}
	if _, ok := l.emu.GetVM(lone.ID()); ok {
		t.Error("the standalone VM still exists")
	}
}

func TestTemplateNode(t *testing.T) {
	l := newLab(t, prodGroups, azureapi.Options{})
	l.sets(t)
	ctx := context.Background()
	g := l.group(t, "aks-spot-12345678-vmss")
	n, err := g.TemplateNode(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n.Labels[ScaleSetPriorityLabel] != "spot" || n.Labels[AgentPoolLabel] != "spot" || n.Labels[LegacyAgentPoolLabel] != "spot" || n.Labels["tier"] != "batch" ||
		n.Labels[corev1.LabelInstanceTypeStable] != "Standard_D4s_v5" || n.Labels[corev1.LabelTopologyZone] != "westeurope-1" ||
		n.Labels[corev1.LabelTopologyRegion] != "westeurope" {
		t.Errorf("labels %v", n.Labels)
	}
	if len(n.Spec.Taints) != 2 || n.Spec.Taints[0] != (corev1.Taint{Key: ScaleSetPriorityLabel, Value: "spot", Effect: corev1.TaintEffectNoSchedule}) ||
		n.Spec.Taints[1] != (corev1.Taint{Key: "dedicated", Value: "spot", Effect: corev1.TaintEffectNoExecute}) {
		t.Errorf("taints %v", n.Spec.Taints)
	}
	// Standard_D4s_v5 without pod IP configurations (kubenet): 110 pods;
	// 140m CPU and 20 MiB * 110 + 50 MiB memory reserved, 100 MiB eviction
	// threshold.
	providertest.WantResources(t, "Standard_D4s_v5", n, "cpu=4,memory=16Gi,pods=110,ephemeral-storage=100Gi",
		"cpu=3860m,memory=14034Mi,pods=110,ephemeral-storage=100Gi")
	if err := cloud.ValidateNodeGroup(ctx, g); err != nil {
		t.Errorf("a worker set refused: %v", err)
	}
	// The location's SKUs are read once.
	if n, err := l.group(t, "aks-spotd-12345678-vmss").TemplateNode(ctx); err != nil || l.emu.Calls(azureapi.MethodListSKUs) != 1 ||
		n.Status.Capacity.Cpu().Value() != 8 || n.Labels[corev1.LabelTopologyZone] != "" {
		t.Errorf("second template node: %v, %d SKU lists", err, l.emu.Calls(azureapi.MethodListSKUs))
	}
	if n, err := l.group(t, "aks-od-12345678-vmss").TemplateNode(ctx); err != nil || n.Labels[AgentPoolLabel] != "od" || n.Labels[ScaleSetPriorityLabel] != "" || len(n.Spec.Taints) != 0 {
		t.Errorf("on-demand template node %v %v", n, err)
	}
}

// An Azure CNI pool's template says the pods its NICs have addresses for
// (30, AKS's default with Azure CNI) and reserves for as many; a GPU size's
// template has its GPUs, an Arm size's its architecture.
func TestTemplateAKSPools(t *testing.T) {
	l := newLab(t, []v1alpha1.AzureNodeGroup{{NamePrefix: "aks-", MaxSize: 3}}, azureapi.Options{})
	for _, s := range []azureapi.ScaleSet{
		{Name: "aks-gpu-1-vmss", SKU: "Standard_NC4as_T4_v3", PodIPs: 30},
		{Name: "aks-arm-1-vmss", SKU: "Standard_D4ps_v5"},
	} {
		s.Subscription, s.ResourceGroup, s.Location, s.Priority = sub, rg, "westeurope", azureapi.PrioritySpot
		if err := l.emu.CreateScaleSet(s); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	n, err := l.group(t, "aks-gpu-1-vmss").TemplateNode(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// 28 GiB: 20 MiB * 30 + 50 MiB reserved, 100 MiB eviction threshold.
	providertest.WantResources(t, "Standard_NC4as_T4_v3 with Azure CNI", n, "cpu=4,memory=28Gi,pods=30,nvidia.com/gpu=1",
		"cpu=3860m,memory=27922Mi,pods=30,nvidia.com/gpu=1")
	n, err = l.group(t, "aks-arm-1-vmss").TemplateNode(ctx)
	if err != nil || n.Labels[corev1.LabelArchStable] != "arm64" || n.Status.NodeInfo.Architecture != "arm64" {
		t.Errorf("Standard_D4ps_v5's template: %v, labels %v, want kubernetes.io/arch=arm64", err, n.Labels)
	}
}

// A spot set whose nodes would be control-plane nodes is refused.
func TestControlPlaneOnSpotRefused(t *testing.T) {
	l := newLab(t, []v1alpha1.AzureNodeGroup{{NamePrefix: "cp-", MaxSize: 3}, {NodePool: "spot", MaxSize: 3}}, azureapi.Options{})
	l.sets(t)
	if err := l.emu.CreateScaleSet(azureapi.ScaleSet{Subscription: sub, ResourceGroup: rg, Name: "cp-spot", Location: "westeurope", SKU: "Standard_D4s_v5",
		Priority: azureapi.PrioritySpot, Tags: map[string]string{NodeTemplateLabelTag + "node-role.kubernetes.io_control-plane": ""}}); err != nil {
		t.Fatal(err)
	}
	usable, refused, err := cloud.UsableNodeGroups(context.Background(), l.p)
	if err != nil || len(usable) != 2 || len(refused) != 1 || !cloud.IsControlPlane(refused[0]) {
		t.Errorf("usable %v, refused %v, %v", usable, refused, err)
	}
}

// An evicted spot VM of a Deallocate set stays, deallocated: Nodes and
// Instances say so, and the sweep deletes it (the capacity lowered) and its
// Node; a set brought below its minimum is raised back to it.
func TestEvictedSweep(t *testing.T) {
	l := newLab(t, []v1alpha1.AzureNodeGroup{{NodePool: "spotd", MinSize: 1, MaxSize: 5}, {NodePool: "spot", MaxSize: 5}}, azureapi.Options{})
	l.sets(t)
	ctx := context.Background()
	for _, name := range []string{"aks-spotd-12345678-vmss", "aks-spot-12345678-vmss"} {
		if err := l.emu.SetCapacity(scaleSetID(name), 2); err != nil {
			t.Fatal(err)
		}
	}
	l.emu.Step()
	nodes := l.nodes(t)
	if _, err := l.p.Instances(ctx, nodes); err != nil {
		t.Fatal(err)
	}
	vms := l.emu.ScaleSetVMs(scaleSetID("aks-spotd-12345678-vmss"))
	for _, v := range vms {
		if err := l.emu.Evict(v.ID()); err != nil {
			t.Fatal(err)
		}
	}
	g := l.group(t, "aks-spotd-12345678-vmss")
	insts, err := g.Nodes(ctx)
	var ev *EvictedError
	if err != nil || len(insts) != 2 || insts[0].State != cloud.InstanceDeleting || !errors.As(insts[0].Err, &ev) || insts[0].NodeName != vms[0].ComputerName {
		t.Fatalf("nodes of evicted VMs %+v %v", insts, err)
	}
	got, err := l.p.Instances(ctx, nodes)
	if err != nil || got[vms[0].ComputerName].State != cloud.InstanceDeleting {
		t.Errorf("instance of an evicted VM %+v %v", got[vms[0].ComputerName], err)
	}
	l.emu.ResetCalls()
	deleted, err := l.p.SweepEvicted(ctx)
	if err != nil || len(deleted) != 2 {
		t.Fatalf("swept %v, %v", deleted, err)
	}
	if c := l.emu.AllCalls(); c[azureapi.MethodListScaleSetVMs] != 1 || c[azureapi.MethodDeleteInstances] != 1 || c[azureapi.MethodUpdateScaleSet] != 1 {
		t.Errorf("calls %v: want one list (the Delete set is not looked at), one delete instances, one update back to the minimum", c)
	}
	for _, v := range vms {
		if _, err := l.kube.CoreV1().Nodes().Get(ctx, v.ComputerName, metav1.GetOptions{}); err == nil {
			t.Errorf("Node %s of an evicted VM still exists", v.ComputerName)
		}
		if _, ok := l.emu.GetVM(v.ID()); ok {
			t.Errorf("evicted VM %s still exists", v.Name)
		}
	}
	if s, _ := l.emu.GetScaleSet(scaleSetID("aks-spotd-12345678-vmss")); s.Capacity != 1 {
		t.Errorf("capacity %d, want raised back to the minimum 1", s.Capacity)
	}
	got, err = l.p.Instances(ctx, nodes)
	if _, ok := got[vms[0].ComputerName]; ok || err != nil {
		t.Errorf("a deleted VM still reported: %v", err)
	}
	if deleted, err := l.p.SweepEvicted(ctx); err != nil || len(deleted) != 0 {
		t.Errorf("a second sweep: %v %v", deleted, err)
	}
}

// Through FromConfig, as in production: an http:// endpoint is spoken to
// without a token.
func TestFromConfig(t *testing.T) {
	_, p := fromConfigLab(t, 1000)
	groups, err := p.NodeGroups(context.Background())
	if err != nil || len(groups) != 1 {
		t.Fatalf("groups %v %v", groups, err)
	}
	if n, err := groups[0].TargetSize(context.Background()); err != nil || n != 1 {
		t.Errorf("target %d %v", n, err)
	}
}

// Through FromConfig, the provider's requests are paced by
// cloud.requestsPerSecond: at 1 a second (bursts of 2), lookups of VMs not
// seen before take at least a second per request past the first two.
func TestRequestsArePaced(t *testing.T) {
	emu, p := fromConfigLab(t, 1)
	start := time.Now()
	for i := range 3 {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("n", i)}, Spec: corev1.NodeSpec{ProviderID: fmt.Sprintf(
			"azure:///subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/virtualMachineScaleSets/aks-od-1-vmss/virtualMachines/%d", sub, rg, 100+i)}}
		if _, err := p.Instances(context.Background(), []*corev1.Node{node}); err != nil {
			t.Fatal(err)
		}
	}
	calls := 0
	for _, n := range emu.AllCalls() {
		calls += n
	}
	if calls < 3 {
		t.Fatalf("%d calls (%v), want one a lookup at least: the test sends too few requests to see the pace", calls, emu.AllCalls())
	}
	// A lower bound only: a limiter can be slower on a busy machine, never faster.
	if took, least := time.Since(start), time.Duration(calls-2)*time.Second*9/10; took < least {
		t.Errorf("%d requests at 1 a second (burst 2) took %s, want at least %s", calls, took, least)
	}
}

// fromConfigLab builds the provider through FromConfig, its requests limited
// to requestsPerSecond, against an emulator with one scale set, aks-od-1-vmss
// (one VM).
func fromConfigLab(t *testing.T, requestsPerSecond int32) (*azureapi.Server, *Provider) {
	t.Helper()
	clk := testingclock.NewFakeClock(epoch)
	emu := azureapi.New(azureapi.Options{Clock: clk})
	srv := httptest.NewServer(emu)
	t.Cleanup(srv.Close)
	if err := emu.CreateScaleSet(azureapi.ScaleSet{Subscription: sub, ResourceGroup: rg, Name: "aks-od-1-vmss", Location: "eastus", SKU: "Standard_B2s", Capacity: 1}); err != nil {
		t.Fatal(err)
	}
	p, err := FromConfig(context.Background(), nil, clk, v1alpha1.AzureConfig{SubscriptionID: sub, ResourceGroup: rg, Endpoint: srv.URL + "/",
		NodeGroups: []v1alpha1.AzureNodeGroup{{NamePrefix: "aks-", MaxSize: 2}}}, requestsPerSecond, v1alpha1.PricingConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return emu, p
}

func TestKeyOfID(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"azure:///subscriptions/S/resourceGroups/MC_rg/providers/Microsoft.Compute/virtualMachineScaleSets/aks-a-1-vmss/virtualMachines/3",
			"/subscriptions/s/resourcegroups/mc_rg/providers/microsoft.compute/virtualmachinescalesets/aks-a-1-vmss/virtualmachines/3", true},
		{"azure:///subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/flex_1a2b3c4d",
			"/subscriptions/s/resourcegroups/rg/providers/microsoft.compute/virtualmachines/flex_1a2b3c4d", true},
		{"azure:///subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/x", "", false},
		{"azure:///subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualMachines/x", "", false},
		{"azure://subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/x", "", false},
		{"aws:///us-east-1a/i-0abc", "", false},
		{"", "", false},
	} {
		k, ok := keyOf(&corev1.Node{Spec: corev1.NodeSpec{ProviderID: tc.in}})
		if ok != tc.ok || (ok && k.resourceID() != tc.want) {
			t.Errorf("%q: %v %q, want %v %q", tc.in, ok, k.resourceID(), tc.ok, tc.want)
		}
	}
}

// FuzzKeyOfID: a providerID is outside input; reading it never panics, and
// what it reads names the same VM again.
func FuzzKeyOfID(f *testing.F) {
	f.Add("azure:///subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/set/virtualMachines/0")
	f.Add("azure:///subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm")
	f.Fuzz(func(t *testing.T, s string) {
		k, ok := keyOfID(s)
		if !ok {
			return
		}
		again, ok := keyOfID(k.resourceID())
		if !ok || again != k {
			t.Errorf("%q read as %+v, which reads back as %+v", s, k, again)
		}
	})
}

func TestTemplateTags(t *testing.T) {
	labels, taints, res, err := templateTags(map[string]string{
		NodeTemplateLabelTag + "topology.disk.csi.azure.com_zone": "westeurope-1",
		NodeTemplateLabelTag + "my~2label":                        "x",
		NodeTemplateTaintTag + "gpu":                              "true:NoSchedule",
		NodeTemplateResourcesTag + "nvidia.com_gpu":               "1",
		"unrelated": "y",
	})
	if err != nil || labels["topology.disk.csi.azure.com/zone"] != "westeurope-1" || labels["my_label"] != "x" || len(labels) != 2 ||
		len(taints) != 1 || taints[0].Key != "gpu" || res["nvidia.com/gpu"] != *resourceQuantity(t, "1") {
		t.Errorf("labels %v taints %v resources %v %v", labels, taints, res, err)
	}
	for _, bad := range []map[string]string{
		{NodeTemplateTaintTag + "k": "v"},
		{NodeTemplateTaintTag + "k": "v:Sometimes"},
		{NodeTemplateResourcesTag + "cpu": "lots"},
	} {
		if _, _, _, err := templateTags(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

// FuzzTemplateTags: tags are outside input; reading them never panics, and
// what it returns is usable.
func FuzzTemplateTags(f *testing.F) {
	f.Add(NodeTemplateTaintTag+"a_b", "v:NoExecute")
	f.Add(NodeTemplateResourcesTag+"memory", "1Gi")
	f.Fuzz(func(t *testing.T, name, value string) {
		_, taints, res, err := templateTags(map[string]string{name: value})
		if err != nil {
			return
		}
		for _, tt := range taints {
			if tt.Effect != corev1.TaintEffectNoSchedule && tt.Effect != corev1.TaintEffectPreferNoSchedule && tt.Effect != corev1.TaintEffectNoExecute {
				t.Errorf("taint %v", tt)
			}
		}
		for _, q := range res {
			if q.Sign() < 0 {
				t.Errorf("negative resource %v", q)
			}
		}
	})
}

func resourceQuantity(t *testing.T, s string) *resource.Quantity {
	t.Helper()
	q := resource.MustParse(s)
	return &q
}

// Instance lookups for 5,000 nodes of five Uniform scale sets against the
// emulator, through the SDK: cold (every VM unknown: one list per set, pages
// of 1,000, and a get of each set) and warm (all cached).
//
//	go test ./internal/cloud/azure -run '^$' -bench Instances -benchtime 3x
func BenchmarkInstances5000(b *testing.B) {
	clk := testingclock.NewFakeClock(epoch)
	emu := azureapi.New(azureapi.Options{Clock: clk})
	srv := httptest.NewServer(emu)
	b.Cleanup(srv.Close)
	for i := range 5 {
		s := azureapi.ScaleSet{Subscription: sub, ResourceGroup: rg, Name: fmt.Sprintf("aks-pool%d-12345678-vmss", i), Location: "westeurope",
			Zones: []string{"1", "2", "3"}, SKU: "Standard_D4s_v5", Capacity: 1000}
		if i%2 == 0 {
			s.Priority = azureapi.PrioritySpot
		}
		if err := emu.CreateScaleSet(s); err != nil {
			b.Fatal(err)
		}
	}
	emu.Step()
	var nodes []*corev1.Node
	for _, v := range emu.VMs() {
		nodes = append(nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: v.ComputerName}, Spec: corev1.NodeSpec{ProviderID: v.ProviderID()}})
	}
	providertest.BenchmarkInstances(b, nodes, func(ctx context.Context) (cloud.Provider, error) {
		p, err := FromConfig(ctx, nil, clk, v1alpha1.AzureConfig{SubscriptionID: sub, ResourceGroup: rg, Endpoint: srv.URL,
			NodeGroups: []v1alpha1.AzureNodeGroup{{NamePrefix: "aks-", MaxSize: 1}}}, 1000, v1alpha1.PricingConfig{})
		return p, err
	}, emu.ResetCalls, func() int {
		calls := 0
		for _, n := range emu.AllCalls() {
			calls += n
		}
		return calls
	})
}
