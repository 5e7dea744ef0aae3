package providerkit

import (
	"context"
	"errors"
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"spotter.dev/spotter/internal/cloud"
)

func node(name, providerID string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: providerID}}
}

func TestNodeNames(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset(node("n1", "x://a"), node("n2", "x://b"), node("n3", ""))
	key := func(n *corev1.Node) (string, bool) { return n.Spec.ProviderID, n.Spec.ProviderID != "" }
	got, err := NodeNames(ctx, kube, key)
	if want := map[string]string{"x://a": "n1", "x://b": "n2"}; err != nil || !maps.Equal(got, want) {
		t.Errorf("NodeNames: %v, %v; want %v", got, err, want)
	}
	if got, err := NodeNames(ctx, nil, key); err != nil || got == nil || len(got) != 0 {
		t.Errorf("NodeNames without kube: %v, %v", got, err)
	}
	kube.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewTooManyRequests("slow down", 3)
	})
	if _, err := NodeNames(ctx, kube, key); !cloud.IsThrottled(err) {
		t.Errorf("NodeNames throttled: %v", err)
	}
}

func TestDeleteNode(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset(node("n1", ""))
	if err := DeleteNode(ctx, kube, "n1"); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("n1 still there: %v", err)
	}
	if err := DeleteNode(ctx, kube, "n1"); err != nil {
		t.Errorf("a Node already gone: %v", err)
	}
	if err := DeleteNode(ctx, nil, "n1"); err != nil {
		t.Errorf("no kube: %v", err)
	}
	boom := errors.New("boom")
	kube.PrependReactor("delete", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInternalError(boom)
	})
	if err := DeleteNode(ctx, kube, "n2"); err == nil || cloud.IsNotFound(err) {
		t.Errorf("a failed delete: %v", err)
	}
}

type group struct{ cloud.NodeGroup }

func TestNodeGroups(t *testing.T) {
	a, b := &group{}, &group{}
	got, err := NodeGroups([]*group{a, b}, nil)
	if err != nil || len(got) != 2 || got[0] != a || got[1] != b {
		t.Errorf("NodeGroups: %v, %v", got, err)
	}
	boom := errors.New("boom")
	if got, err := NodeGroups([]*group{a}, boom); got != nil || !errors.Is(err, boom) {
		t.Errorf("NodeGroups with an error: %v, %v", got, err)
	}
}

func TestMembers(t *testing.T) {
	in := map[string]bool{"x://a": true, "x://b": true}
	key := func(n *corev1.Node) string { return n.Spec.ProviderID }
	keys, err := Members("group g", []*corev1.Node{node("n2", "x://b"), node("n1", "x://a")}, key, in)
	if err != nil || len(keys) != 2 || keys[0] != "x://b" || keys[1] != "x://a" {
		t.Errorf("members: %v, %v", keys, err)
	}
	_, err = Members("group g", []*corev1.Node{node("n1", "x://a"), node("n3", "x://c")}, key, in)
	if want := `node n3 (providerID "x://c") in group g: `; !errors.Is(err, cloud.ErrNotInNodeGroup) || err.Error() != want+cloud.ErrNotInNodeGroup.Error() {
		t.Errorf("a node of another group: %v", err)
	}
	cp := node("n1", "x://a")
	cp.Labels = map[string]string{"node-role.kubernetes.io/control-plane": ""}
	if _, err := Members("group g", []*corev1.Node{cp}, key, in); !cloud.IsControlPlane(err) {
		t.Errorf("a control-plane node: %v", err)
	}
}

func TestDeleteNodes(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset(node("n1", ""), node("n2", ""), node("n3", ""))
	if err := DeleteNodes(ctx, kube, []*corev1.Node{node("n1", ""), node("gone", ""), node("n3", "")}); err != nil {
		t.Fatal(err)
	}
	list, _ := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if len(list.Items) != 1 || list.Items[0].Name != "n2" {
		t.Errorf("left: %v", list.Items)
	}
}
