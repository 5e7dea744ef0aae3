package clusterapi_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"spotter.dev/spotter/internal/cloud"
	"spotter.dev/spotter/internal/cloud/clusterapi"
	"spotter.dev/spotter/internal/lab/capiinfra"
	"spotter.dev/spotter/internal/testenv"
)

// v1beta1 is Cluster API's older API version.
var v1beta1 = schema.GroupVersion{Group: "cluster.x-k8s.io", Version: "v1beta1"}

// A management cluster of a Cluster API release before v1.11 serves
// cluster.x-k8s.io/v1beta1 alone (the CRDs of v1.10, with a real apiserver;
// the objects are written as Cluster API would, no controller runs): the
// provider finds the node groups, reads sizes, spot-ness and instances,
// resizes through the scale subresource, deletes a node by its Machine, copies
// a live node for the template, and refuses a v1beta1 KubeadmControlPlane on
// spot, all at v1beta1.
func TestClusterAPIV1Beta1(t *testing.T) {
	env := testenv.StartAPIServer(t)
	testenv.InstallClusterAPIV1Beta1CRDs(t, env)
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testenv.Context(t, 3*time.Minute)
	const ns = "capi-v1beta1"
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "machinedeployments"}).
		Namespace(ns).List(ctx, metav1.ListOptions{}); err == nil {
		t.Fatal("the management cluster serves v1beta2: the test would not show v1beta1 at work")
	}
	res := func(resource string) dynamic.ResourceInterface {
		return dyn.Resource(v1beta1.WithResource(resource)).Namespace(ns)
	}
	create := func(resource string, obj *unstructured.Unstructured, status map[string]any) *unstructured.Unstructured {
		t.Helper()
		got, err := res(resource).Create(ctx, obj, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("creating %s %s: %v", resource, obj.GetName(), err)
		}
		if status != nil {
			got.Object["status"] = status
			if got, err = res(resource).UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
				t.Fatalf("status of %s %s: %v", resource, obj.GetName(), err)
			}
		}
		return got
	}
	object := func(kind, name string, spec map[string]any) *unstructured.Unstructured {
		o := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
		o.SetGroupVersionKind(v1beta1.WithKind(kind))
		o.SetNamespace(ns)
		o.SetName(name)
		o.SetLabels(map[string]string{capiinfra.ClusterNameLabel: "old"})
		return o
	}
	ownedBy := func(o, owner *unstructured.Unstructured) {
		o.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: owner.GetAPIVersion(), Kind: owner.GetKind(), Name: owner.GetName(), UID: owner.GetUID(), Controller: ptr.To(true)}})
	}

	// The spot template is the lab's infrastructure kind; its reference in
	// v1beta1's shape: apiVersion, not apiGroup.
	if _, err := dyn.Resource(capiinfra.LabMachineTemplatesGVR).Namespace(ns).Create(ctx,
		capiinfra.NewMachineTemplate(ns, "spot", capiinfra.MachineSpec{Spot: true, InstanceType: "m5.xlarge", CPU: "4", Memory: "16Gi"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	infraRef := map[string]any{"apiVersion": capiinfra.GroupVersion.String(), "kind": capiinfra.KindMachineTemplate, "name": "spot"}
	selector := map[string]any{capiinfra.ClusterNameLabel: "old", capiinfra.MachineDeploymentNameLabel: "spot"}
	template := map[string]any{
		"metadata": map[string]any{"labels": selector},
		"spec":     map[string]any{"clusterName": "old", "bootstrap": map[string]any{"dataSecretName": "boot"}, "infrastructureRef": infraRef},
	}
	md := object("MachineDeployment", "spot", map[string]any{"clusterName": "old", "replicas": int64(2),
		"selector": map[string]any{"matchLabels": selector}, "template": template})
	md.SetAnnotations(map[string]string{clusterapi.MinSizeAnnotation: "1", clusterapi.MaxSizeAnnotation: "5"})
	md = create("machinedeployments", md, nil)
	ms := object("MachineSet", "spot-abc", map[string]any{"clusterName": "old", "replicas": int64(2),
		"selector": map[string]any{"matchLabels": selector}, "template": template})
	ownedBy(ms, md)
	ms = create("machinesets", ms, nil)
	var nodes []*corev1.Node
	for i := range 2 {
		name := fmt.Sprint("spot-node-", i)
		providerID := fmt.Sprint("lab://old/", name)
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name, "pool": "spot"}},
			Spec: corev1.NodeSpec{ProviderID: providerID}}
		node, err := env.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		node.Status = corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			Capacity: corev1.ResourceList{"cpu": resource.MustParse("4"), "memory": resource.MustParse("16Gi"), "pods": resource.MustParse("110")}}
		node.Status.Allocatable = node.Status.Capacity.DeepCopy()
		if node, err = env.Client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, node)
		m := object("Machine", fmt.Sprint("spot-m", i), map[string]any{"clusterName": "old", "providerID": providerID,
			"bootstrap": map[string]any{"dataSecretName": "boot"}, "infrastructureRef": infraRef})
		m.SetLabels(map[string]string{capiinfra.ClusterNameLabel: "old", capiinfra.MachineDeploymentNameLabel: "spot"})
		ownedBy(m, ms)
		// v1beta1's nodeRef is a full object reference.
		create("machines", m, map[string]any{"phase": "Running", "nodeRef": map[string]any{"apiVersion": "v1", "kind": "Node", "name": name}})
	}

	p, err := clusterapi.New(env.Config, env.Client, clock.RealClock{}, clusterapi.Options{})
	if err != nil {
		t.Fatal(err)
	}
	groups, err := p.NodeGroups(ctx)
	if err != nil || len(groups) != 1 {
		t.Fatalf("node groups %v, %v; want the MachineDeployment", groups, err)
	}
	g := groups[0]
	if !g.Spot() || g.MinSize() != 1 || g.MaxSize() != 5 {
		t.Errorf("group %s: spot %v, min %d, max %d; want spot, 1 to 5", g.ID(), g.Spot(), g.MinSize(), g.MaxSize())
	}
	if n, err := g.TargetSize(ctx); err != nil || n != 2 {
		t.Errorf("target size %d, %v; want 2", n, err)
	}
	insts, err := p.Instances(ctx, nodes)
	if err != nil || len(insts) != 2 || insts[nodes[0].Name].NodeGroup != g.ID() {
		t.Errorf("instances %v, %v; want both nodes in %s", insts, err, g.ID())
	}
	if got, err := p.NodeGroupForNode(ctx, nodes[1]); err != nil || got.ID() != g.ID() {
		t.Errorf("group of %s: %v, %v", nodes[1].Name, got, err)
	}
	if tmpl, err := g.TemplateNode(ctx); err != nil || tmpl.Labels["pool"] != "spot" || tmpl.Status.Capacity.Cpu().String() != "4" {
		t.Errorf("template %v, %v; want a copy of a live node", tmpl, err)
	}
	replicas := func() int64 {
		t.Helper()
		got, err := res("machinedeployments").Get(ctx, "spot", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n, _, _ := unstructured.NestedInt64(got.Object, "spec", "replicas")
		return n
	}
	if err := g.IncreaseSize(ctx, 1); err != nil || replicas() != 3 {
		t.Errorf("IncreaseSize(1): %v, replicas %d; want 3", err, replicas())
	}
	// The third Machine does not exist yet: cancel it, then delete a node.
	if err := g.DecreaseTargetSize(ctx, 1); err != nil || replicas() != 2 {
		t.Errorf("DecreaseTargetSize(1): %v, replicas %d; want 2", err, replicas())
	}
	if err := g.DeleteNodes(ctx, nodes[:1]); err != nil || replicas() != 1 {
		t.Fatalf("DeleteNodes: %v, replicas %d; want 1", err, replicas())
	}
	m, err := res("machines").Get(ctx, "spot-m0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m.GetAnnotations()[clusterapi.DeleteMachineAnnotation]; !ok {
		t.Errorf("Machine spot-m0 not marked %s: %v", clusterapi.DeleteMachineAnnotation, m.GetAnnotations())
	}
	if err := g.DeleteNodes(ctx, nodes[1:]); !errors.Is(err, cloud.ErrBelowMinSize) {
		t.Errorf("deleting below the minimum: %v, want ErrBelowMinSize", err)
	}

	// A v1beta1 KubeadmControlPlane (machineTemplate.infrastructureRef) on
	// the spot template is refused.
	kcp := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"version": "v1.30.0", "replicas": int64(3), "kubeadmConfigSpec": map[string]any{},
		"machineTemplate": map[string]any{"infrastructureRef": infraRef},
	}}}
	kcp.SetGroupVersionKind(schema.GroupVersionKind{Group: "controlplane.cluster.x-k8s.io", Version: "v1beta1", Kind: clusterapi.KindKubeadmControlPlane})
	kcp.SetNamespace(ns)
	kcp.SetName("cp")
	kcp.SetLabels(map[string]string{capiinfra.ClusterNameLabel: "old"})
	if _, err := dyn.Resource(schema.GroupVersionResource{Group: "controlplane.cluster.x-k8s.io", Version: "v1beta1", Resource: "kubeadmcontrolplanes"}).
		Namespace(ns).Create(ctx, kcp, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A new provider: the first one's read serves for its TTL.
	p2, err := clusterapi.New(env.Config, env.Client, clock.RealClock{}, clusterapi.Options{})
	if err != nil {
		t.Fatal(err)
	}
	refused, err := p2.SpotControlPlanes(context.Background())
	if err != nil || len(refused) != 1 || !strings.Contains(refused[0].Name, "cp") {
		t.Errorf("spot control planes %v, %v; want cp refused", refused, err)
	}
}
