package sim

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"spotter.dev/spotter/internal/plan"
	"spotter.dev/spotter/internal/sim/report"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// Strategy names, in report order.
const (
	StrategyNone        = "none"
	StrategyRescheduler = "rescheduler"
	StrategyMigrator    = "migrator"
	StrategySpotter     = "spotter"
)

// Strategies are the strategies `spotter simulate` compares by default.
var Strategies = []string{StrategyNone, StrategyRescheduler, StrategyMigrator, StrategySpotter}

// ParseStrategies reads a comma-separated list of strategy names.
func ParseStrategies(s string) ([]string, error) {
	var out []string
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if !slices.Contains(Strategies, name) {
			return nil, fmt.Errorf("unknown strategy %q: use %s", name, strings.Join(Strategies, ", "))
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no strategy named: use %s", strings.Join(Strategies, ", "))
	}
	return out, nil
}

// strategy acts in the world each step, after the world's own processes and
// before the scheduler and the autoscaler.
type strategy interface {
	setup(w *World, e *plan.Engine) error
	step(ctx context.Context, w *World) error
}

func newStrategy(name string, cfg *v1alpha1.SpotterConfiguration) (strategy, error) {
	switch name {
	case StrategyNone, report.Baseline:
		return noStrategy{}, nil
	case StrategyRescheduler:
		return &reschedulerSeed{}, nil
	case StrategyMigrator:
		return &migratorSeed{}, nil
	case StrategySpotter:
		return newSpotter(cfg)
	}
	return nil, fmt.Errorf("unknown strategy %q", name)
}

// noStrategy leaves everything to the scheduler and the autoscaler.
type noStrategy struct{}

func (noStrategy) setup(*World, *plan.Engine) error   { return nil }
func (noStrategy) step(context.Context, *World) error { return nil }

// movable are a node's pods that an eviction can still move.
func movable(n *Node) []*Pod {
	var out []*Pod
	for _, p := range n.pods {
		if !p.Terminating && !p.lost {
			out = append(out, p)
		}
	}
	return out
}

// onDemandNodes are the registered on-demand nodes.
func onDemandNodes(w *World) []*Node {
	var out []*Node
	for _, n := range w.nodes {
		if n.Ready() && !n.Group.Spot {
			out = append(out, n)
		}
	}
	return out
}

// requestedCPU is the CPU the pods bound to a node request.
func requestedCPU(n *Node) int64 {
	var sum int64
	for _, p := range n.pods {
		sum += p.App.cpu
	}
	return sum
}

// alive reports whether a node is still in the world (not terminated).
func alive(w *World, n *Node) bool { return n.state != terminated && w.NodeByName(n.Name) == n }
