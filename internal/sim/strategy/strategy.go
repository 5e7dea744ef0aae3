// Package strategy holds what the simulator runs in its worlds: the
// product's controllers (the spotter row, built as spotter controller and
// spotter-agent build them) and the models of the tools before it
// (k8s-spot-rescheduler, a cost-manager-style migrator), each with the
// termination handler of its era.
package strategy

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"spotter.dev/spotter/internal/plan"
	"spotter.dev/spotter/internal/sim/report"
	"spotter.dev/spotter/internal/sim/world"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// Strategy names, in report order.
const (
	None        = "none"
	Rescheduler = "rescheduler"
	Migrator    = "migrator"
	Spotter     = "spotter"
)

// Names are the strategies `spotter simulate` compares by default.
var Names = []string{None, Rescheduler, Migrator, Spotter}

// Parse reads a comma-separated list of strategy names.
func Parse(s string) ([]string, error) {
	var out []string
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if !slices.Contains(Names, name) {
			return nil, fmt.Errorf("unknown strategy %q: use %s", name, strings.Join(Names, ", "))
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no strategy named: use %s", strings.Join(Names, ", "))
	}
	return out, nil
}

// Strategy acts in the world each step, after the world's own processes and
// before the scheduler and the autoscaler.
type Strategy interface {
	Setup(w *world.World, e *plan.Engine) error
	Step(ctx context.Context, w *world.World) error
}

// New makes the strategy of a name; cfg configures the spotter row (nil:
// the defaults).
func New(name string, cfg *v1alpha1.SpotterConfiguration) (Strategy, error) {
	switch name {
	case None, report.Baseline:
		return noStrategy{}, nil
	case Rescheduler:
		return &reschedulerSeed{}, nil
	case Migrator:
		return &migratorSeed{}, nil
	case Spotter:
		return newSpotter(cfg)
	}
	return nil, fmt.Errorf("unknown strategy %q", name)
}

// noStrategy leaves everything to the scheduler and the autoscaler.
type noStrategy struct{}

func (noStrategy) Setup(*world.World, *plan.Engine) error   { return nil }
func (noStrategy) Step(context.Context, *world.World) error { return nil }

// onDemandNodes are the registered on-demand nodes.
func onDemandNodes(w *world.World) []*world.Node {
	var out []*world.Node
	for _, n := range w.Nodes() {
		if n.Ready() && !n.Group.Spot {
			out = append(out, n)
		}
	}
	return out
}

// requestedCPU is the CPU the pods bound to a node request.
func requestedCPU(n *world.Node) int64 {
	var sum int64
	for _, p := range n.Pods() {
		sum += p.App.MilliCPU()
	}
	return sum
}
