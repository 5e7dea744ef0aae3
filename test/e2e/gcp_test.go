package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"spotter.dev/spotter/internal/cli"
	gcpprovider "spotter.dev/spotter/internal/cloud/gcp"
	"spotter.dev/spotter/internal/controller/migrator"
	"spotter.dev/spotter/internal/emulator/gcpapi"
	"spotter.dev/spotter/internal/lab"
	"spotter.dev/spotter/internal/plan"
	"spotter.dev/spotter/internal/testenv"
	tu "spotter.dev/spotter/internal/testutil"
)

// gcpLab is the lab with the Compute Engine emulator behind it: each
// instance the emulator's managed instance groups create becomes a kwok Node
// named like the instance, with its providerID and GKE's labels, and goes
// when the instance is deleted. Two groups of GKE cluster "lab", as GKE
// makes them for two node pools in one zone: gke-lab-od-a (3 on-demand
// e2-standard-4) and gke-lab-spot-a (empty, spot).
type gcpLab struct {
	// readyTimeout is migrator.nodeReadyTimeout; empty: the default (10m).
	readyTimeout string
	env          *testenv.Env
	emu          *gcpapi.Server
	url          string
	dir          string
}

const (
	gcpLabProject = "spotter-lab"
	gcpLabZone    = "us-central1-a"
)

func gcpGroupPath(name string) string {
	return gcpapi.Group{Project: gcpLabProject, Zone: gcpLabZone, Name: name}.Path()
}

func startGCPLab(t *testing.T) *gcpLab {
	t.Helper()
	env := testenv.StartLab(t)
	ctx := testenv.Context(t, 5*time.Minute)
	emu := gcpapi.New(gcpapi.Options{CreateDelay: 2 * time.Second, DeleteDelay: time.Second})
	srv := httptest.NewServer(emu)
	t.Cleanup(srv.Close)
	emu.OnRunning(func(i gcpapi.Instance) {
		labels := map[string]string{gcpprovider.NodePoolLabel: i.Labels[gcpprovider.NodePoolNameLabel]}
		if i.Scheduling.ProvisioningModel == gcpapi.ProvisioningSpot {
			labels[gcpprovider.SpotLabel] = "true"
		}
		err := lab.CreateNodes(ctx, env.Client, lab.NodeSpec{Name: i.Name, CPU: "4", Memory: "16Gi", Zone: i.Zone,
			InstanceType: i.MachineType, ProviderID: i.ProviderID(), Labels: labels})
		if err != nil && ctx.Err() == nil {
			t.Errorf("creating the Node of instance %s: %v", i.Name, err)
		}
	})
	emu.OnDeleted(func(i gcpapi.Instance) {
		_ = env.Client.CoreV1().Nodes().Delete(ctx, i.Name, metav1.DeleteOptions{})
	})
	go emu.Run(ctx, 200*time.Millisecond)

	tmpl := func(name, pool string, s gcpapi.Scheduling, nodeLabels string) string {
		t.Helper()
		path, err := emu.CreateInstanceTemplate(gcpapi.InstanceTemplate{Project: gcpLabProject, Name: name, MachineType: "e2-standard-4", Scheduling: s,
			Labels:   map[string]string{gcpprovider.ClusterNameLabel: "lab", gcpprovider.NodePoolNameLabel: pool},
			Metadata: map[string]string{gcpprovider.KubeEnvKey: "AUTOSCALER_ENV_VARS: node_labels=" + nodeLabels + ";os=linux\n"}})
		if err != nil {
			t.Fatal(err)
		}
		return path
	}
	od := tmpl("gke-lab-od", "od-pool", gcpapi.Scheduling{ProvisioningModel: gcpapi.ProvisioningStandard}, gcpprovider.NodePoolLabel+"=od-pool")
	spot := tmpl("gke-lab-spot", "spot-pool", gcpapi.Scheduling{ProvisioningModel: gcpapi.ProvisioningSpot, InstanceTerminationAction: "DELETE"},
		gcpprovider.NodePoolLabel+"=spot-pool,"+gcpprovider.SpotLabel+"=true")
	for _, g := range []gcpapi.Group{
		{Project: gcpLabProject, Zone: gcpLabZone, Name: "gke-lab-od-a", InstanceTemplate: od, TargetSize: 3},
		{Project: gcpLabProject, Zone: gcpLabZone, Name: "gke-lab-spot-a", InstanceTemplate: spot},
	} {
		if err := emu.CreateGroup(g); err != nil {
			t.Fatal(err)
		}
	}
	l := &gcpLab{env: env, emu: emu, url: srv.URL, dir: t.TempDir(), readyTimeout: "20s"}
	testenv.Eventually(t, time.Minute, "three on-demand nodes Ready", func(ctx context.Context) (bool, string, error) {
		n := l.readyNodes(ctx, t, "od-pool")
		return n == 3, fmt.Sprintf("%d ready", n), nil
	})
	for _, w := range []string{"web", "api"} {
		d := tu.Deployment(w, 3, tu.CPU("1500m"), tu.GracePeriod(1), tu.AntiAffinity(w, "kubernetes.io/hostname"))
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

// readyNodes counts the Ready nodes of a GKE node pool.
func (l *gcpLab) readyNodes(ctx context.Context, t *testing.T, pool string) int {
	t.Helper()
	ready, err := readyNodes(ctx, l.env, gcpprovider.NodePoolLabel+"="+pool)
	if err != nil {
		t.Fatal(err)
	}
	return ready
}

// start runs `spotter controller` with the migrator on the gcp provider,
// pointed at the emulator by cloud.gcp.endpoint. GKE puts no label on
// on-demand nodes: an on-demand selector says which they are.
func (l *gcpLab) start(t *testing.T) {
	t.Helper()
	config := filepath.Join(l.dir, "spotter.yaml")
	body := fmt.Sprintf(`apiVersion: spotter.dev/v1alpha1
kind: SpotterConfiguration
classification:
  onDemandSelectors: ["%s,!%s,!%s"]
cloud:
  provider: gcp
  gcp:
    project: %s
    clusterName: lab
    endpoint: %s
    nodeGroups:
    - {nodePool: od-pool, maxSize: 3}
    - {nodePool: spot-pool, maxSize: 6}
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
    e2-standard-4: {onDemand: 0.134, spot: 0.04}
`, gcpprovider.NodePoolLabel, gcpprovider.SpotLabel, gcpprovider.PreemptibleLabel, gcpLabProject, l.url)
	body = strings.Replace(body, "{{nodeReadyTimeout}}", nodeReadyTimeoutLine(l.readyTimeout), 1)
	if err := os.WriteFile(config, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	testenv.StartSpotter(t, "controller", "controller", "--config", config, "--kubeconfig", l.env.Kubeconfig,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--leader-elect=false")
}

// The migrator replaces the on-demand managed instance group's instances by
// spot ones, make-before-break, through the Compute Engine client against
// the emulator: every pod ends on spot, the on-demand group is at 0 and its
// instances deleted, the budget held, and no node is left marked.
func TestGCPMigratorReplacesOnDemandBySpot(t *testing.T) {
	l := startGCPLab(t)
	lm := &migratorLab{env: l.env}
	stopWatch := lm.watch(t)
	l.start(t)
	testenv.Eventually(t, 3*time.Minute, "every pod Running on spot, the on-demand group empty", func(ctx context.Context) (bool, string, error) {
		onSpot, err := podsOnSpot(ctx, l.env, "gke-lab-", gcpprovider.SpotLabel, "true")
		if err != nil {
			return false, "", err
		}
		od, _ := l.emu.GroupStatus(gcpGroupPath("gke-lab-od-a"))
		sp, _ := l.emu.GroupStatus(gcpGroupPath("gke-lab-spot-a"))
		return onSpot == 6 && od.TargetSize == 0 && len(od.Members) == 0,
			fmt.Sprintf("%d pods on spot; od target %d with %d members, spot target %d; %s", onSpot, od.TargetSize, len(od.Members), sp.TargetSize, podsByNode(ctx, t, l.env)), nil
	})
	worst, _ := stopWatch()
	if worst > 1 {
		t.Errorf("%d web pods unavailable at once; the PDB allows 1", worst)
	}
	if sp, _ := l.emu.GroupStatus(gcpGroupPath("gke-lab-spot-a")); sp.TargetSize != 3 {
		t.Errorf("spot group target %d, want 3 (one per replaced node)", sp.TargetSize)
	}
	calls := l.emu.AllCalls()
	// A few nodes not known yet are read by a get each, many by the
	// project's list; either way once, then cached.
	if n := calls["compute.instances.aggregatedList"] + calls["compute.instances.get"]; n > 20 {
		t.Errorf("%d instance lookups (aggregatedList pages and gets): instances must be looked up once and cached", n)
	}
	t.Logf("Compute Engine calls of the migration: %v", calls)
	assertNoMarks(t, l.env)
}

// A stock-out: the spot group accepts the resize and cannot create the
// instances; the migrator sees ZONE_RESOURCE_POOL_EXHAUSTED on them at its
// next poll, well before nodeReadyTimeout (the default, 10m), cancels the
// request, backs off, and nothing is drained.
func TestGCPSpotShortageDrainsNothing(t *testing.T) {
	l := startGCPLab(t)
	l.readyTimeout = "" // the default, 10m: the stock-out is read from the cloud, not waited out
	l.emu.SetCapacityShortage("gke-lab-spot-a", true)
	l.start(t)
	note := firstEventNote(t, l.env, migrator.ReasonSpotUnavailable, stockOutWithin)
	logRequestToShortage(t, l.env)
	if !strings.Contains(note, "the cloud reports") || !strings.Contains(note, "ZONE_RESOURCE_POOL_EXHAUSTED") {
		t.Errorf("the Event's note %q does not give the instances' error", note)
	}
	testenv.Eventually(t, 30*time.Second, "the request cancelled", func(context.Context) (bool, string, error) {
		sp, _ := l.emu.GroupStatus(gcpGroupPath("gke-lab-spot-a"))
		return sp.TargetSize == 0 && len(sp.Members) == 0, fmt.Sprintf("spot target %d, %d members", sp.TargetSize, len(sp.Members)), nil
	})
	ctx := testenv.Context(t, time.Minute)
	if n := l.readyNodes(ctx, t, "od-pool"); n != 3 {
		t.Errorf("%d on-demand nodes, want the 3 untouched", n)
	}
	if od, _ := l.emu.GroupStatus(gcpGroupPath("gke-lab-od-a")); od.TargetSize != 3 {
		t.Errorf("od target %d, want 3", od.TargetSize)
	}
	if l.emu.Calls("compute.instanceGroupManagers.deleteInstances") != 1 {
		t.Errorf("%d deleteInstances calls, want the one that cancelled the request", l.emu.Calls("compute.instanceGroupManagers.deleteInstances"))
	}
	assertNoMarks(t, l.env)

	// spotter plan with the same configuration names each node's group,
	// machine type and on-demand price (from the configuration: Compute
	// Engine publishes none).
	var out, errOut bytes.Buffer
	code := cli.Main([]string{"plan", "--kubeconfig", l.env.Kubeconfig, "--config", filepath.Join(l.dir, "spotter.yaml"), "-o", "json"},
		cli.Streams{In: strings.NewReader(""), Out: &out, Err: &errOut})
	var p plan.Plan
	if code != 0 || json.Unmarshal(out.Bytes(), &p) != nil {
		t.Fatalf("spotter plan: exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
	groups := 0
	for _, n := range p.Nodes {
		if n.NodeGroup == gcpLabZone+"/gke-lab-od-a" && n.InstanceType == "e2-standard-4" && n.HourlyPrice == 0.134 {
			groups++
		}
	}
	if groups != 3 {
		t.Errorf("%d nodes of group %s/gke-lab-od-a with type and price in the plan, want 3:\n%s%s", groups, gcpLabZone, out.String(), errOut.String())
	}

	// Without a configured price, the price comes from the Cloud Billing
	// Catalog (on the emulator, at cloud.gcp.endpoint): 4 vCPUs and 16 GiB
	// at E2's on-demand rates in us-central1.
	rate := func(desc string) float64 {
		for _, s := range l.emu.SKUs() {
			if s.Description == desc && s.Regions[0] == "us-central1" {
				return s.USD
			}
		}
		t.Fatalf("no SKU %q", desc)
		return 0
	}
	want := 4*rate("E2 Instance Core running in Americas") + 16*rate("E2 Instance Ram running in Americas")
	fromCloud := 0
	for _, n := range planWithout(t, l.env.Kubeconfig, filepath.Join(l.dir, "spotter.yaml"), "    e2-standard-4: {onDemand: 0.134, spot: 0.04}\n").Nodes {
		if n.NodeGroup == gcpLabZone+"/gke-lab-od-a" && math.Abs(n.HourlyPrice-want) < 1e-6 && n.HourlyPrice != 0.134 {
			fromCloud++
		}
	}
	if fromCloud != 3 || l.emu.Calls(gcpapi.BillingMethod) != 1 {
		t.Errorf("%d on-demand nodes priced %v from the catalog (%d catalog lists: want one, by the plan whose configuration lacks a price), want 3", fromCloud, want, l.emu.Calls(gcpapi.BillingMethod))
	}
}
