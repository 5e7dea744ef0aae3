package integration

import (
	"math"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"spotter.dev/spotter/internal/emulator/azureapi"
	"spotter.dev/spotter/internal/emulator/gcpapi"
	"spotter.dev/spotter/internal/lab"
	"spotter.dev/spotter/internal/sim/scenario"
	"spotter.dev/spotter/internal/testenv"
	tu "spotter.dev/spotter/internal/testutil"
)

// simulatedPrices runs `spotter simulate --from-cluster --print-scenario`
// with config and returns each node group's price by zone/class/type, or
// the exit code and stderr.
func simulatedPrices(t *testing.T, kubeconfig, config string) (map[string]float64, int, string) {
	t.Helper()
	code, out, errOut := runSpotter("simulate", "--from-cluster", "--kubeconfig", kubeconfig, "--config", config, "--print-scenario", "--out", t.TempDir())
	if code != 0 {
		return nil, code, errOut
	}
	var sc scenario.Scenario
	if err := yaml.Unmarshal([]byte(out), &sc); err != nil {
		t.Fatalf("the printed scenario: %v\n%s", err, out)
	}
	got := map[string]float64{}
	for _, g := range sc.NodeGroups {
		got[g.Zone+"/"+g.CapacityType+"/"+g.InstanceType] = g.PricePerHour
	}
	return got, 0, errOut
}

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "spotter.yaml")
	if err := os.WriteFile(path, []byte("apiVersion: spotter.dev/v1alpha1\nkind: SpotterConfiguration\n"+body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// `spotter simulate --from-cluster` prices node groups as `spotter plan`
// does: through the configured provider (gcp: the Cloud Billing Catalog;
// azure: the Retail Prices API, both on the emulators behind
// cloud.<provider>.endpoint), a configured price first; it refuses only a
// type neither prices, naming the field and the provider.
func TestSimulateFromClusterCloudPrices(t *testing.T) {
	env := testenv.StartAPIServer(t)
	ctx := testenv.Context(t, 3*time.Minute)
	pod := func(name, node string) {
		p := tu.Pod(name, tu.InNamespace("default"), tu.OnNode(node), tu.CPU("500m"), tu.WithLabels("app", "web"), tu.OwnedBy("ReplicaSet", "web-5d8f"))
		if _, err := env.Client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// GCP: an on-demand n2-standard-4 (priced by no configuration) and a
	// spot e2-standard-4 (configured).
	gemu := gcpapi.New(gcpapi.Options{})
	gsrv := httptest.NewServer(gemu)
	t.Cleanup(gsrv.Close)
	od, err := gemu.AddInstance(gcpapi.Instance{Project: "lab", Zone: "us-central1-a", Name: "gke-od-1", MachineType: "n2-standard-4"})
	if err != nil {
		t.Fatal(err)
	}
	spot, err := gemu.AddInstance(gcpapi.Instance{Project: "lab", Zone: "us-central1-a", Name: "gke-spot-1", MachineType: "e2-standard-4",
		Scheduling: gcpapi.Scheduling{ProvisioningModel: gcpapi.ProvisioningSpot}})
	if err != nil {
		t.Fatal(err)
	}
	if err := lab.CreateNodes(ctx, env.Client,
		lab.NodeSpec{Name: od.Name, Class: lab.ClassOnDemand, InstanceType: od.MachineType, Zone: od.Zone, ProviderID: od.ProviderID()},
		lab.NodeSpec{Name: spot.Name, Class: lab.ClassSpot, InstanceType: spot.MachineType, Zone: spot.Zone, ProviderID: spot.ProviderID()},
	); err != nil {
		t.Fatal(err)
	}
	pod("web-1", od.Name)
	gcpConfig := "cloud:\n  provider: gcp\n  gcp:\n    project: lab\n    endpoint: " + gsrv.URL + "\n    nodeGroups: [{namePrefix: gke-, maxSize: 3}]\n" +
		"pricing:\n  currency: USD\n  instanceTypes:\n    e2-standard-4: {onDemand: 0.134, spot: 0.04}\n"
	got, code, errOut := simulatedPrices(t, env.Kubeconfig, writeConfig(t, gcpConfig))
	if code != 0 {
		t.Fatalf("gcp: exit %d\n%s", code, errOut)
	}
	rate := func(desc string) float64 {
		for _, s := range gemu.SKUs() {
			if s.Description == desc && s.Regions[0] == "us-central1" {
				return s.USD
			}
		}
		t.Fatalf("no SKU %q", desc)
		return 0
	}
	want := map[string]float64{
		"us-central1-a/on-demand/n2-standard-4": 4*rate("N2 Instance Core running in Americas") + 16*rate("N2 Instance Ram running in Americas"),
		"us-central1-a/spot/n2-standard-4":      4*rate("Spot Preemptible N2 Instance Core running in Americas") + 16*rate("Spot Preemptible N2 Instance Ram running in Americas"),
		"us-central1-a/spot/e2-standard-4":      0.04,
	}
	for k, v := range want {
		if math.Abs(got[k]-v) > 1e-6 {
			t.Errorf("gcp group %s: price %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
	if gemu.Calls(gcpapi.BillingMethod) != 1 {
		t.Errorf("%d catalog lists, want 1", gemu.Calls(gcpapi.BillingMethod))
	}

	// A type neither the catalog nor the configuration prices.
	gemu.SetSKUs(nil)
	_, code, errOut = simulatedPrices(t, env.Kubeconfig, writeConfig(t, gcpConfig))
	if code != 1 || !strings.Contains(errOut, "no price for instance type(s) n2-standard-4: the cloud provider gcp gives none; add pricing.instanceTypes.n2-standard-4") {
		t.Errorf("gcp without the catalog's prices: exit %d, want one error naming the field and the provider:\n%s", code, errOut)
	}

	// Azure: the on-demand VM of a scale set in eastus, priced from the
	// Retail Prices API, its spot twin too.
	aemu := azureapi.New(azureapi.Options{})
	asrv := httptest.NewServer(aemu)
	t.Cleanup(asrv.Close)
	const sub, rg = "0b1f6471-1bf0-4dda-aec3-111122223333", "rg"
	if err := aemu.CreateScaleSet(azureapi.ScaleSet{Subscription: sub, ResourceGroup: rg, Name: "aks-od-1-vmss", Location: "eastus", SKU: "Standard_D4as_v5",
		Capacity: 1, Zones: []string{"1"}}); err != nil {
		t.Fatal(err)
	}
	aemu.Step()
	vms := aemu.VMs()
	if len(vms) != 1 {
		t.Fatalf("%d VMs", len(vms))
	}
	if err := lab.CreateNodes(ctx, env.Client, lab.NodeSpec{Name: vms[0].ComputerName, Class: lab.ClassOnDemand, InstanceType: "Standard_D4as_v5",
		Zone: "eastus-1", ProviderID: vms[0].ProviderID()}); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.CoreV1().Nodes().Delete(ctx, od.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.CoreV1().Nodes().Delete(ctx, spot.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	pod("web-2", vms[0].ComputerName)
	azureConfig := "cloud:\n  provider: azure\n  azure:\n    subscriptionID: " + sub + "\n    resourceGroup: " + rg + "\n    endpoint: " + asrv.URL +
		"\n    nodeGroups: [{namePrefix: aks-, maxSize: 3}]\n"
	got, code, errOut = simulatedPrices(t, env.Kubeconfig, writeConfig(t, azureConfig))
	if code != 0 {
		t.Fatalf("azure: exit %d\n%s", code, errOut)
	}
	retail := func(sku string) float64 {
		for _, it := range aemu.RetailPrices() {
			if it.ArmRegionName == "eastus" && it.SkuName == sku && it.Type == "Consumption" && !strings.Contains(it.ProductName, "Windows") {
				return it.USD
			}
		}
		t.Fatalf("no retail price %q", sku)
		return 0
	}
	want = map[string]float64{"eastus-1/on-demand/Standard_D4as_v5": retail("D4as v5"), "eastus-1/spot/Standard_D4as_v5": retail("D4as v5 Spot")}
	if len(got) != len(want) {
		t.Errorf("azure groups %v, want %v", got, want)
	}
	for k, v := range want {
		if math.Abs(got[k]-v) > 1e-9 {
			t.Errorf("azure group %s: price %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
	if aemu.Calls(azureapi.RetailMethod) != 1 {
		t.Errorf("%d retail price calls, want 1", aemu.Calls(azureapi.RetailMethod))
	}
}
