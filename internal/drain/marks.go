package drain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// The marks a drain puts on its node before it evicts anything. They are the
// only state of a drain: a process that starts and finds them knows a drain of
// its component was interrupted, and can resume or roll it back.
const (
	// DrainingAnnotation holds a Mark as JSON.
	DrainingAnnotation = "spotter.dev/draining"
	// DrainingTaintKey is the key of the NoSchedule taint that keeps new pods
	// off a draining node.
	DrainingTaintKey = "spotter.dev/draining"
	// EvictedByLabel, on each Eviction a drain asks for, names the component
	// (the value of Options.Component). The chart's admission policy holds the
	// agent's evictions to its own node by it: an eviction names its pod, not
	// the pod's node.
	EvictedByLabel = "spotter.dev/evicted-by"
)

// Mark records who drains a node, why and since when.
type Mark struct {
	// By is the component draining the node: rescheduler, migrator or agent.
	By string `json:"by"`
	// Reason is why, in words for the operator.
	Reason string `json:"reason"`
	// At is when the drain started.
	At metav1.Time `json:"at"`
	// Cordoned is true when the drain cordoned the node, so that a rollback
	// uncordons it (and only then).
	Cordoned bool `json:"cordoned,omitempty"`
}

// ErrDrainedByOther is returned when a node is already being drained by
// another component.
var ErrDrainedByOther = errors.New("node is being drained by another component")

// MarkOf returns the drain mark of node, if it has one.
func MarkOf(node *corev1.Node) (*Mark, bool, error) {
	raw, ok := node.Annotations[DrainingAnnotation]
	if !ok {
		return nil, false, nil
	}
	m := &Mark{}
	if err := json.Unmarshal([]byte(raw), m); err != nil {
		return nil, true, fmt.Errorf("annotation %s on node %s is not a drain mark: %w", DrainingAnnotation, node.Name, err)
	}
	return m, true, nil
}

// mark puts the taint and the annotation on the node, and cordons it if asked
// to. A node already marked by the same component keeps its mark (a resumed
// drain); one marked by another component is refused, unless takeover is set:
// an interruption (deadline mode) wins over a voluntary drain, whose owner then
// finds the node no longer its own and leaves it alone.
func (d *Drainer) mark(ctx context.Context, name, reason string, takeover bool) (*Mark, error) {
	var out *Mark
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := d.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		existing, marked, err := MarkOf(node)
		if err != nil {
			return err
		}
		if marked && existing.By != d.opts.Component && !takeover {
			return fmt.Errorf("%w: %s (since %s: %s)", ErrDrainedByOther, existing.By, existing.At.UTC().Format("15:04:05"), existing.Reason)
		}
		m := existing
		if !marked || existing.By != d.opts.Component {
			m = &Mark{By: d.opts.Component, Reason: reason, At: metav1.NewTime(d.clock.Now())}
			// A takeover keeps what the previous drain did: its cordon.
			m.Cordoned = marked && existing.Cordoned
		}
		if d.opts.Cordon && !node.Spec.Unschedulable {
			node.Spec.Unschedulable = true
			m.Cordoned = true
		}
		if node, err = Marked(node, *m); err != nil {
			return err
		}
		if _, err := d.client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
			return err
		}
		out = m
		return nil
	})
	return out, err
}

// Marked returns a copy of node with mark m on it: the annotation
// DrainingAnnotation holding m, and the NoSchedule taint DrainingTaintKey
// valued m.By unless the node has one. It leaves the cordon as it is.
func Marked(node *corev1.Node, m Mark) (*corev1.Node, error) {
	data, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	node = node.DeepCopy()
	if node.Annotations == nil {
		node.Annotations = map[string]string{}
	}
	node.Annotations[DrainingAnnotation] = string(data)
	if !hasTaint(node, DrainingTaintKey) {
		node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: DrainingTaintKey, Value: m.By, Effect: corev1.TaintEffectNoSchedule})
	}
	return node, nil
}

// Unmark removes the drain's taint and annotation from the node, and uncordons
// it when the drain had cordoned it and uncordon is true. It is how a drain is
// rolled back, and how a finished drain leaves its node.
func (d *Drainer) Unmark(ctx context.Context, name string, uncordon bool) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := d.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		m, marked, err := MarkOf(node)
		if err != nil {
			return err
		}
		if marked && m.By != d.opts.Component {
			return fmt.Errorf("%w: %s", ErrDrainedByOther, m.By)
		}
		changed := false
		if marked {
			delete(node.Annotations, DrainingAnnotation)
			changed = true
			if uncordon && m.Cordoned && node.Spec.Unschedulable {
				node.Spec.Unschedulable = false
			}
		}
		kept := node.Spec.Taints[:0]
		for _, t := range node.Spec.Taints {
			if t.Key == DrainingTaintKey {
				changed = true
				continue
			}
			kept = append(kept, t)
		}
		node.Spec.Taints = kept
		if !changed {
			return nil
		}
		_, err = d.client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
		return err
	})
}

func hasTaint(node *corev1.Node, key string) bool {
	for _, t := range node.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}
