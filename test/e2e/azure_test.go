package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"spotter.dev/spotter/internal/cli"
	azureprovider "spotter.dev/spotter/internal/cloud/azure"
	"spotter.dev/spotter/internal/controller/migrator"
	"spotter.dev/spotter/internal/emulator/azureapi"
	"spotter.dev/spotter/internal/lab"
	"spotter.dev/spotter/internal/plan"
	"spotter.dev/spotter/internal/testenv"
	tu "spotter.dev/spotter/internal/testutil"
)

// azureLab is the lab with the ARM compute emulator behind it: each VM the
// emulator's scale sets run becomes a kwok Node named like the VM's computer
// name (as AKS names its nodes), with its providerID and AKS's labels, and
// goes when the VM is deleted. Two Uniform scale sets of an AKS cluster's
// node resource group, as AKS makes them for two node pools:
// aks-od-12345678-vmss (3 on-demand Standard_D4s_v5) and
// aks-spot-12345678-vmss (empty, spot, evictionPolicy Deallocate).
type azureLab struct {
	// readyTimeout is migrator.nodeReadyTimeout; empty: the default (10m).
	readyTimeout string
	env          *testenv.Env
	emu          *azureapi.Server
	url          string
	dir          string
}

const (
	azureLabSubscription = "0b1f6471-1bf0-4dda-aec3-111122223333"
	azureLabGroup        = "MC_lab_aks_westeurope"
)

func azureSetID(name string) string {
	return azureapi.ScaleSet{Subscription: azureLabSubscription, ResourceGroup: azureLabGroup, Name: name}.ID()
}

func startAzureLab(t *testing.T) *azureLab {
	t.Helper()
	env := testenv.StartLab(t)
	ctx := testenv.Context(t, 5*time.Minute)
	emu := azureapi.New(azureapi.Options{CreateDelay: 2 * time.Second, DeleteDelay: time.Second})
	srv := httptest.NewServer(emu)
	t.Cleanup(srv.Close)
	emu.OnRunning(func(v azureapi.VM) {
		pool := strings.Split(v.ScaleSet, "-")[1]
		labels := map[string]string{azureprovider.AgentPoolLabel: pool, azureprovider.LegacyAgentPoolLabel: pool}
		var taints []corev1.Taint
		if v.Priority == azureapi.PrioritySpot {
			// As AKS labels and taints the nodes of a spot pool.
			labels[azureprovider.ScaleSetPriorityLabel] = "spot"
			taints = append(taints, corev1.Taint{Key: azureprovider.ScaleSetPriorityLabel, Value: "spot", Effect: corev1.TaintEffectNoSchedule})
		}
		err := lab.CreateNodes(ctx, env.Client, lab.NodeSpec{Name: v.ComputerName, CPU: "4", Memory: "16Gi", Zone: "westeurope-" + v.Zone,
			InstanceType: v.Size, ProviderID: v.ProviderID(), Labels: labels, Taints: taints})
		if err != nil && ctx.Err() == nil {
			t.Errorf("creating the Node of VM %s: %v", v.Name, err)
		}
	})
	emu.OnDeleted(func(v azureapi.VM) {
		_ = env.Client.CoreV1().Nodes().Delete(ctx, v.ComputerName, metav1.DeleteOptions{})
	})
	go emu.Run(ctx, 200*time.Millisecond)
	for _, s := range []azureapi.ScaleSet{
		{Name: "aks-od-12345678-vmss", Capacity: 3, Tags: map[string]string{azureprovider.PoolNameTag: "od"}},
		{Name: "aks-spot-12345678-vmss", Priority: azureapi.PrioritySpot, EvictionPolicy: azureapi.EvictDeallocate, MaxPrice: -1,
			Tags: map[string]string{azureprovider.PoolNameTag: "spot"}},
	} {
		s.Subscription, s.ResourceGroup, s.Location, s.Zones, s.SKU = azureLabSubscription, azureLabGroup, "westeurope", []string{"1"}, "Standard_D4s_v5"
		if err := emu.CreateScaleSet(s); err != nil {
			t.Fatal(err)
		}
	}
	l := &azureLab{env: env, emu: emu, url: srv.URL, dir: t.TempDir(), readyTimeout: "20s"}
	testenv.Eventually(t, time.Minute, "three on-demand nodes Ready", func(ctx context.Context) (bool, string, error) {
		n := l.readyNodes(ctx, t, "od")
		return n == 3, fmt.Sprintf("%d ready", n), nil
	})
	for _, w := range []string{"web", "api"} {
		// They tolerate AKS's spot taint, as workloads meant for spot do.
		d := tu.Deployment(w, 3, tu.CPU("1500m"), tu.GracePeriod(1), tu.AntiAffinity(w, "kubernetes.io/hostname"),
			tu.Tolerate(azureprovider.ScaleSetPriorityLabel, "spot"))
		if _, err := env.Client.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := env.Client.PolicyV1().PodDisruptionBudgets("default").Create(ctx, tu.PDB("web", "web", tu.MaxUnavailable(1)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitForPodsRunning("default", "app=web", 3, time.Minute)
	env.WaitForPodsRunning("default", "app=api", 3, time.Minute)
	waitPDBsComputed(ctx, t, env)
	return l
}

// readyNodes counts the Ready nodes of an AKS node pool.
func (l *azureLab) readyNodes(ctx context.Context, t *testing.T, pool string) int {
	t.Helper()
	ready, err := readyNodes(ctx, l.env, azureprovider.AgentPoolLabel+"="+pool)
	if err != nil {
		t.Fatal(err)
	}
	return ready
}

// start runs `spotter controller` with the migrator on the azure provider,
// pointed at the emulator by cloud.azure.endpoint. AKS labels its spot nodes
// kubernetes.azure.com/scalesetpriority=spot: an on-demand selector says
// which the others are.
func (l *azureLab) start(t *testing.T) {
	t.Helper()
	config := filepath.Join(l.dir, "spotter.yaml")
	body := fmt.Sprintf(`apiVersion: spotter.dev/v1alpha1
kind: SpotterConfiguration
classification:
  onDemandSelectors: ["%s,%s!=spot"]
cloud:
  provider: azure
  azure:
    subscriptionID: %s
    resourceGroup: %s
    endpoint: %s
    nodeGroups:
    - {nodePool: od, maxSize: 3}
    - {nodePool: spot, maxSize: 6}
migrator:
  enabled: true
  schedule: "@every 5s"
{{nodeReadyTimeout}}  spotUnavailableBackoff: 1m
rescheduler:
  enabled: false
drain:
  evictionBackoff: 200ms
  maxEvictionBackoff: 1s
pricing:
  currency: USD
  instanceTypes:
    Standard_D4s_v5: {onDemand: 0.192, spot: 0.04}
`, azureprovider.AgentPoolLabel, azureprovider.ScaleSetPriorityLabel, azureLabSubscription, azureLabGroup, l.url)
	body = strings.Replace(body, "{{nodeReadyTimeout}}", nodeReadyTimeoutLine(l.readyTimeout), 1)
	if err := os.WriteFile(config, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	testenv.StartSpotter(t, "controller", "controller", "--config", config, "--kubeconfig", l.env.Kubeconfig,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--leader-elect=false")
}

// The migrator replaces the on-demand scale set's VMs by spot ones,
// make-before-break, through the SDK against the emulator: every pod ends
// on spot, the on-demand set's capacity is 0 and its VMs deleted, the budget
// held, and no node is left marked. Then Azure evicts a spot VM
// (Deallocate): Spotter deletes the deallocated VM and its Node.
func TestAzureMigratorReplacesOnDemandBySpot(t *testing.T) {
	l := startAzureLab(t)
	lm := &migratorLab{env: l.env}
	stopWatch := lm.watch(t)
	l.start(t)
	testenv.Eventually(t, 3*time.Minute, "every pod Running on spot, the on-demand set empty", func(ctx context.Context) (bool, string, error) {
		onSpot, err := podsOnSpot(ctx, l.env, "aks-", azureprovider.ScaleSetPriorityLabel, "spot")
		if err != nil {
			return false, "", err
		}
		od, _ := l.emu.GetScaleSet(azureSetID("aks-od-12345678-vmss"))
		sp, _ := l.emu.GetScaleSet(azureSetID("aks-spot-12345678-vmss"))
		odVMs := len(l.emu.ScaleSetVMs(od.ID()))
		return onSpot == 6 && od.Capacity == 0 && odVMs == 0,
			fmt.Sprintf("%d pods on spot; od capacity %d with %d VMs, spot capacity %d; %s", onSpot, od.Capacity, odVMs, sp.Capacity, podsByNode(ctx, t, l.env)), nil
	})
	worst, _ := stopWatch()
	if worst > 1 {
		t.Errorf("%d web pods unavailable at once; the PDB allows 1", worst)
	}
	if sp, _ := l.emu.GetScaleSet(azureSetID("aks-spot-12345678-vmss")); sp.Capacity != 3 {
		t.Errorf("spot capacity %d, want 3 (one per replaced node)", sp.Capacity)
	}
	calls := l.emu.AllCalls()
	if n := calls[azureapi.MethodListScaleSetVMs]; n > 200 {
		t.Errorf("%d lists of scale set VMs: VMs must be looked up in batches and cached", n)
	}
	t.Logf("ARM calls of the migration: %v", calls)
	assertNoMarks(t, l.env)

	// Azure evicts a spot VM; with evictionPolicy Deallocate it stays,
	// deallocated: Spotter's sweep (every minute) deletes it and its Node.
	victim := l.emu.ScaleSetVMs(azureSetID("aks-spot-12345678-vmss"))[0]
	if err := l.emu.Evict(victim.ID()); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 2*time.Minute, "the evicted VM and its Node deleted", func(ctx context.Context) (bool, string, error) {
		_, vmLeft := l.emu.GetVM(victim.ID())
		_, err := l.env.Client.CoreV1().Nodes().Get(ctx, victim.ComputerName, metav1.GetOptions{})
		sp, _ := l.emu.GetScaleSet(azureSetID("aks-spot-12345678-vmss"))
		return !vmLeft && err != nil && sp.Capacity == 2, fmt.Sprintf("VM left %v, Node error %v, spot capacity %d", vmLeft, err, sp.Capacity), nil
	})
}

// An allocation failure: the spot set accepts the capacity and Azure cannot
// allocate the VMs; the migrator sees AllocationFailed on them at its next
// poll, well before nodeReadyTimeout (the default, 10m), cancels the
// request, backs off, and nothing is drained.
func TestAzureAllocationFailureDrainsNothing(t *testing.T) {
	l := startAzureLab(t)
	l.readyTimeout = "" // the default, 10m: the stock-out is read from the cloud, not waited out
	l.emu.SetAllocationFailure("aks-spot-12345678-vmss", azureapi.CodeAllocationFailed)
	l.start(t)
	note := firstEventNote(t, l.env, migrator.ReasonSpotUnavailable, stockOutWithin)
	logRequestToShortage(t, l.env)
	if !strings.Contains(note, "the cloud reports") || !strings.Contains(note, azureapi.CodeAllocationFailed) {
		t.Errorf("the Event's note %q does not give the VMs' error", note)
	}
	testenv.Eventually(t, 30*time.Second, "the request cancelled", func(context.Context) (bool, string, error) {
		sp, _ := l.emu.GetScaleSet(azureSetID("aks-spot-12345678-vmss"))
		vms := len(l.emu.ScaleSetVMs(sp.ID()))
		return sp.Capacity == 0 && vms == 0, fmt.Sprintf("spot capacity %d, %d VMs", sp.Capacity, vms), nil
	})
	ctx := testenv.Context(t, time.Minute)
	if n := l.readyNodes(ctx, t, "od"); n != 3 {
		t.Errorf("%d on-demand nodes, want the 3 untouched", n)
	}
	if od, _ := l.emu.GetScaleSet(azureSetID("aks-od-12345678-vmss")); od.Capacity != 3 {
		t.Errorf("od capacity %d, want 3", od.Capacity)
	}
	if n := l.emu.Calls(azureapi.MethodDeleteInstances); n != 1 {
		t.Errorf("%d delete instances calls, want the one that cancelled the request", n)
	}
	assertNoMarks(t, l.env)

	// spotter plan with the same configuration names each node's scale set,
	// VM size and on-demand price (from the configuration: the compute API
	// publishes none).
	var out, errOut bytes.Buffer
	code := cli.Main([]string{"plan", "--kubeconfig", l.env.Kubeconfig, "--config", filepath.Join(l.dir, "spotter.yaml"), "-o", "json"},
		cli.Streams{In: strings.NewReader(""), Out: &out, Err: &errOut})
	var p plan.Plan
	if code != 0 || json.Unmarshal(out.Bytes(), &p) != nil {
		t.Fatalf("spotter plan: exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
	group := strings.ToLower(azureLabGroup) + "/aks-od-12345678-vmss"
	found := 0
	for _, n := range p.Nodes {
		if n.NodeGroup == group && n.InstanceType == "Standard_D4s_v5" && n.HourlyPrice == 0.192 {
			found++
		}
	}
	if found != 3 {
		t.Errorf("%d nodes of scale set %s with size and price in the plan, want 3:\n%s%s", found, group, out.String(), errOut.String())
	}

	// Without a configured price, the price comes from the Retail Prices
	// API (on the emulator, at cloud.azure.endpoint): Linux, westeurope.
	want := 0.0
	for _, it := range l.emu.RetailPrices() {
		if it.ArmRegionName == "westeurope" && it.SkuName == "D4s v5" && it.Type == "Consumption" && !strings.Contains(it.ProductName, "Windows") {
			want = it.USD
		}
	}
	fromCloud := 0
	for _, n := range planWithout(t, l.env.Kubeconfig, filepath.Join(l.dir, "spotter.yaml"), "    Standard_D4s_v5: {onDemand: 0.192, spot: 0.04}\n").Nodes {
		if n.NodeGroup == group && n.HourlyPrice == want && want != 0.192 {
			fromCloud++
		}
	}
	if fromCloud != 3 || l.emu.Calls(azureapi.RetailMethod) != 1 {
		t.Errorf("%d on-demand nodes priced %v from the Retail Prices API (%d calls: want one, by the plan whose configuration lacks a price), want 3", fromCloud, want, l.emu.Calls(azureapi.RetailMethod))
	}
}
