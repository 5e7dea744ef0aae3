package kubernetes_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"spotter.dev/spotter/internal/cloud"
	"spotter.dev/spotter/internal/cloud/kubernetes"
	"spotter.dev/spotter/internal/testutil"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

var pricing = v1alpha1.PricingConfig{Currency: "USD", InstanceTypes: map[string]v1alpha1.InstancePrice{
	"m5.xlarge": {OnDemand: 0.192, Spot: 0.07},
	"free.tier": {},
}}

func newProvider(t *testing.T, objs ...runtime.Object) (*kubernetes.Provider, *k8sfake.Clientset) {
	t.Helper()
	client := k8sfake.NewClientset(objs...)
	p, err := kubernetes.New(client, v1alpha1.ClassificationConfig{SpotSelectors: []string{"pool=cheap"}}, pricing)
	if err != nil {
		t.Fatal(err)
	}
	return p, client
}

func TestInstances(t *testing.T) {
	const cp = "node-role.kubernetes.io/control-plane"
	withType := testutil.NodeLabel("node.kubernetes.io/instance-type", "m5.xlarge")
	nodes := []*corev1.Node{
		testutil.Node("spot", testutil.Spot(), withType, testutil.Zone("eu-west-1a")),
		testutil.Node("od", testutil.OnDemand(), withType),
		testutil.Node("selector", testutil.NodeLabel("pool", "cheap")),
		testutil.Node("gke", testutil.NodeLabel("cloud.google.com/gke-spot", "true"), testutil.NodeLabel("node.kubernetes.io/instance-type", "e2-standard-4")),
		testutil.Node("free", testutil.OnDemand(), testutil.NodeLabel("node.kubernetes.io/instance-type", "free.tier")),
		testutil.Node("excluded", testutil.OnDemand(), testutil.NodeLabel("spotter.dev/exclude", "true")),
		testutil.Node("cp-spot", testutil.Spot(), testutil.NodeLabel(cp, "")),
		testutil.Node("cp", testutil.Taint(cp, "", corev1.TaintEffectNoSchedule)),
		testutil.Node("bare"),
		testutil.Node("conflict", testutil.Spot(), testutil.NodeLabel("eks.amazonaws.com/capacityType", "ON_DEMAND")),
	}
	nodes[0].Spec.ProviderID = "aws:///eu-west-1a/i-0abc"
	p, _ := newProvider(t)
	got, err := p.Instances(context.Background(), nodes)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		node      string
		present   bool
		spot      bool
		id        string
		price     float64
		known     bool
		validates bool
	}{
		{node: "spot", present: true, spot: true, id: "aws:///eu-west-1a/i-0abc", price: 0.07, known: true, validates: true},
		{node: "od", present: true, id: "od", price: 0.192, known: true, validates: true},
		{node: "selector", present: true, spot: true, id: "selector", validates: true},
		{node: "gke", present: true, spot: true, id: "gke", validates: true},
		{node: "free", present: true, id: "free", validates: true},
		{node: "excluded", present: true, id: "excluded", validates: true},
		{node: "cp-spot", present: true, spot: true, id: "cp-spot"},
		{node: "cp"},
		{node: "bare"},
		{node: "conflict"},
	} {
		t.Run(tc.node, func(t *testing.T) {
			inst, ok := got[tc.node]
			if ok != tc.present {
				t.Fatalf("present = %v, want %v", ok, tc.present)
			}
			if !ok {
				return
			}
			if inst.Spot != tc.spot || inst.ID != tc.id || inst.PricePerHour != tc.price || inst.PriceKnown != tc.known ||
				inst.NodeName != tc.node || inst.NodeGroup != "" || inst.State != cloud.InstanceRunning {
				t.Errorf("instance %+v", inst)
			}
			var node *corev1.Node
			for _, n := range nodes {
				if n.Name == tc.node {
					node = n
				}
			}
			if err := cloud.ValidateInstance(node, &inst); (err == nil) != tc.validates {
				t.Errorf("ValidateInstance = %v", err)
			}
		})
	}
	if got["spot"].Zone != "eu-west-1a" || got["spot"].InstanceType != "m5.xlarge" {
		t.Errorf("zone and type of %+v", got["spot"])
	}
}

func TestNoNodeGroups(t *testing.T) {
	p, _ := newProvider(t)
	ctx := context.Background()
	if groups, err := p.NodeGroups(ctx); err != nil || len(groups) != 0 {
		t.Errorf("NodeGroups = %v, %v", groups, err)
	}
	if _, err := p.NodeGroupForNode(ctx, testutil.Node("n")); !cloud.IsNotFound(err) {
		t.Errorf("NodeGroupForNode: %v", err)
	}
	if p.Name() != "kubernetes" {
		t.Errorf("Name = %q", p.Name())
	}
}

func TestDeleteInstance(t *testing.T) {
	ctx := context.Background()
	od := testutil.Node("od", testutil.OnDemand())
	cp := testutil.Node("cp", testutil.NodeLabel("node-role.kubernetes.io/control-plane", ""))
	p, client := newProvider(t, od, cp)

	if err := p.DeleteInstance(ctx, cp); !cloud.IsControlPlane(err) {
		t.Errorf("deleting the control plane: %v", err)
	}
	if err := p.DeleteInstance(ctx, od); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Nodes().Get(ctx, "od", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("node still there: %v", err)
	}
	if err := p.DeleteInstance(ctx, od); !cloud.IsNotFound(err) {
		t.Errorf("deleting twice: %v", err)
	}
	if _, err := client.CoreV1().Nodes().Get(ctx, "cp", metav1.GetOptions{}); err != nil {
		t.Errorf("the control plane is gone: %v", err)
	}

	client.PrependReactor("delete", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewTooManyRequests("slow down", 7)
	})
	err := p.DeleteInstance(ctx, testutil.Node("busy"))
	if d, ok := cloud.RetryAfter(err); !ok || d.Seconds() != 7 {
		t.Errorf("throttled delete: %v", err)
	}
}

func TestDeleteInstanceReplacedNode(t *testing.T) {
	ctx := context.Background()
	p, client := newProvider(t)
	client.PrependReactor("delete", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, "n", nil)
	})
	if err := p.DeleteInstance(ctx, testutil.Node("n")); !cloud.IsNotFound(err) {
		t.Errorf("UID precondition failed: %v", err)
	}
}

func TestInvalidSelector(t *testing.T) {
	_, err := kubernetes.New(k8sfake.NewClientset(), v1alpha1.ClassificationConfig{SpotSelectors: []string{"a in ("}}, pricing)
	if err == nil {
		t.Error("no error for an invalid selector")
	}
}
