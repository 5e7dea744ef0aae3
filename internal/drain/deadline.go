package drain

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Priority classes whose pods go last in deadline mode.
const (
	systemClusterCritical = "system-cluster-critical"
	systemNodeCritical    = "system-node-critical"
	// criticalPriority is the lowest priority of the two system classes.
	criticalPriority = 2000000000
)

// deadlineRetry is the first wait after a refused eviction in deadline mode,
// short because the notice is short; it doubles up to deadlineMaxRetry
// (jittered as every drain's retries). A fixed 200 ms made each refused pod
// five requests a second to the apiserver for half its tier's time: in
// spotter simulate, 19,580 refusals in the week of week-200, all in
// preemption waves.
const (
	deadlineRetry    = 200 * time.Millisecond
	deadlineMaxRetry = 2 * time.Second
)

// critical reports whether p belongs to the last tier.
func critical(p *corev1.Pod) bool {
	if p.Spec.PriorityClassName == systemClusterCritical || p.Spec.PriorityClassName == systemNodeCritical {
		return true
	}
	return p.Spec.Priority != nil && *p.Spec.Priority >= criticalPriority
}

// evictByDeadline removes pods before req.Deadline, ordinary pods first, then
// critical ones. Each tier gets a share of the time left (ordinary pods two
// thirds when both tiers have pods). Within a tier a pod is evicted, with its
// grace period capped by the time left; if its PodDisruptionBudget still
// refuses when half the tier's time is spent, it is deleted with the grace
// period that remains.
func (d *Drainer) evictByDeadline(ctx context.Context, req Request, pods []*corev1.Pod, res *Result) ([]*corev1.Pod, error) {
	var ordinary, crit []*corev1.Pod
	for _, p := range pods {
		if critical(p) {
			crit = append(crit, p)
		} else {
			ordinary = append(ordinary, p)
		}
	}
	var gone []*corev1.Pod
	for i, tier := range [][]*corev1.Pod{ordinary, crit} {
		if len(tier) == 0 {
			continue
		}
		left := req.Deadline.Sub(d.clock.Now())
		share := left
		if i == 0 && len(crit) > 0 {
			share = left * 2 / 3
		}
		tierEnd := d.clock.Now().Add(share)
		evictUntil := d.clock.Now().Add(share / 2)
		tierCtx, cancel := WithClockDeadline(ctx, d.clock, tierEnd)
		// Every pod of the tier at once: a pod its PodDisruptionBudget holds
		// back must not keep the others waiting, or they would miss the deadline.
		g, err := d.evictConcurrently(tierCtx, req, tier, len(tier), res, func(ctx context.Context, p *corev1.Pod) (bool, error) {
			return d.evictOrDelete(ctx, req, p, evictUntil, tierEnd)
		})
		cancel()
		gone = append(gone, g...)
		if err != nil {
			return gone, err
		}
	}
	return gone, nil
}

// evictOrDelete evicts p until evictUntil, then deletes it.
func (d *Drainer) evictOrDelete(ctx context.Context, req Request, p *corev1.Pod, evictUntil, tierEnd time.Time) (bool, error) {
	ectx, cancel := WithClockDeadline(ctx, d.clock, evictUntil)
	err := d.evictWithRetry(ectx, req, p, d.grace(p, tierEnd), deadlineRetry, deadlineMaxRetry)
	cancel()
	if err == nil {
		return false, nil
	}
	if ctx.Err() != nil {
		return false, err
	}
	// The eviction is still refused and time is short: delete the pod.
	grace := d.grace(p, tierEnd)
	opts := metav1.DeleteOptions{GracePeriodSeconds: grace, Preconditions: &metav1.Preconditions{UID: &p.UID}}
	if derr := d.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, opts); derr != nil && !apierrors.IsNotFound(derr) && !apierrors.IsConflict(derr) {
		return false, fmt.Errorf("deleting after the eviction was refused (%w): %w", err, derr)
	}
	d.event(podRef(p), corev1.EventTypeWarning, ReasonDeleted, "Delete",
		"deleted by spotter %s: node %s must be empty by %s and the eviction was refused (%v)", d.opts.Component, p.Spec.NodeName, req.Deadline.UTC().Format(time.RFC3339), err)
	return true, nil
}
