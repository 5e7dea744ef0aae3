package providerkit

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"spotter.dev/spotter/internal/cloud"
)

// DeleteNode deletes the Node object name once its instance is deleted; a
// Node already gone, or no kube (a provider built without one), is not an
// error.
func DeleteNode(ctx context.Context, kube kubernetes.Interface, name string) error {
	if kube == nil {
		return nil
	}
	err := kube.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
	if err = cloud.IgnoreNotFound(cloud.FromAPIError(err)); err != nil {
		return fmt.Errorf("deleting Node %s: %w", name, err)
	}
	return nil
}

// NodeNames maps the instances of the Nodes, by key (what key returns for a
// Node: its instance's ID in the provider's terms; false for none), to the
// Nodes' names, with one list of the Nodes. No kube: an empty map.
func NodeNames(ctx context.Context, kube kubernetes.Interface, key func(*corev1.Node) (string, bool)) (map[string]string, error) {
	out := map[string]string{}
	if kube == nil {
		return out, nil
	}
	list, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing Nodes: %w", cloud.FromAPIError(err))
	}
	for i := range list.Items {
		if k, ok := key(&list.Items[i]); ok {
			out[k] = list.Items[i].Name
		}
	}
	return out, nil
}

// NodeGroups returns groups as the seam's node groups, or err: a provider's
// NodeGroups, from its read of its groups.
func NodeGroups[G cloud.NodeGroup](groups []G, err error) ([]cloud.NodeGroup, error) {
	if err != nil {
		return nil, err
	}
	out := make([]cloud.NodeGroup, len(groups))
	for i, g := range groups {
		out[i] = g
	}
	return out, nil
}
