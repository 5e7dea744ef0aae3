package clusterapi_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/clock"

	"spotter.dev/spotter/internal/cloud"
	"spotter.dev/spotter/internal/cloud/clusterapi"
	"spotter.dev/spotter/internal/lab"
	"spotter.dev/spotter/internal/lab/capiinfra"
	"spotter.dev/spotter/internal/testenv"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// TestMachinePoolsAgainstClusterAPI runs the provider against MachinePools of
// the real Cluster API controllers, on the lab's LabMachinePools: two that
// make a Machine per instance (Cluster API's MachinePool Machines), on-demand
// and spot, and a spot one that does not (a scale set Cluster API sees only as
// a list of providerIDs). The steps share one Cluster and run in order.
func TestMachinePoolsAgainstClusterAPI(t *testing.T) {
	env := testenv.StartLab(t)
	testenv.StartClusterAPI(t, env)
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testenv.Context(t, 8*time.Minute)
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cluster, labCluster, labControlPlane := capiinfra.NewCluster(ns, clusterName)
	pool := func(name string, replicas int32, annotations map[string]string) *unstructured.Unstructured {
		mp := capiinfra.NewMachinePool(ns, name, clusterName, name, replicas)
		mp.SetAnnotations(annotations)
		return mp
	}
	sizes := func(min, max string, more ...string) map[string]string {
		a := map[string]string{clusterapi.MinSizeAnnotation: min, clusterapi.MaxSizeAnnotation: max}
		for i := 0; i+1 < len(more); i += 2 {
			a[more[i]] = more[i+1]
		}
		return a
	}
	create(ctx, t, dyn,
		labCluster, labControlPlane, cluster,
		capiinfra.NewLabMachinePool(ns, "od", capiinfra.MachineSpec{InstanceType: "m5.xlarge", Zone: "zone-a", CPU: "4", Memory: "16Gi"}, true),
		capiinfra.NewLabMachinePool(ns, "spot", capiinfra.MachineSpec{Spot: true, InstanceType: "m5.xlarge", Zone: "zone-b", CPU: "4", Memory: "16Gi"}, true),
		capiinfra.NewLabMachinePool(ns, "scaleset", capiinfra.MachineSpec{Spot: true, InstanceType: "m5.large", Zone: "zone-c", CPU: "2", Memory: "8Gi"}, false),
		capiinfra.NewLabMachinePool(ns, "plain", capiinfra.MachineSpec{}, false),
		pool("od", 2, sizes("1", "3")),
		pool("spot", 0, sizes("0", "2", clusterapi.CapacityCPUAnnotation, "4", clusterapi.CapacityMemoryAnnotation, "16Gi")),
		pool("scaleset", 1, sizes("0", "3")),
		pool("plain", 0, nil),
	)
	// "plain" has no size annotations: no node group.

	p, err := clusterapi.New(env.Config, env.Client, clock.RealClock{}, clusterapi.Options{ClusterName: clusterName, Namespace: ns, TTL: 500 * time.Millisecond,
		Pricing: v1alpha1.PricingConfig{InstanceTypes: map[string]v1alpha1.InstancePrice{"m5.xlarge": {OnDemand: 0.192, Spot: 0.07}}}})
	if err != nil {
		t.Fatal(err)
	}
	odMachines := waitPoolMachines(t, env, dyn, "od", 2)
	scaleset := waitPoolNodes(t, env, dyn, "scaleset", 1)

	groups, err := p.NodeGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]cloud.NodeGroup{}
	var ids []string
	for _, g := range groups {
		byID[g.ID()] = g
		ids = append(ids, g.ID())
	}
	if want := []string{"MachinePool/capi-it/od", "MachinePool/capi-it/scaleset", "MachinePool/capi-it/spot"}; !slices.Equal(ids, want) {
		t.Fatalf("node groups %v, want %v", ids, want)
	}
	gOD, gSpot, gSet := byID["MachinePool/capi-it/od"], byID["MachinePool/capi-it/spot"], byID["MachinePool/capi-it/scaleset"]
	if gOD.Spot() || !gSpot.Spot() || !gSet.Spot() {
		t.Errorf("spot from the infrastructure machine pools: od %t, spot %t, scaleset %t; want false, true, true", gOD.Spot(), gSpot.Spot(), gSet.Spot())
	}
	if gOD.MinSize() != 1 || gOD.MaxSize() != 3 || gSet.MinSize() != 0 || gSet.MaxSize() != 3 {
		t.Errorf("sizes od %d..%d scaleset %d..%d", gOD.MinSize(), gOD.MaxSize(), gSet.MinSize(), gSet.MaxSize())
	}

	t.Run("lookups: by Machine, and by the pool's providerIDList without one", func(t *testing.T) {
		insts, err := p.Instances(ctx, allNodes(ctx, t, env))
		if err != nil {
			t.Fatal(err)
		}
		// The scaleset's node is not Spotter's to delete: absent, so that the
		// migrator never drains it.
		if len(insts) != 2 {
			t.Errorf("instances %v, want the two od nodes only", insts)
		}
		for _, m := range odMachines {
			if inst := insts[m.node]; inst.NodeGroup != gOD.ID() || inst.Spot || inst.InstanceType != "m5.xlarge" || inst.PricePerHour != 0.192 || inst.State != cloud.InstanceRunning {
				t.Errorf("instance of %s: %+v", m.node, inst)
			}
		}
		node := nodeOf(ctx, t, env, scaleset[0])
		if g, err := p.NodeGroupForNode(ctx, node); err != nil || g.ID() != gSet.ID() {
			t.Errorf("group of the scaleset's node: %v, %v", g, err)
		}
		got, err := gSet.Nodes(ctx)
		if err != nil || len(got) != 1 || got[0].ID != node.Spec.ProviderID || got[0].NodeName != node.Name || got[0].State != cloud.InstanceRunning ||
			!got[0].Spot || got[0].InstanceType != "m5.large" || got[0].NodeGroup != gSet.ID() {
			t.Errorf("scaleset instances %+v, %v; want the one of node %s", got, err, node.Name)
		}
	})

	t.Run("IncreaseSize: instances with and without Machines", func(t *testing.T) {
		tmpl, err := gSpot.TemplateNode(ctx)
		if err != nil || tmpl.Status.Capacity.Cpu().String() != "4" || tmpl.Labels[lab.CapacityTypeLabel] != "spot" {
			t.Fatalf("template of the empty spot pool: %v, %v", tmpl, err)
		}
		if err := gSpot.IncreaseSize(ctx, 3); !errors.Is(err, cloud.ErrAboveMaxSize) {
			t.Errorf("3 more of max 2: %v, want ErrAboveMaxSize", err)
		}
		if err := gSpot.IncreaseSize(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if err := gSet.IncreaseSize(ctx, 1); err != nil {
			t.Fatal(err)
		}
		spotNode := waitPoolMachines(t, env, dyn, "spot", 1)[0].node
		scaleset = waitPoolNodes(t, env, dyn, "scaleset", 2)
		insts, err := p.Instances(ctx, []*corev1.Node{nodeOf(ctx, t, env, spotNode)})
		if err != nil {
			t.Fatal(err)
		}
		if inst := insts[spotNode]; !inst.Spot || inst.NodeGroup != gSpot.ID() || inst.State != cloud.InstanceRunning {
			t.Errorf("instance of the new spot node: %+v", inst)
		}
		// The new node of the scale set is found by its Node's name, as the
		// migrator waits for it to be Ready.
		testenv.Eventually(t, time.Minute, "both scaleset instances with their Nodes", func(ctx context.Context) (bool, string, error) {
			got, err := gSet.Nodes(ctx)
			if err != nil {
				return false, "", err
			}
			var names []string
			for _, inst := range got {
				names = append(names, inst.NodeName)
			}
			sort.Strings(names)
			return slices.Equal(names, scaleset), fmt.Sprintf("%+v", got), nil
		})
		if tmpl, err := gSet.TemplateNode(ctx); err != nil || tmpl.Status.Capacity.Cpu().String() != "2" || tmpl.Labels[lab.CapacityTypeLabel] != "spot" {
			t.Errorf("template copied from a scaleset node: %v, %v", tmpl, err)
		}
	})

	t.Run("DeleteNodes: refused without a Machine", func(t *testing.T) {
		node := nodeOf(ctx, t, env, scaleset[0])
		err := gSet.DeleteNodes(ctx, []*corev1.Node{node})
		var nd *clusterapi.NotDeletableError
		if !errors.As(err, &nd) || nd.Node != node.Name || nd.NodeGroup != gSet.ID() || !strings.Contains(err.Error(), "LabMachinePool capi-it/scaleset") {
			t.Errorf("deleting a node of a pool without Machines: %v, want a *NotDeletableError naming the LabMachinePool", err)
		}
		if err := p.DeleteInstance(ctx, node); !clusterapi.IsNotDeletable(err) {
			t.Errorf("DeleteInstance of a node of a pool without Machines: %v, want a *NotDeletableError", err)
		}
		if n, err := gSet.TargetSize(ctx); err != nil || n != 2 {
			t.Errorf("scaleset target %d, %v; want 2, untouched", n, err)
		}
		if err := gSet.DecreaseTargetSize(ctx, 1); !errors.Is(err, cloud.ErrNotUnfulfilled) {
			t.Errorf("cancelling 1 of a scaleset whose instances all exist: %v, want ErrNotUnfulfilled", err)
		}
		time.Sleep(time.Second)
		if got := waitPoolNodes(t, env, dyn, "scaleset", 2); !slices.Equal(got, scaleset) {
			t.Errorf("scaleset nodes %v after the refusals, want %v", got, scaleset)
		}
	})

	t.Run("DeleteNodes: the infrastructure removes exactly the marked Machine", func(t *testing.T) {
		chosen, kept := odMachines[1], odMachines[0]
		both := []*corev1.Node{nodeOf(ctx, t, env, chosen.node), nodeOf(ctx, t, env, kept.node)}
		if err := gOD.DeleteNodes(ctx, both); !errors.Is(err, cloud.ErrBelowMinSize) {
			t.Errorf("deleting both nodes of a pool of min 1: %v, want ErrBelowMinSize", err)
		}
		if err := gOD.DeleteNodes(ctx, []*corev1.Node{nodeOf(ctx, t, env, scaleset[0])}); !errors.Is(err, cloud.ErrNotInNodeGroup) {
			t.Errorf("deleting another pool's node: %v, want ErrNotInNodeGroup", err)
		}
		assertNoDeleteMark(ctx, t, dyn, kept.name)
		assertNoDeleteMark(ctx, t, dyn, chosen.name)
		// The newest goes when nothing is marked (the lab's policy): choose
		// the other one.
		if chosen.created.After(kept.created) {
			chosen, kept = kept, chosen
		}
		if err := p.DeleteInstance(ctx, nodeOf(ctx, t, env, chosen.node)); err != nil {
			t.Fatal(err)
		}
		if left := waitPoolMachines(t, env, dyn, "od", 1); left[0].name != kept.name {
			t.Errorf("the pool kept %v, want %v", left[0], kept)
		}
		waitNodeGone(t, env, chosen.node)
		if n, err := gOD.TargetSize(ctx); err != nil || n != 1 {
			t.Errorf("od target %d, %v; want 1", n, err)
		}
	})

	t.Run("DecreaseTargetSize cancels only a provisioning Machine", func(t *testing.T) {
		spotNode := waitPoolMachines(t, env, dyn, "spot", 1)[0].node
		release := holdSpotNodes(ctx, t, env)
		defer release()
		if err := gSpot.IncreaseSize(ctx, 1); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, time.Minute, "a spot Machine without a Node", func(ctx context.Context) (bool, string, error) {
			insts, err := gSpot.Nodes(ctx)
			if err != nil {
				return false, "", err
			}
			for _, inst := range insts {
				if inst.State == cloud.InstanceCreating && strings.HasPrefix(inst.ID, clusterapi.PendingIDPrefix) {
					return true, "", nil
				}
			}
			return false, fmt.Sprintf("%+v", insts), nil
		})
		if err := gSpot.DecreaseTargetSize(ctx, 2); !errors.Is(err, cloud.ErrNotUnfulfilled) {
			t.Errorf("cancelling 2 with 1 unfulfilled: %v, want ErrNotUnfulfilled", err)
		}
		if err := gSpot.DecreaseTargetSize(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if left := waitPoolMachines(t, env, dyn, "spot", 1); left[0].node != spotNode {
			t.Errorf("spot Machines after the cancel %v, want the one of node %s", left, spotNode)
		}
		if n, err := gSpot.TargetSize(ctx); err != nil || n != 1 {
			t.Errorf("spot target %d, %v; want 1", n, err)
		}
	})
}

// poolMachine is a Machine of a MachinePool and its Node.
type poolMachine struct {
	name, node string
	created    time.Time
}

// waitPoolMachines waits until a MachinePool has exactly n Machines, made by
// Cluster API's MachinePool controller, none being deleted, each with a Ready
// Node, and returns them.
func waitPoolMachines(t *testing.T, env *testenv.Env, dyn dynamic.Interface, mp string, n int) []poolMachine {
	t.Helper()
	var out []poolMachine
	testenv.Eventually(t, 2*time.Minute, fmt.Sprintf("%d Machines of MachinePool %s with Ready Nodes", n, mp), func(ctx context.Context) (bool, string, error) {
		list, err := dyn.Resource(capiinfra.MachinesGVR).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: capiinfra.MachinePoolNameLabel + "=" + mp})
		if err != nil {
			return false, "", err
		}
		out = nil
		var status []string
		for _, m := range list.Items {
			node, _, _ := unstructured.NestedString(m.Object, "status", "nodeRef", "name")
			status = append(status, fmt.Sprintf("%s node=%q deleting=%t", m.GetName(), node, m.GetDeletionTimestamp() != nil))
			owned := false
			for _, ref := range m.GetOwnerReferences() {
				owned = owned || (ref.Kind == "MachinePool" && ref.Name == mp && ref.Controller != nil && *ref.Controller)
			}
			if node == "" || m.GetDeletionTimestamp() != nil || !owned {
				continue
			}
			nd, err := env.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			if err != nil || !ready(nd) {
				continue
			}
			out = append(out, poolMachine{name: m.GetName(), node: node, created: m.GetCreationTimestamp().Time})
		}
		return len(list.Items) == n && len(out) == n, fmt.Sprintf("%v", status), nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// waitPoolNodes waits until a MachinePool without Machines lists exactly n
// instances (spec.providerIDList) and Cluster API has matched each to a Ready
// Node (status.nodeRefs), and returns the Nodes' names.
func waitPoolNodes(t *testing.T, env *testenv.Env, dyn dynamic.Interface, mp string, n int) []string {
	t.Helper()
	var out []string
	testenv.Eventually(t, 2*time.Minute, fmt.Sprintf("%d Nodes of MachinePool %s", n, mp), func(ctx context.Context) (bool, string, error) {
		obj, err := dyn.Resource(capiinfra.MachinePoolsGVR).Namespace(ns).Get(ctx, mp, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		ids, _, _ := unstructured.NestedStringSlice(obj.Object, "spec", "providerIDList")
		refs, _, _ := unstructured.NestedSlice(obj.Object, "status", "nodeRefs")
		out = nil
		for _, r := range refs {
			name, _ := r.(map[string]any)["name"].(string)
			nd, err := env.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err == nil && ready(nd) && slices.Contains(ids, nd.Spec.ProviderID) {
				out = append(out, name)
			}
		}
		return len(ids) == n && len(out) == n, fmt.Sprintf("providerIDList %v, nodeRefs %v", ids, refs), nil
	})
	sort.Strings(out)
	return out
}
