package capiinfra_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"spotter.dev/spotter/internal/lab"
	"spotter.dev/spotter/internal/lab/capiinfra"
	"spotter.dev/spotter/internal/testenv"
)

// TestClusterAPIScalesAMachineDeployment runs real Cluster API in the lab: a
// MachineDeployment on lab infrastructure gets its Machines from Cluster API's
// own MachineSet controller, each Machine a kwok Node that Cluster API finds by
// providerID; scaling through the scale subresource (as the cluster autoscaler
// does) makes Cluster API create and delete Machines, and their Nodes come and
// go with them.
func TestClusterAPIScalesAMachineDeployment(t *testing.T) {
	env := testenv.StartLab(t)
	testenv.StartClusterAPI(t, env)
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testenv.Context(t, 5*time.Minute)
	const ns, clusterName, mdName = "capi-lab", "lab", "spot-workers"
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	cluster, labCluster, labControlPlane := capiinfra.NewCluster(ns, clusterName)
	template := capiinfra.NewMachineTemplate(ns, "spot", capiinfra.MachineSpec{
		Spot: true, MaxPrice: "0.05", InstanceType: "m5.large", Zone: "zone-b", CPU: "4", Memory: "16Gi",
		NodeLabels: map[string]string{"spotter.dev/test": "capi"},
	})
	md := capiinfra.NewMachineDeployment(ns, mdName, clusterName, "spot", 2)
	for _, o := range []struct {
		gvr schema.GroupVersionResource
		obj *unstructured.Unstructured
	}{
		{capiinfra.LabClustersGVR, labCluster},
		{capiinfra.LabControlPlanesGVR, labControlPlane},
		{capiinfra.ClustersGVR, cluster},
		{capiinfra.LabMachineTemplatesGVR, template},
		{capiinfra.MachineDeploymentsGVR, md},
	} {
		if _, err := dyn.Resource(o.gvr).Namespace(ns).Create(ctx, o.obj, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating %s %s: %v", o.obj.GetKind(), o.obj.GetName(), err)
		}
	}

	first := waitForMachines(t, env, dyn, ns, mdName, 2)
	for _, m := range first {
		node, err := env.Client.CoreV1().Nodes().Get(ctx, m.node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// Labels from the template's spot marker and its nodeLabels; the
		// interruptible label and the machine annotation are Cluster API's.
		for k, v := range map[string]string{
			lab.CapacityTypeLabel: "spot", lab.InstanceTypeLabel: "m5.large", lab.ZoneLabel: "zone-b",
			"spotter.dev/test": "capi", capiinfra.InterruptibleLabel: "",
		} {
			if got, ok := node.Labels[k]; !ok || got != v {
				t.Errorf("node %s: label %s=%q (present %t), want %q", node.Name, k, got, ok, v)
			}
		}
		if got := node.Annotations["cluster.x-k8s.io/machine"]; got != m.name {
			t.Errorf("node %s: annotation cluster.x-k8s.io/machine=%q, want %q (Cluster API syncs it)", node.Name, got, m.name)
		}
		if got := node.Status.Allocatable.Cpu().String(); got != "4" {
			t.Errorf("node %s: allocatable cpu %s, want 4", node.Name, got)
		}
	}
	c, err := dyn.Resource(capiinfra.ClustersGVR).Namespace(ns).Get(ctx, clusterName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cond := range []string{"InfrastructureReady", "ControlPlaneInitialized", "ControlPlaneAvailable"} {
		if s := conditionStatus(c, cond); s != "True" {
			t.Errorf("Cluster %s=%q, want True", cond, s)
		}
	}

	scale(t, dyn, ns, mdName, 3)
	second := waitForMachines(t, env, dyn, ns, mdName, 3)
	if kept := common(first, second); len(kept) != 2 {
		t.Errorf("scaling up replaced Machines: before %v, after %v", first, second)
	}

	scale(t, dyn, ns, mdName, 1)
	third := waitForMachines(t, env, dyn, ns, mdName, 1)
	for _, m := range second {
		if len(common([]machine{m}, third)) == 1 {
			continue
		}
		testenv.Eventually(t, time.Minute, "node "+m.node+" deleted", func(ctx context.Context) (bool, string, error) {
			_, err := env.Client.CoreV1().Nodes().Get(ctx, m.node, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return true, "", nil
			}
			return false, "still there", err
		})
	}
	// Cluster API drained the Nodes of the Machines it deleted (it does only
	// when the control plane has Machines or is externally managed).
	testenv.Eventually(t, time.Minute, "drain events of the deleted Machines", func(ctx context.Context) (bool, string, error) {
		events, err := env.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=SuccessfulDrainNode"})
		if err != nil {
			return false, "", err
		}
		drained := map[string]bool{}
		for _, e := range events.Items {
			drained[e.InvolvedObject.Name] = true
		}
		var missing []string
		for _, m := range second {
			if len(common([]machine{m}, third)) == 0 && !drained[m.name] {
				missing = append(missing, m.name)
			}
		}
		return len(missing) == 0, fmt.Sprintf("not drained: %v", missing), nil
	})
	testenv.Eventually(t, time.Minute, "one LabMachine left", func(ctx context.Context) (bool, string, error) {
		list, err := dyn.Resource(capiinfra.LabMachinesGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		return len(list.Items) == 1, fmt.Sprintf("%d LabMachines", len(list.Items)), nil
	})
}

// machine is a Machine of the MachineDeployment and the Node Cluster API
// matched to it.
type machine struct{ name, node string }

func (m machine) String() string { return m.name + "/" + m.node }

// waitForMachines waits until the MachineDeployment has exactly n Machines, all
// created by Cluster API (owned by its MachineSet), not being deleted, each with
// a nodeRef to a Ready kwok Node whose providerID is the Machine's, and no other
// Nodes of lab Machines exist; and until its status counts n replicas.
func waitForMachines(t *testing.T, env *testenv.Env, dyn dynamic.Interface, ns, md string, n int) []machine {
	t.Helper()
	var out []machine
	testenv.Eventually(t, 2*time.Minute, fmt.Sprintf("%d Machines of %s with Ready Nodes", n, md), func(ctx context.Context) (bool, string, error) {
		list, err := dyn.Resource(capiinfra.MachinesGVR).Namespace(ns).List(ctx, metav1.ListOptions{
			LabelSelector: capiinfra.MachineDeploymentNameLabel + "=" + md,
		})
		if err != nil {
			return false, "", err
		}
		out = nil
		var status []string
		ready := 0
		for _, m := range list.Items {
			node, _, _ := unstructured.NestedString(m.Object, "status", "nodeRef", "name")
			providerID, _, _ := unstructured.NestedString(m.Object, "spec", "providerID")
			phase, _, _ := unstructured.NestedString(m.Object, "status", "phase")
			status = append(status, fmt.Sprintf("%s phase=%s node=%q", m.GetName(), phase, node))
			if !m.GetDeletionTimestamp().IsZero() || !ownedByMachineSet(&m) || node == "" {
				continue
			}
			nd, err := env.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			if nd.Spec.ProviderID != providerID || !nodeReady(nd) {
				continue
			}
			ready++
			out = append(out, machine{name: m.GetName(), node: node})
		}
		nodes, err := env.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		labNodes := 0
		for _, nd := range nodes.Items {
			if strings.HasPrefix(nd.Spec.ProviderID, capiinfra.ProviderIDPrefix) {
				labNodes++
			}
		}
		d, err := dyn.Resource(capiinfra.MachineDeploymentsGVR).Namespace(ns).Get(ctx, md, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		replicas, _, _ := unstructured.NestedInt64(d.Object, "status", "replicas")
		sort.Strings(status)
		return len(list.Items) == n && ready == n && labNodes == n && replicas == int64(n),
			fmt.Sprintf("%d Machines %v, %d lab Nodes, status.replicas %d", len(list.Items), status, labNodes, replicas), nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// scale sets the MachineDeployment's replicas through its scale subresource.
func scale(t *testing.T, dyn dynamic.Interface, ns, md string, replicas int64) {
	t.Helper()
	ctx := testenv.Context(t, 30*time.Second)
	res := dyn.Resource(capiinfra.MachineDeploymentsGVR).Namespace(ns)
	s, err := res.Get(ctx, md, metav1.GetOptions{}, "scale")
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(s.Object, replicas, "spec", "replicas"); err != nil {
		t.Fatal(err)
	}
	if _, err := res.Update(ctx, s, metav1.UpdateOptions{}, "scale"); err != nil {
		t.Fatalf("scaling %s to %d: %v", md, replicas, err)
	}
}

func ownedByMachineSet(m *unstructured.Unstructured) bool {
	for _, ref := range m.GetOwnerReferences() {
		if ref.Kind == "MachineSet" && ref.Controller != nil && *ref.Controller {
			return true
		}
	}
	return false
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func conditionStatus(obj *unstructured.Unstructured, typ string) string {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		if c, _ := c.(map[string]any); c["type"] == typ {
			s, _ := c["status"].(string)
			return s
		}
	}
	return ""
}

// common returns the machines of a also in b.
func common(a, b []machine) []machine {
	var out []machine
	for _, x := range a {
		for _, y := range b {
			if x == y {
				out = append(out, x)
			}
		}
	}
	return out
}
