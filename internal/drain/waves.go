package drain

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	"spotter.dev/spotter/internal/coop"
)

// inWaves groups the pods to evict by their wave in waves (keyed by
// namespace/name, numbered from 1): one group per wave that has pods, in wave
// order, each keeping the order of pods. Pods waves does not list (they came
// after the plan) go in the last group. Without waves there is one group.
func inWaves(pods []*corev1.Pod, waves map[string]int) [][]*corev1.Pod {
	if len(waves) == 0 || len(pods) == 0 {
		return [][]*corev1.Pod{pods}
	}
	byWave := map[int][]*corev1.Pod{}
	var unlisted []*corev1.Pod
	for _, p := range pods {
		if w, ok := waves[key(p)]; ok && w > 0 {
			byWave[w] = append(byWave[w], p)
		} else {
			unlisted = append(unlisted, p)
		}
	}
	numbers := make([]int, 0, len(byWave))
	for w := range byWave {
		numbers = append(numbers, w)
	}
	slices.Sort(numbers)
	out := make([][]*corev1.Pod, 0, len(numbers)+1)
	for _, w := range numbers {
		out = append(out, byWave[w])
	}
	if len(unlisted) > 0 {
		if len(out) == 0 {
			return [][]*corev1.Pod{unlisted}
		}
		out[len(out)-1] = append(out[len(out)-1], unlisted...)
	}
	return out
}

// evictWaves evicts the waves one after the other. Before each wave after the
// first it waits until the pods evicted so far are gone and every
// PodDisruptionBudget covering the wave's pods allows as many disruptions as
// the wave makes: the disruption controller gives a budget its disruptions
// back as the evicted pods' replacements become Ready. If that does not happen
// before the drain's deadline, the drain fails (and is rolled back), naming the
// budgets it waited for. It returns the pods evicted.
func (d *Drainer) evictWaves(ctx context.Context, req Request, node *corev1.ObjectReference, waves [][]*corev1.Pod, res *Result) ([]*corev1.Pod, error) {
	logger := klog.FromContext(ctx)
	var gone []*corev1.Pod
	for i, wave := range waves {
		if i > 0 {
			if err := d.waitGone(ctx, gone, res); err != nil {
				notAttempted(res, waves[i:], "not attempted: the pods of the waves before did not terminate in time")
				return gone, err
			}
			if err := d.waitForBudgets(ctx, wave); err != nil {
				notAttempted(res, waves[i:], fmt.Sprintf("wave %d of %d not started: %v", i+1, len(waves), err))
				return gone, fmt.Errorf("waiting to start wave %d of %d: %w", i+1, len(waves), err)
			}
		}
		logger.Info("Evicting a wave", "wave", i+1, "waves", len(waves), "pods", len(wave))
		// One action per wave: the events library would merge the waves'
		// Events into the first one's series, and show its note only.
		d.event(node, corev1.EventTypeNormal, ReasonDrainWave, fmt.Sprintf("DrainWave%d", i+1), "wave %d of %d: evicting %d pods", i+1, len(waves), len(wave))
		evicted, err := d.evictAll(ctx, req, wave, res)
		gone = append(gone, evicted...)
		if err != nil {
			notAttempted(res, waves[i+1:], "not attempted: an earlier wave failed")
			return gone, err
		}
	}
	return gone, nil
}

// notAttempted reports the pods of waves as blocked, for reason.
func notAttempted(res *Result, waves [][]*corev1.Pod, reason string) {
	for _, wave := range waves {
		for _, p := range wave {
			res.Blocked = append(res.Blocked, Blocked{Pod: key(p), Reason: reason})
		}
	}
}

// waitForBudgets waits until every PodDisruptionBudget covering pods allows
// evicting all of them at once, polling every PollInterval, and returns an
// error that says which budgets fell short when ctx ends first.
func (d *Drainer) waitForBudgets(ctx context.Context, pods []*corev1.Pod) error {
	// lastShort is the last shortfall read: a read that time cut short
	// says nothing new.
	var lastShort string
	var lastErr error
	for {
		short, err := d.budgetsShort(ctx, pods)
		if err == nil && short == "" {
			return nil
		}
		if err != nil && ctx.Err() == nil {
			lastErr = err
			klog.FromContext(ctx).V(1).Info("Reading PodDisruptionBudgets", "err", err.Error())
		}
		if short != "" {
			lastShort = short
			klog.FromContext(ctx).V(1).Info("Waiting for PodDisruptionBudgets before the next wave", "budgets", short)
		}
		if coop.Sleep(ctx, d.clock, d.opts.PollInterval) != nil {
			why := lastShort
			switch {
			case why != "":
			case lastErr != nil:
				why = fmt.Sprintf("reading PodDisruptionBudgets: %v", lastErr)
			default:
				why = "the PodDisruptionBudgets could not be read before time ran out"
			}
			return fmt.Errorf("%s (the replacements of the pods evicted so far are not Ready): %w", why, context.Cause(ctx))
		}
	}
}

// budgetsShort reads the PodDisruptionBudgets of the pods' namespaces and
// describes those that cover some of pods and allow fewer disruptions than
// they cover, or whose status the disruption controller has not computed for
// their current spec; "" when there are none.
func (d *Drainer) budgetsShort(ctx context.Context, pods []*corev1.Pod) (string, error) {
	byNamespace := map[string][]*corev1.Pod{}
	for _, p := range pods {
		byNamespace[p.Namespace] = append(byNamespace[p.Namespace], p)
	}
	namespaces := make([]string, 0, len(byNamespace))
	for ns := range byNamespace {
		namespaces = append(namespaces, ns)
	}
	slices.Sort(namespaces)
	var short []string
	for _, ns := range namespaces {
		list, err := d.client.PolicyV1().PodDisruptionBudgets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return "", fmt.Errorf("listing PodDisruptionBudgets in %s: %w", ns, err)
		}
		for i := range list.Items {
			pdb := &list.Items[i]
			sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
			if err != nil || pdb.Spec.Selector == nil {
				// The Eviction API answers for such a budget: nothing to wait for.
				continue
			}
			var covered int32
			for _, p := range byNamespace[ns] {
				if sel.Matches(labels.Set(p.Labels)) {
					covered++
				}
			}
			switch {
			case covered == 0:
			case pdb.Status.ObservedGeneration < pdb.Generation:
				short = append(short, fmt.Sprintf("PodDisruptionBudget %s/%s: status not yet computed by the disruption controller", ns, pdb.Name))
			case pdb.Status.DisruptionsAllowed < covered:
				short = append(short, fmt.Sprintf("PodDisruptionBudget %s/%s allows %d disruption(s), the wave needs %d",
					ns, pdb.Name, max(pdb.Status.DisruptionsAllowed, 0), covered))
			}
		}
	}
	return strings.Join(short, "; "), nil
}
