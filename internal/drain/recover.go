package drain

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// RecoverPolicy says what Recover does with a drain its component left
// unfinished.
type RecoverPolicy string

// Recover policies (config drain.onRestart).
const (
	Resume   RecoverPolicy = "Resume"
	Rollback RecoverPolicy = "Rollback"
)

// Recover finds the nodes this Drainer's component marked and did not finish
// (the process stopped mid-drain), and resumes or rolls back each, by policy.
// Nodes marked by other components are left alone. It returns the nodes it
// handled; a failed resume is rolled back like any failed drain.
func (d *Drainer) Recover(ctx context.Context, policy RecoverPolicy) ([]string, error) {
	nodes, err := d.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing nodes to recover drains: %w", err)
	}
	logger := klog.FromContext(ctx)
	var handled []string
	for i := range nodes.Items {
		node := &nodes.Items[i]
		m, marked, err := MarkOf(node)
		if err != nil {
			logger.Error(err, "Ignoring an unreadable drain mark", "node", klog.KObj(node))
			continue
		}
		if !marked || m.By != d.opts.Component {
			continue
		}
		handled = append(handled, node.Name)
		switch policy {
		case Rollback:
			logger.Info("Rolling back an unfinished drain", "node", klog.KObj(node), "since", m.At, "reason", m.Reason)
			if err := d.Unmark(ctx, node.Name, true); err != nil {
				return handled, fmt.Errorf("rolling back the drain of %s: %w", node.Name, err)
			}
		default:
			logger.Info("Resuming an unfinished drain", "node", klog.KObj(node), "since", m.At, "reason", m.Reason)
			if _, err := d.Drain(ctx, Request{Node: node.Name, Reason: m.Reason}); err != nil {
				logger.Error(err, "Resumed drain failed and was rolled back", "node", klog.KObj(node))
			}
		}
	}
	return handled, nil
}

// RollBackAtStart is what a controller that drains does when it starts: with
// policy Rollback, the drains its component left unfinished are rolled back
// (Recover), for at most grace beyond ctx's end, and logged; with Resume,
// nothing: its cycles resume them.
func (d *Drainer) RollBackAtStart(ctx context.Context, clk clock.Clock, policy RecoverPolicy, grace time.Duration) {
	if policy != Rollback {
		return
	}
	logger := klog.FromContext(ctx)
	rctx, cancel := Outlive(ctx, clk, grace)
	nodes, err := d.Recover(rctx, policy)
	cancel()
	if err != nil {
		logger.Error(err, "Recovering unfinished drains")
	} else if len(nodes) > 0 {
		logger.Info("Recovered unfinished drains", "nodes", nodes, "policy", policy)
	}
}
