package kubernetes_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"spotter.dev/spotter/internal/cloud"
	"spotter.dev/spotter/internal/cloud/kubernetes"
	"spotter.dev/spotter/internal/lab"
	"spotter.dev/spotter/internal/testenv"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// TestAgainstAPIServer deletes real Node objects: the provider's only call.
func TestAgainstAPIServer(t *testing.T) {
	env := testenv.StartAPIServer(t)
	ctx := testenv.Context(t, time.Minute)
	p, err := kubernetes.New(env.Client, v1alpha1.ClassificationConfig{}, pricing)
	if err != nil {
		t.Fatal(err)
	}
	create := func(spec lab.NodeSpec) *corev1.Node {
		t.Helper()
		n, err := env.Client.CoreV1().Nodes().Create(ctx, lab.Node(spec), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	exists := func(name string) bool {
		t.Helper()
		_, err := env.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}

	spot := create(lab.NodeSpec{Name: "spot-1", Class: lab.ClassSpot, InstanceType: "m5.xlarge"})
	od := create(lab.NodeSpec{Name: "od-1", Class: lab.ClassOnDemand, InstanceType: "m5.xlarge"})
	cp := create(lab.NodeSpec{Name: "cp-1", Class: lab.ClassControlPlane})

	insts, err := p.Instances(ctx, []*corev1.Node{spot, od, cp})
	if err != nil {
		t.Fatal(err)
	}
	if !insts["spot-1"].Spot || insts["spot-1"].PricePerHour != 0.07 || insts["od-1"].Spot || insts["od-1"].PricePerHour != 0.192 {
		t.Errorf("Instances = %+v", insts)
	}
	if _, ok := insts["cp-1"]; ok {
		t.Errorf("the control-plane node has no capacity label, yet got %+v", insts["cp-1"])
	}

	if err := p.DeleteInstance(ctx, cp); !cloud.IsControlPlane(err) || !exists("cp-1") {
		t.Errorf("deleting the control plane: %v", err)
	}
	if err := p.DeleteInstance(ctx, od); err != nil {
		t.Fatal(err)
	}
	if exists("od-1") {
		t.Error("od-1 still exists")
	}
	if err := p.DeleteInstance(ctx, od); !cloud.IsNotFound(err) {
		t.Errorf("deleting twice: %v", err)
	}

	// A node deleted and created again under the same name is another
	// instance: the old object's UID no longer matches, and the new one stays.
	if err := env.Client.CoreV1().Nodes().Delete(ctx, "spot-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	create(lab.NodeSpec{Name: "spot-1", Class: lab.ClassSpot})
	if err := p.DeleteInstance(ctx, spot); !cloud.IsNotFound(err) {
		t.Errorf("deleting a replaced node: %v", err)
	}
	if !exists("spot-1") {
		t.Error("the new spot-1 was deleted")
	}
}
