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
// Node already gone, no name (an instance whose Node never registered), or
// no kube (a provider built without one), is not an error.
func DeleteNode(ctx context.Context, kube kubernetes.Interface, name string) error {
	if kube == nil || name == "" {
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

// Members checks the nodes a group is asked to delete, all of them before
// anything is deleted: none is part of the control plane
// (cloud.CheckDeletable), and each is a member of the group (in, by its
// key; else cloud.ErrNotInNodeGroup, naming the node and its providerID).
// It returns the nodes' keys.
func Members[K comparable](group string, nodes []*corev1.Node, key func(*corev1.Node) K, in map[K]bool) ([]K, error) {
	keys := make([]K, len(nodes))
	for i, n := range nodes {
		if err := cloud.CheckDeletable(n); err != nil {
			return nil, err
		}
		k := key(n)
		if !in[k] {
			return nil, fmt.Errorf("node %s (providerID %q) in %s: %w", n.Name, n.Spec.ProviderID, group, cloud.ErrNotInNodeGroup)
		}
		keys[i] = k
	}
	return keys, nil
}

// DeleteNodes deletes the Node objects of nodes (DeleteNode), in order, up
// to the first error.
func DeleteNodes(ctx context.Context, kube kubernetes.Interface, nodes []*corev1.Node) error {
	for _, n := range nodes {
		if err := DeleteNode(ctx, kube, n.Name); err != nil {
			return err
		}
	}
	return nil
}
