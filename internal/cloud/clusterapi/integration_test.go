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

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"spotter.dev/spotter/internal/cloud"
	"spotter.dev/spotter/internal/cloud/clusterapi"
	cloudmetrics "spotter.dev/spotter/internal/cloud/metrics"
	"spotter.dev/spotter/internal/lab"
	"spotter.dev/spotter/internal/lab/capiinfra"
	"spotter.dev/spotter/internal/testenv"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

const ns, clusterName = "capi-it", "lab"

// TestAgainstClusterAPI runs the provider against real Cluster API
// controllers in the lab (the lab's infrastructure provider makes each Machine
// a kwok Node): node groups come from annotations, spot-ness from the
// infrastructure template, and every size change is carried out by Cluster
// API itself. The steps share one Cluster and run in order.
func TestAgainstClusterAPI(t *testing.T) {
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
	od := capiinfra.NewMachineTemplate(ns, "od", capiinfra.MachineSpec{InstanceType: "m5.xlarge", Zone: "zone-a", CPU: "4", Memory: "16Gi"})
	spot := capiinfra.NewMachineTemplate(ns, "spot", capiinfra.MachineSpec{Spot: true, InstanceType: "m5.xlarge", Zone: "zone-b", CPU: "4", Memory: "16Gi"})
	group := func(name, template string, replicas int32, annotations map[string]string) *unstructured.Unstructured {
		md := capiinfra.NewMachineDeployment(ns, name, clusterName, template, replicas)
		md.SetAnnotations(annotations)
		return md
	}
	sizes := func(min, max string, more ...string) map[string]string {
		a := map[string]string{clusterapi.MinSizeAnnotation: min, clusterapi.MaxSizeAnnotation: max}
		for i := 0; i+1 < len(more); i += 2 {
			a[more[i]] = more[i+1]
		}
		return a
	}
	controlPlane := group("cp", "od", 0, sizes("0", "3"))
	_ = unstructured.SetNestedField(controlPlane.Object, "", "spec", "template", "metadata", "labels", clusterapi.ControlPlaneLabel)
	create(ctx, t, dyn,
		labCluster, labControlPlane, cluster, od, spot,
		group("od", "od", 2, sizes("1", "3")),
		group("spot", "spot", 0, sizes("0", "2",
			clusterapi.CapacityCPUAnnotation, "4", clusterapi.CapacityMemoryAnnotation, "16Gi",
			clusterapi.CapacityLabelsAnnotation, "spotter.dev/pool=spot", clusterapi.CapacityTaintsAnnotation, "spotter.dev/pool=spot:PreferNoSchedule")),
		group("bare", "spot", 0, sizes("0", "1")),
		group("half", "od", 0, map[string]string{clusterapi.MinSizeAnnotation: "0"}),
		group("plain", "od", 1, nil),
		controlPlane,
	)

	p, err := clusterapi.New(env.Config, env.Client, clock.RealClock{}, clusterapi.Options{ClusterName: clusterName, Namespace: ns, TTL: 500 * time.Millisecond,
		Pricing: v1alpha1.PricingConfig{InstanceTypes: map[string]v1alpha1.InstancePrice{"m5.xlarge": {OnDemand: 0.192, Spot: 0.07}}}})
	if err != nil {
		t.Fatal(err)
	}
	odMachines := waitMachines(t, env, dyn, "od", 2)
	waitMachines(t, env, dyn, "plain", 1)

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
	// Only groups with both size annotations, never the control plane.
	if want := []string{"MachineDeployment/capi-it/bare", "MachineDeployment/capi-it/od", "MachineDeployment/capi-it/spot"}; !slices.Equal(ids, want) {
		t.Fatalf("node groups %v, want %v", ids, want)
	}
	gOD, gSpot, gBare := byID["MachineDeployment/capi-it/od"], byID["MachineDeployment/capi-it/spot"], byID["MachineDeployment/capi-it/bare"]
	if gOD.Spot() || !gSpot.Spot() || !gBare.Spot() {
		t.Errorf("spot from the templates: od %t, spot %t, bare %t; want false, true, true", gOD.Spot(), gSpot.Spot(), gBare.Spot())
	}
	if gOD.MinSize() != 1 || gOD.MaxSize() != 3 || gSpot.MinSize() != 0 || gSpot.MaxSize() != 2 {
		t.Errorf("sizes od %d..%d spot %d..%d", gOD.MinSize(), gOD.MaxSize(), gSpot.MinSize(), gSpot.MaxSize())
	}
	if price, ok := gSpot.PricePerHour(); !ok || price != 0.07 {
		t.Errorf("spot price %v %t, want 0.07", price, ok)
	}

	t.Run("instances, batched, only of node groups", func(t *testing.T) {
		nodes := allNodes(ctx, t, env)
		insts, err := p.Instances(ctx, nodes)
		if err != nil {
			t.Fatal(err)
		}
		if len(insts) != 2 {
			t.Errorf("instances %v, want the two od nodes only (plain is no node group)", insts)
		}
		for _, m := range odMachines {
			inst, ok := insts[m.node]
			if !ok || inst.NodeGroup != gOD.ID() || inst.Spot || inst.InstanceType != "m5.xlarge" || !inst.PriceKnown || inst.PricePerHour != 0.192 {
				t.Errorf("instance of %s: %+v", m.node, inst)
			}
		}
		plain := nodeOf(ctx, t, env, waitMachines(t, env, dyn, "plain", 1)[0].node)
		if _, err := p.NodeGroupForNode(ctx, plain); !cloud.IsNotFound(err) {
			t.Errorf("group of a node of an unannotated MachineDeployment: %v, want not found", err)
		}
		if err := p.DeleteInstance(ctx, plain); err == nil || cloud.IsNotFound(err) {
			t.Errorf("deleting a node outside every node group: %v, want a refusal that is not 'not found'", err)
		}
		stray := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "stray"}, Spec: corev1.NodeSpec{ProviderID: "lab://nowhere/stray"}}
		if err := p.DeleteInstance(ctx, stray); !cloud.IsNotFound(err) {
			t.Errorf("deleting a node without a Machine: %v, want not found", err)
		}
	})

	t.Run("template nodes", func(t *testing.T) {
		tmpl, err := gSpot.TemplateNode(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if tmpl.Status.Capacity.Cpu().String() != "4" || tmpl.Status.Allocatable.Memory().String() != "16Gi" || tmpl.Status.Capacity.Pods().String() != "110" {
			t.Errorf("capacity %v", tmpl.Status.Capacity)
		}
		for k, v := range map[string]string{lab.CapacityTypeLabel: "spot", clusterapi.InterruptibleLabel: "", "spotter.dev/pool": "spot", lab.InstanceTypeLabel: "m5.xlarge"} {
			if got, ok := tmpl.Labels[k]; !ok || got != v {
				t.Errorf("template label %s=%q (%t), want %q", k, got, ok, v)
			}
		}
		if len(tmpl.Spec.Taints) != 1 || tmpl.Spec.Taints[0].Effect != corev1.TaintEffectPreferNoSchedule {
			t.Errorf("taints %v", tmpl.Spec.Taints)
		}
		if err := cloud.ValidateNodeGroup(ctx, gSpot); err != nil {
			t.Error(err)
		}
		_, err = gBare.TemplateNode(ctx)
		if err == nil || !strings.Contains(err.Error(), clusterapi.CapacityCPUAnnotation) || !strings.Contains(err.Error(), clusterapi.CapacityMemoryAnnotation) {
			t.Errorf("template of a group of size 0 without capacity: %v, want an error naming the annotations to add", err)
		}
		live, err := gOD.TemplateNode(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if live.Labels[lab.CapacityTypeLabel] != "on-demand" || live.Labels[lab.ZoneLabel] != "zone-a" || live.Status.Capacity.Cpu().String() != "4" || live.Spec.ProviderID != "" {
			t.Errorf("template copied from a live node: labels %v capacity %v", live.Labels, live.Status.Capacity)
		}
	})

	t.Run("a KubeadmControlPlane on spot is refused, with a Warning Event", func(t *testing.T) {
		kcp := func(name, cluster, template string) *unstructured.Unstructured {
			o := &unstructured.Unstructured{}
			o.SetGroupVersionKind(clusterapi.ControlPlaneGroupVersion.WithKind(clusterapi.KindKubeadmControlPlane))
			o.SetNamespace(ns)
			o.SetName(name)
			o.SetLabels(map[string]string{clusterapi.ClusterNameLabel: cluster})
			o.Object["spec"] = map[string]any{
				"version": "v1.34.0", "replicas": int64(3),
				"machineTemplate": map[string]any{"spec": map[string]any{
					"infrastructureRef": map[string]any{"apiGroup": capiinfra.Group, "kind": capiinfra.KindMachineTemplate, "name": template},
				}},
			}
			return o
		}
		// The real CRD (hack/capi-bin.sh copies it beside the core's); no
		// controller serves it in the lab, and none is needed to read it.
		create(ctx, t, dyn, kcp("cp-spot", clusterName, "spot"), kcp("cp-od", clusterName, "od"), kcp("cp-other", "other", "spot"))

		withEvents, err := clusterapi.New(env.Config, env.Client, clock.RealClock{}, clusterapi.Options{ClusterName: clusterName, Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		if err := withEvents.RecordEvents(ctx, "spotter-test"); err != nil {
			t.Fatal(err)
		}
		// Through the metrics decorator, as the controller wires it.
		decorated := cloudmetrics.Decorate(withEvents)
		refusedControlPlanes := func() []string {
			t.Helper()
			_, refused, err := cloud.UsableNodeGroups(ctx, decorated)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, r := range refused {
				var cp *cloud.ControlPlaneError
				if errors.As(r, &cp) && cp.Kind == cloud.KindControlPlane {
					out = append(out, cp.Name)
					if !strings.Contains(cp.Reason, "spec.template.spec.spotMarketOptions") {
						t.Errorf("reason %q names no spot field", cp.Reason)
					}
				}
			}
			return out
		}
		if got, want := refusedControlPlanes(), []string{"KubeadmControlPlane/capi-it/cp-spot"}; !slices.Equal(got, want) {
			t.Errorf("refused control planes %v, want %v (on-demand and other clusters' left alone)", got, want)
		}
		var events *eventsv1.EventList
		testenv.Eventually(t, 30*time.Second, "a Warning Event on KubeadmControlPlane cp-spot", func(ctx context.Context) (bool, string, error) {
			events, err = env.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=" + clusterapi.ReasonControlPlaneOnSpot})
			if err != nil {
				return false, "", err
			}
			return len(events.Items) > 0, fmt.Sprintf("%d Events", len(events.Items)), nil
		})
		e := events.Items[0]
		if len(events.Items) != 1 || e.Type != corev1.EventTypeWarning || e.Regarding.Kind != clusterapi.KindKubeadmControlPlane || e.Regarding.Name != "cp-spot" ||
			e.Regarding.APIVersion != clusterapi.ControlPlaneGroupVersion.String() || !strings.Contains(e.Note, "LabMachineTemplate capi-it/spot") {
			t.Errorf("Events %+v", events.Items)
		}
		// Asked again (every migrator run asks), the Event is not recorded again.
		refusedControlPlanes()
		time.Sleep(time.Second)
		if again, err := env.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=" + clusterapi.ReasonControlPlaneOnSpot}); err != nil ||
			len(again.Items) != 1 || again.Items[0].Series != nil {
			t.Errorf("Events after a second check: %v, %+v", err, again)
		}
		// The provider without RecordEvents (spotter plan's) refuses, records nothing.
		if cps, err := p.SpotControlPlanes(ctx); err != nil || len(cps) != 1 {
			t.Errorf("SpotControlPlanes without Events: %v, %v", cps, err)
		}
	})

	var spotNode string
	t.Run("IncreaseSize: Cluster API makes a Machine that becomes a Node", func(t *testing.T) {
		if err := gSpot.IncreaseSize(ctx, 3); !errors.Is(err, cloud.ErrAboveMaxSize) {
			t.Errorf("3 more of max 2: %v, want ErrAboveMaxSize", err)
		}
		if err := gSpot.IncreaseSize(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if n, err := gSpot.TargetSize(ctx); err != nil || n != 1 {
			t.Errorf("target %d, %v; want 1", n, err)
		}
		spotNode = waitMachines(t, env, dyn, "spot", 1)[0].node
		node := nodeOf(ctx, t, env, spotNode)
		insts, err := p.Instances(ctx, []*corev1.Node{node})
		if err != nil {
			t.Fatal(err)
		}
		if inst := insts[spotNode]; !inst.Spot || inst.NodeGroup != gSpot.ID() || inst.State != cloud.InstanceRunning {
			t.Errorf("instance of the new node: %+v", inst)
		}
		got, err := p.NodeGroupForNode(ctx, node)
		if err != nil || got.ID() != gSpot.ID() {
			t.Errorf("group of the new node: %v, %v", got, err)
		}
	})

	t.Run("DeleteNodes: Cluster API deletes exactly the chosen Machine", func(t *testing.T) {
		chosen, kept := odMachines[1], odMachines[0]
		if err := gOD.DeleteNodes(ctx, []*corev1.Node{nodeOf(ctx, t, env, spotNode)}); !errors.Is(err, cloud.ErrNotInNodeGroup) {
			t.Errorf("deleting another group's node: %v, want ErrNotInNodeGroup", err)
		}
		both := []*corev1.Node{nodeOf(ctx, t, env, chosen.node), nodeOf(ctx, t, env, kept.node)}
		if err := gOD.DeleteNodes(ctx, both); !errors.Is(err, cloud.ErrBelowMinSize) {
			t.Errorf("deleting both nodes of a group of min 1: %v, want ErrBelowMinSize", err)
		}
		assertNoDeleteMark(ctx, t, dyn, kept.name)
		assertNoDeleteMark(ctx, t, dyn, chosen.name)
		if err := gOD.DeleteNodes(ctx, both[:1]); err != nil {
			t.Fatal(err)
		}
		left := waitMachines(t, env, dyn, "od", 1)
		if left[0] != kept {
			t.Errorf("Cluster API kept %v, want %v", left[0], kept)
		}
		waitNodeGone(t, env, chosen.node)
		if err := p.DeleteInstance(ctx, nodeOf(ctx, t, env, kept.node)); !errors.Is(err, cloud.ErrBelowMinSize) {
			t.Errorf("deleting the last node of a group of min 1: %v, want ErrBelowMinSize", err)
		}
		assertNoDeleteMark(ctx, t, dyn, kept.name)
	})

	t.Run("DecreaseTargetSize cancels only a provisioning Machine", func(t *testing.T) {
		release := holdSpotNodes(ctx, t, env)
		if err := gSpot.IncreaseSize(ctx, 1); err != nil {
			t.Fatal(err)
		}
		var pending string
		testenv.Eventually(t, time.Minute, "a spot Machine without a Node", func(ctx context.Context) (bool, string, error) {
			insts, err := gSpot.Nodes(ctx)
			if err != nil {
				return false, "", err
			}
			pending = ""
			for _, inst := range insts {
				if inst.State == cloud.InstanceCreating && strings.HasPrefix(inst.ID, clusterapi.PendingIDPrefix) {
					pending = strings.TrimPrefix(inst.ID, clusterapi.PendingIDPrefix+ns+"/")
				}
			}
			return pending != "", fmt.Sprintf("%+v", insts), nil
		})
		time.Sleep(2 * time.Second) // the hold is the lab provider's retries, not a slow start
		if m := machines(ctx, t, dyn, "spot"); len(m) != 2 {
			t.Fatalf("spot Machines %v, want the registered one and the held one", m)
		}
		if err := gSpot.DecreaseTargetSize(ctx, 2); !errors.Is(err, cloud.ErrNotUnfulfilled) {
			t.Errorf("cancelling 2 with 1 unfulfilled: %v, want ErrNotUnfulfilled", err)
		}
		if err := gSpot.DecreaseTargetSize(ctx, 1); err != nil {
			t.Fatal(err)
		}
		left := waitMachines(t, env, dyn, "spot", 1)
		if left[0].node != spotNode {
			t.Errorf("spot Machines after the cancel %v, want the one of node %s", left, spotNode)
		}
		release()
		if n, err := gSpot.TargetSize(ctx); err != nil || n != 1 {
			t.Errorf("target %d, %v; want 1", n, err)
		}
	})
}

// machine is a Machine and its Node.
type machine struct{ name, node string }

// machines lists the Machines of a MachineDeployment, with their nodes.
func machines(ctx context.Context, t *testing.T, dyn dynamic.Interface, md string) []machine {
	t.Helper()
	list, err := dyn.Resource(capiinfra.MachinesGVR).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: capiinfra.MachineDeploymentNameLabel + "=" + md})
	if err != nil {
		t.Fatal(err)
	}
	var out []machine
	for _, m := range list.Items {
		node, _, _ := unstructured.NestedString(m.Object, "status", "nodeRef", "name")
		out = append(out, machine{name: m.GetName(), node: node})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// waitMachines waits until a MachineDeployment has exactly n Machines, none
// being deleted, each with a Ready Node, and returns them.
func waitMachines(t *testing.T, env *testenv.Env, dyn dynamic.Interface, md string, n int) []machine {
	t.Helper()
	var out []machine
	testenv.Eventually(t, 2*time.Minute, fmt.Sprintf("%d Machines of %s with Ready Nodes", n, md), func(ctx context.Context) (bool, string, error) {
		list, err := dyn.Resource(capiinfra.MachinesGVR).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: capiinfra.MachineDeploymentNameLabel + "=" + md})
		if err != nil {
			return false, "", err
		}
		out = nil
		for _, m := range list.Items {
			node, _, _ := unstructured.NestedString(m.Object, "status", "nodeRef", "name")
			if node == "" || m.GetDeletionTimestamp() != nil {
				continue
			}
			nd, err := env.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			if err != nil || !ready(nd) {
				continue
			}
			out = append(out, machine{name: m.GetName(), node: node})
		}
		return len(list.Items) == n && len(out) == n, fmt.Sprintf("%d Machines, %d with Ready Nodes", len(list.Items), len(out)), nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func nodeOf(ctx context.Context, t *testing.T, env *testenv.Env, name string) *corev1.Node {
	t.Helper()
	n, err := env.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func allNodes(ctx context.Context, t *testing.T, env *testenv.Env) []*corev1.Node {
	t.Helper()
	list, err := env.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]*corev1.Node, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out
}

func waitNodeGone(t *testing.T, env *testenv.Env, name string) {
	t.Helper()
	testenv.Eventually(t, time.Minute, "node "+name+" deleted", func(ctx context.Context) (bool, string, error) {
		_, err := env.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		return false, "still there", err
	})
}

func assertNoDeleteMark(ctx context.Context, t *testing.T, dyn dynamic.Interface, name string) {
	t.Helper()
	m, err := dyn.Resource(capiinfra.MachinesGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m.GetAnnotations()[clusterapi.DeleteMachineAnnotation]; ok {
		t.Errorf("Machine %s is marked for deletion after a refused delete", name)
	}
}

// create creates Cluster API and lab objects, each in its resource.
func create(ctx context.Context, t *testing.T, dyn dynamic.Interface, objs ...*unstructured.Unstructured) {
	t.Helper()
	resources := map[string]schema.GroupVersionResource{
		capiinfra.KindCluster: capiinfra.LabClustersGVR, capiinfra.KindControlPlane: capiinfra.LabControlPlanesGVR,
		capiinfra.KindMachineTemplate: capiinfra.LabMachineTemplatesGVR, "Cluster": capiinfra.ClustersGVR,
		"MachineDeployment": capiinfra.MachineDeploymentsGVR, clusterapi.KindKubeadmControlPlane: clusterapi.KubeadmControlPlanesGVR,
		"MachinePool": capiinfra.MachinePoolsGVR, capiinfra.KindMachinePool: capiinfra.LabMachinePoolsGVR,
	}
	for _, o := range objs {
		if _, err := dyn.Resource(resources[o.GetKind()]).Namespace(o.GetNamespace()).Create(ctx, o, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
}

// holdSpotNodes makes the apiserver refuse new spot Nodes (a
// ValidatingAdmissionPolicy), so that the lab's infrastructure provider cannot
// finish a spot Machine: it stays provisioning, as on a cloud that is slow to
// deliver. release lifts the hold.
func holdSpotNodes(ctx context.Context, t *testing.T, env *testenv.Env) (release func()) {
	t.Helper()
	const name = "hold-spot-nodes"
	admission := env.Client.AdmissionregistrationV1()
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create},
					Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"nodes"}},
				},
			}}},
			Validations: []admissionv1.Validation{{
				Expression: `!has(object.metadata.labels) || !('karpenter.sh/capacity-type' in object.metadata.labels) || object.metadata.labels['karpenter.sh/capacity-type'] != 'spot'`,
				Message:    "spot Nodes are held by the test",
			}},
		},
	}
	if _, err := admission.ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name, ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny}},
	}
	if _, err := admission.ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	probe := lab.Node(lab.NodeSpec{Name: "hold-probe", Class: lab.ClassSpot})
	testenv.Eventually(t, 30*time.Second, "the hold in force", func(ctx context.Context) (bool, string, error) {
		_, err := env.Client.CoreV1().Nodes().Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return apierrors.IsInvalid(err) || apierrors.IsForbidden(err), fmt.Sprint(err), nil
	})
	return func() {
		_ = admission.ValidatingAdmissionPolicyBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = admission.ValidatingAdmissionPolicies().Delete(context.Background(), name, metav1.DeleteOptions{})
	}
}
