package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"spotter.dev/spotter/internal/cli"
	"spotter.dev/spotter/internal/cloud/clusterapi"
	"spotter.dev/spotter/internal/controller/migrator"
	"spotter.dev/spotter/internal/drain"
	"spotter.dev/spotter/internal/lab"
	"spotter.dev/spotter/internal/lab/capiinfra"
	"spotter.dev/spotter/internal/plan"
	"spotter.dev/spotter/internal/testenv"
	tu "spotter.dev/spotter/internal/testutil"
)

// The migrator on cloud.provider clusterapi, against real Cluster API: the
// workers of a Cluster are two MachineDeployments, on-demand (two Machines)
// and spot (none yet, with the capacity annotations for scale from zero),
// and a spot MachinePool whose infrastructure makes no Machines (a scale set
// of one instance at most, of a cheaper instance type), all annotated with the
// cluster autoscaler's min and max sizes. The migrator moves the on-demand
// workloads to spot make-before-break: the first node's onto the cheaper
// MachinePool (it raises its replicas, the lab's LabMachinePool makes the
// instance, Cluster API lists its Node, the migrator waits for it to be Ready),
// the second's onto the spot MachineDeployment (the pool is at its max): it
// raises its replicas, and Cluster API creates the spot Machine; once the new
// Nodes are Ready it drains each on-demand node, then marks its Machine for
// deletion and lowers the on-demand replicas, and Cluster API deletes exactly
// that Machine and its Node.
//
// The management cluster is a second apiserver, as with a real management
// cluster: Cluster API's CRDs, its manager and the lab's provider run there,
// and Spotter reads them through cloud.clusterAPI.managementKubeconfig; the
// Nodes and pods are in the workload cluster (the lab), which Cluster API
// reaches through the Cluster's <cluster>-kubeconfig Secret. (The same
// apiserver for both is what the provider's integration test runs.)
func TestClusterAPIMigratorReplacesOnDemandBySpot(t *testing.T) {
	const ns, clusterName = "capi-e2e", "lab"
	env, mgmt, dyn, ctx := startCAPILab(t, ns, 8*time.Minute)
	spotPool := capiinfra.NewMachinePool(ns, "spot-pool", clusterName, "spot-pool", 0)
	spotPool.SetAnnotations(map[string]string{clusterapi.MinSizeAnnotation: "0", clusterapi.MaxSizeAnnotation: "1",
		clusterapi.CapacityCPUAnnotation: "4", clusterapi.CapacityMemoryAnnotation: "16Gi"})
	createCAPIGroups(ctx, t, dyn, ns, clusterName, 2, 3,
		capiObject{capiinfra.LabMachinePoolsGVR, capiinfra.NewLabMachinePool(ns, "spot-pool", capiinfra.MachineSpec{Spot: true, InstanceType: "c5.xlarge", CPU: "4", Memory: "16Gi"}, false)},
		capiObject{capiinfra.MachinePoolsGVR, spotPool})
	odMachines := capiMachines(t, env, dyn, ns, "od", 2)

	// One web pod of 3 CPU on each on-demand node: each needs a spot node.
	d := tu.Deployment("web", 2, tu.CPU("3"), tu.GracePeriod(1), tu.AntiAffinity("web", "kubernetes.io/hostname"))
	if _, err := env.Client.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.PolicyV1().PodDisruptionBudgets("default").Create(ctx, tu.PDB("web", "web", tu.MaxUnavailable(1)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitForPodsRunning("default", "app=web", 2, time.Minute)
	waitPDBsComputed(ctx, t, env)

	dir := t.TempDir()
	config := filepath.Join(dir, "spotter.yaml")
	body := fmt.Sprintf(`apiVersion: spotter.dev/v1alpha1
kind: SpotterConfiguration
cloud:
  provider: clusterapi
  clusterAPI:
    managementKubeconfig: %s
    clusterName: %s
    namespace: %s
pricing:
  instanceTypes:
    m5.xlarge: {onDemand: 0.192, spot: 0.07}
    c5.xlarge: {onDemand: 0.17, spot: 0.05}
migrator:
  enabled: true
  schedule: "@every 5s"
  nodeReadyTimeout: 90s
rescheduler:
  enabled: false
drain:
  evictionBackoff: 200ms
  maxEvictionBackoff: 1s
`, mgmt.Kubeconfig, clusterName, ns)
	if err := os.WriteFile(config, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	testenv.StartSpotter(t, "controller", "controller", "--config", config, "--kubeconfig", env.Kubeconfig,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--leader-elect=false")

	var spotMachines []capiMachine
	var poolNodes []string
	testenv.Eventually(t, 5*time.Minute, "the on-demand Machines gone, a spot Machine and a spot pool instance, every web pod Running on spot", func(ctx context.Context) (bool, string, error) {
		od, err := machinesOf(ctx, dyn, ns, "od")
		if err != nil {
			return false, "", err
		}
		spot, err := machinesOf(ctx, dyn, ns, "spot")
		if err != nil {
			return false, "", err
		}
		pods, err := env.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return false, "", err
		}
		onSpot := 0
		var where []string
		for _, p := range pods.Items {
			where = append(where, p.Name+"@"+p.Spec.NodeName)
			if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil || p.Spec.NodeName == "" {
				continue
			}
			n, err := env.Client.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{})
			if err == nil && n.Labels[lab.CapacityTypeLabel] == "spot" {
				onSpot++
			}
		}
		spotMachines = spot
		if poolNodes, err = machinePoolNodes(ctx, dyn, ns, "spot-pool"); err != nil {
			return false, "", err
		}
		return len(od) == 0 && len(spot) == 1 && len(poolNodes) == 1 && onSpot == 2 && len(pods.Items) == 2,
			fmt.Sprintf("od Machines %v, spot Machines %v, spot pool Nodes %v, pods %v", od, spot, poolNodes, where), nil
	})

	// Cluster API made the spot Machines (its MachineSet owns them) and their
	// Nodes, in the workload cluster; the on-demand Nodes went with their
	// Machines. The management cluster has no Node.
	mgmtNodes, err := mgmt.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(mgmtNodes.Items) != 0 {
		t.Errorf("%d Nodes in the management cluster, want none", len(mgmtNodes.Items))
	}
	for _, m := range spotMachines {
		if !m.ownedBySet || m.node == "" {
			t.Errorf("spot Machine %v: not made by Cluster API's MachineSet, or without a Node", m)
		}
	}
	for _, m := range odMachines {
		testenv.Eventually(t, time.Minute, "node "+m.node+" deleted", func(ctx context.Context) (bool, string, error) {
			_, err := env.Client.CoreV1().Nodes().Get(ctx, m.node, metav1.GetOptions{})
			return nodeGone(err)
		})
	}
	for md, want := range map[string]int64{"od": 0, "spot": 1} {
		obj, err := dyn.Resource(capiinfra.MachineDeploymentsGVR).Namespace(ns).Get(ctx, md, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got, _, _ := unstructured.NestedInt64(obj.Object, "spec", "replicas"); got != want {
			t.Errorf("MachineDeployment %s: replicas %d, want %d", md, got, want)
		}
	}
	if obj, err := dyn.Resource(capiinfra.MachinePoolsGVR).Namespace(ns).Get(ctx, "spot-pool", metav1.GetOptions{}); err != nil {
		t.Error(err)
	} else if got, _, _ := unstructured.NestedInt64(obj.Object, "spec", "replicas"); got != 1 {
		t.Errorf("MachinePool spot-pool: replicas %d, want 1", got)
	}
	// Make-before-break: each on-demand node had its spot capacity asked for
	// before it was selected for deletion (and so before it was drained).
	for _, m := range odMachines {
		requested, selected := eventTime(ctx, t, env, m.node, migrator.ReasonSpotRequested), eventTime(ctx, t, env, m.node, migrator.ReasonSelected)
		if requested.IsZero() || selected.IsZero() || selected.Before(requested) {
			t.Errorf("node %s: spot requested at %s, selected for deletion at %s; want the request first", m.node, requested, selected)
		}
	}
	// Nothing left marked or cordoned.
	nodes, err := env.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		if _, marked, _ := drain.MarkOf(&n); marked || n.Labels[migrator.SelectedForDeletionLabel] != "" || n.Spec.Unschedulable {
			t.Errorf("node %s left marked: labels %v annotations %v unschedulable %t", n.Name, n.Labels, n.Annotations, n.Spec.Unschedulable)
		}
	}
	machinesLeft, err := dyn.Resource(capiinfra.MachinesGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range machinesLeft.Items {
		if m.GetDeletionTimestamp() != nil {
			continue // on its way out, as asked
		}
		if _, ok := m.GetAnnotations()[clusterapi.DeleteMachineAnnotation]; ok {
			t.Errorf("Machine %s left marked %s", m.GetName(), clusterapi.DeleteMachineAnnotation)
		}
	}

	// spotter plan with the same configuration names the spot Machine's
	// group; the pool's instance has none (no Machine: not Spotter's to
	// delete, so not among the provider's instances).
	var out, errOut bytes.Buffer
	code := cli.Main([]string{"plan", "--kubeconfig", env.Kubeconfig, "--config", config, "-o", "json"},
		cli.Streams{In: strings.NewReader(""), Out: &out, Err: &errOut})
	var p plan.Plan
	if code != 0 || json.Unmarshal(out.Bytes(), &p) != nil {
		t.Fatalf("spotter plan: exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
	inSpotGroup := 0
	for _, n := range p.Nodes {
		if n.NodeGroup == "MachineDeployment/"+ns+"/spot" {
			inSpotGroup++
		}
		if len(poolNodes) == 1 && n.Name == poolNodes[0] && n.NodeGroup != "" {
			t.Errorf("the spot pool's node %s in group %s in the plan, want none", n.Name, n.NodeGroup)
		}
	}
	if inSpotGroup != 1 {
		t.Errorf("%d nodes of group MachineDeployment/%s/spot in the plan, want 1:\n%s%s", inSpotGroup, ns, out.String(), errOut.String())
	}
}

// machinePoolNodes returns the Nodes Cluster API matched to the instances of a
// MachinePool (status.nodeRefs whose Node's providerID is in
// spec.providerIDList).
// startCAPILab starts the lab (the workload cluster) and a second apiserver
// as its management cluster, where Cluster API's manager and the lab's
// provider run, with namespace ns; it returns both, a dynamic client of the
// management cluster and a context that ends after timeout.
func startCAPILab(t *testing.T, ns string, timeout time.Duration) (env, mgmt *testenv.Env, dyn dynamic.Interface, ctx context.Context) {
	t.Helper()
	env = testenv.StartLab(t)
	mgmt = testenv.StartAPIServer(t)
	testenv.StartClusterAPIManaging(t, mgmt, env)
	dyn, err := dynamic.NewForConfig(mgmt.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx = testenv.Context(t, timeout)
	if _, err := mgmt.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return env, mgmt, dyn, ctx
}

// capiObject is an object of Cluster API or of the lab's provider to create.
type capiObject struct {
	gvr schema.GroupVersionResource
	obj *unstructured.Unstructured
}

// createCAPIGroups creates, in namespace ns of the cluster dyn reaches, the
// Cluster clusterName with the lab's infrastructure and control plane, and
// its two workers: MachineDeployment "od" of on-demand m5.xlarge Machines
// (odReplicas, at most as many) and "spot" of spot ones (none yet, at most
// spotMax, with the capacity annotations for scale from zero), then extra.
func createCAPIGroups(ctx context.Context, t *testing.T, dyn dynamic.Interface, ns, clusterName string, odReplicas int32, spotMax int, extra ...capiObject) {
	t.Helper()
	cluster, labCluster, labControlPlane := capiinfra.NewCluster(ns, clusterName)
	odMD := capiinfra.NewMachineDeployment(ns, "od", clusterName, "od", odReplicas)
	odMD.SetAnnotations(map[string]string{clusterapi.MinSizeAnnotation: "0", clusterapi.MaxSizeAnnotation: fmt.Sprint(odReplicas)})
	spotMD := capiinfra.NewMachineDeployment(ns, "spot", clusterName, "spot", 0)
	spotMD.SetAnnotations(map[string]string{clusterapi.MinSizeAnnotation: "0", clusterapi.MaxSizeAnnotation: fmt.Sprint(spotMax),
		clusterapi.CapacityCPUAnnotation: "4", clusterapi.CapacityMemoryAnnotation: "16Gi"})
	for _, o := range append([]capiObject{
		{capiinfra.LabClustersGVR, labCluster},
		{capiinfra.LabControlPlanesGVR, labControlPlane},
		{capiinfra.ClustersGVR, cluster},
		{capiinfra.LabMachineTemplatesGVR, capiinfra.NewMachineTemplate(ns, "od", capiinfra.MachineSpec{InstanceType: "m5.xlarge", CPU: "4", Memory: "16Gi"})},
		{capiinfra.LabMachineTemplatesGVR, capiinfra.NewMachineTemplate(ns, "spot", capiinfra.MachineSpec{Spot: true, InstanceType: "m5.xlarge", CPU: "4", Memory: "16Gi"})},
		{capiinfra.MachineDeploymentsGVR, odMD},
		{capiinfra.MachineDeploymentsGVR, spotMD},
	}, extra...) {
		if _, err := dyn.Resource(o.gvr).Namespace(ns).Create(ctx, o.obj, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating %s %s: %v", o.obj.GetKind(), o.obj.GetName(), err)
		}
	}
}

func machinePoolNodes(ctx context.Context, dyn dynamic.Interface, ns, mp string) ([]string, error) {
	obj, err := dyn.Resource(capiinfra.MachinePoolsGVR).Namespace(ns).Get(ctx, mp, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	ids, _, _ := unstructured.NestedStringSlice(obj.Object, "spec", "providerIDList")
	refs, _, _ := unstructured.NestedSlice(obj.Object, "status", "nodeRefs")
	var out []string
	for _, r := range refs {
		if name, _ := r.(map[string]any)["name"].(string); name != "" && len(ids) > 0 {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out, nil
}

// capiMachine is a Machine of a MachineDeployment.
type capiMachine struct {
	name, node string
	ownedBySet bool
}

// machinesOf lists the Machines of a MachineDeployment that are not being
// deleted.
func machinesOf(ctx context.Context, dyn dynamic.Interface, ns, md string) ([]capiMachine, error) {
	list, err := dyn.Resource(capiinfra.MachinesGVR).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: capiinfra.MachineDeploymentNameLabel + "=" + md})
	if err != nil {
		return nil, err
	}
	var out []capiMachine
	for _, m := range list.Items {
		if m.GetDeletionTimestamp() != nil {
			continue
		}
		node, _, _ := unstructured.NestedString(m.Object, "status", "nodeRef", "name")
		owned := false
		for _, ref := range m.GetOwnerReferences() {
			owned = owned || (ref.Kind == "MachineSet" && ref.Controller != nil && *ref.Controller)
		}
		out = append(out, capiMachine{name: m.GetName(), node: node, ownedBySet: owned})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

// capiMachines waits until a MachineDeployment has n Machines with Ready Nodes.
func capiMachines(t *testing.T, env *testenv.Env, dyn dynamic.Interface, ns, md string, n int) []capiMachine {
	t.Helper()
	var out []capiMachine
	testenv.Eventually(t, 2*time.Minute, fmt.Sprintf("%d Machines of %s with Ready Nodes", n, md), func(ctx context.Context) (bool, string, error) {
		all, err := machinesOf(ctx, dyn, ns, md)
		if err != nil {
			return false, "", err
		}
		out = nil
		for _, m := range all {
			if m.node == "" {
				continue
			}
			node, err := env.Client.CoreV1().Nodes().Get(ctx, m.node, metav1.GetOptions{})
			if err != nil {
				continue
			}
			for _, c := range node.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					out = append(out, m)
				}
			}
		}
		return len(all) == n && len(out) == n, fmt.Sprintf("%v", all), nil
	})
	return out
}

// eventTime is when the first Event of reason about node was emitted; zero
// when there is none.
func eventTime(ctx context.Context, t *testing.T, env *testenv.Env, node, reason string) time.Time {
	t.Helper()
	list, err := env.Client.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: fields.Set{"reason": reason, "involvedObject.name": node}.String()})
	if err != nil {
		t.Fatal(err)
	}
	var first time.Time
	for _, e := range list.Items {
		at := e.EventTime.Time
		if at.IsZero() {
			at = e.FirstTimestamp.Time
		}
		if first.IsZero() || at.Before(first) {
			first = at
		}
	}
	return first
}
