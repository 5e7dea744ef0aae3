package preemptible

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"spotter.dev/spotter/internal/coop"
)

// ownersOn returns the controllers (ReplicaSets, StatefulSets, ...) of the
// pods on node, read from the cache.
func (c *Controller) ownersOn(ctx context.Context, node string) map[types.UID]bool {
	var pods corev1.PodList
	if err := c.reader.List(ctx, &pods, client.UnsafeDisableDeepCopy); err != nil {
		klog.FromContext(ctx).Error(err, "Listing pods from the cache")
		return nil
	}
	owners := map[types.UID]bool{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName != node {
			continue
		}
		if ref := metav1.GetControllerOf(p); ref != nil && ref.Kind != "DaemonSet" {
			owners[ref.UID] = true
		}
	}
	return owners
}

// waitReplacements waits until every unfinished pod of owners is Running and
// not being deleted (the evicted pods' replacements run), or ReplacementTimeout, so
// that the next drain does not take away pods whose replacements are still
// Pending: a workload without a PodDisruptionBudget would lose them all.
func (c *Controller) waitReplacements(ctx context.Context, owners map[types.UID]bool) {
	if len(owners) == 0 {
		return
	}
	deadline := c.clock.Now().Add(c.opts.ReplacementTimeout)
	for {
		var pods corev1.PodList
		if err := c.reader.List(ctx, &pods, client.UnsafeDisableDeepCopy); err == nil {
			waiting := 0
			for i := range pods.Items {
				p := &pods.Items[i]
				ref := metav1.GetControllerOf(p)
				finished := p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
				if ref != nil && owners[ref.UID] && !finished && (p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil) {
					waiting++
				}
			}
			if waiting == 0 {
				return
			}
		}
		if !c.clock.Now().Before(deadline) {
			klog.FromContext(ctx).Info("Replacements not all Running yet; going on", "timeout", c.opts.ReplacementTimeout)
			return
		}
		if coop.Sleep(ctx, c.clock, time.Second) != nil {
			return
		}
	}
}
