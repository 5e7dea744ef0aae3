// Package cleanup removes from nodes every mark Spotter puts on them: what an
// operator runs after uninstalling Spotter (`spotter cleanup`), so that nothing
// of Spotter's is left on the cluster's nodes. Only Spotter's marks go: a label or taint another tool wrote
// stays, and a node is uncordoned only when Spotter's drain cordoned it.
package cleanup

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"spotter.dev/spotter/internal/agent/interrupt"
	"spotter.dev/spotter/internal/classify"
	"spotter.dev/spotter/internal/controller/labeler"
	"spotter.dev/spotter/internal/controller/migrator"
	"spotter.dev/spotter/internal/controller/preemptible"
	"spotter.dev/spotter/internal/drain"
)

// Strip removes Spotter's marks from node, in place, and returns what it
// removed, in words (nothing: the node carries none).
func Strip(node *corev1.Node) []string {
	var changes []string
	// The drain engine's marks; the cordon only when the drain made it. An
	// unreadable mark is Spotter's all the same: it goes, the cordon stays.
	if _, ok := node.Annotations[drain.DrainingAnnotation]; ok {
		if m, marked, err := drain.MarkOf(node); err == nil && marked && m.Cordoned && node.Spec.Unschedulable {
			node.Spec.Unschedulable = false
			changes = append(changes, "uncordon (cordoned by a drain of the "+m.By+")")
		}
		delete(node.Annotations, drain.DrainingAnnotation)
		changes = append(changes, "remove annotation "+drain.DrainingAnnotation)
	}
	// The preemptible controller's record of a drained node; the cordon only
	// when its drain made it.
	if _, ok := node.Annotations[preemptible.DrainedAnnotation]; ok {
		if r, err := preemptible.RecordOf(node); err == nil && r != nil && r.Cordoned && node.Spec.Unschedulable {
			node.Spec.Unschedulable = false
			changes = append(changes, "uncordon (cordoned by the preemptible controller's drain)")
		}
		delete(node.Annotations, preemptible.DrainedAnnotation)
		changes = append(changes, "remove annotation "+preemptible.DrainedAnnotation)
	}
	if _, ok := node.Annotations[interrupt.Annotation]; ok {
		if interrupt.CordonedByAgent(node) && node.Spec.Unschedulable {
			node.Spec.Unschedulable = false
			changes = append(changes, "uncordon (cordoned by the agent for a notice)")
		}
		delete(node.Annotations, interrupt.Annotation)
		changes = append(changes, "remove annotation "+interrupt.Annotation)
	}
	// The interruptible label only where the labeler wrote it: Cluster API's
	// own stays.
	if node.Annotations[classify.LabeledByUsAnnotation] == "true" {
		if _, ok := node.Labels[classify.InterruptibleLabel]; ok {
			delete(node.Labels, classify.InterruptibleLabel)
			changes = append(changes, "remove label "+classify.InterruptibleLabel)
		}
	}
	if _, ok := node.Annotations[classify.LabeledByUsAnnotation]; ok {
		delete(node.Annotations, classify.LabeledByUsAnnotation)
		changes = append(changes, "remove annotation "+classify.LabeledByUsAnnotation)
	}
	// The cluster autoscaler's deletion taint only on a node the migrator
	// selected: the autoscaler's own stays.
	_, selected := node.Labels[migrator.SelectedForDeletionLabel]
	if selected {
		delete(node.Labels, migrator.SelectedForDeletionLabel)
		changes = append(changes, "remove label "+migrator.SelectedForDeletionLabel)
	}
	ours := []string{drain.DrainingTaintKey, interrupt.TaintKey, labeler.OnDemandTaintKey}
	if selected {
		ours = append(ours, migrator.ToBeDeletedTaint)
	}
	kept := node.Spec.Taints[:0:0]
	for _, t := range node.Spec.Taints {
		if slices.Contains(ours, t.Key) {
			changes = append(changes, "remove taint "+t.ToString())
			continue
		}
		kept = append(kept, t)
	}
	node.Spec.Taints = kept
	return changes
}

// Result is one node that carried marks.
type Result struct {
	Node    string
	Changes []string
	Err     error
}

// Run strips every node of the cluster (see Strip), each with an update that
// fails on a concurrent change and is then retried on the fresh node. With
// dryRun nothing is written. report is called for each node that carried
// marks, as it is done. The error is the first failure; the other nodes are
// cleaned all the same.
func Run(ctx context.Context, client kubernetes.Interface, dryRun bool, report func(Result)) error {
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	var first error
	for i := range nodes.Items {
		name := nodes.Items[i].Name
		var changes []string
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if changes = Strip(node); len(changes) == 0 || dryRun {
				return nil
			}
			_, err = client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
			return err
		})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			err = fmt.Errorf("node %s: %w", name, err)
			if first == nil {
				first = err
			}
		}
		if len(changes) > 0 || err != nil {
			report(Result{Node: name, Changes: changes, Err: err})
		}
	}
	return first
}
