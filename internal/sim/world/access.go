package world

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	"spotter.dev/spotter/internal/sim/market"
	"spotter.dev/spotter/internal/sim/report"
	"spotter.dev/spotter/internal/sim/scenario"
)

// What the strategies and the hindsight rows read of the world, and the few
// things they may do to it beyond the API (api.go) and the cloud provider
// (api_provider.go).

// Namespaces are the world's Namespace objects.
func (w *World) Namespaces() []*corev1.Namespace { return w.nsObjs }

// Scenario is the scenario the world runs.
func (w *World) Scenario() *scenario.Scenario { return w.sc }

// Start is the time of the world's first step.
func (w *World) Start() time.Time { return w.start }

// Zones are the spot markets of the scenario's zones, in its order.
func (w *World) Zones() []*market.Zone { return w.zones }

// Lost reports whether the pod was on a node that terminated: it is gone,
// though its object stays until the node's loss is detected.
func (p *Pod) Lost() bool { return p.lost }

// MilliCPU is the CPU each of the app's pods requests, in millicores.
func (a *App) MilliCPU() int64 { return a.cpu }

// MemoryBytes is the memory each of the app's pods requests.
func (a *App) MemoryBytes() int64 { return a.mem }

// MilliCPU is each of the group's nodes' allocatable CPU, in millicores.
func (g *Group) MilliCPU() int64 { return g.cpu }

// MemoryBytes is each of the group's nodes' allocatable memory.
func (g *Group) MemoryBytes() int64 { return g.mem }

// Preempt gives a spot node its market's preemption notice now.
func (w *World) Preempt(n *Node) { w.notice(n, n.Group.zone) }

// RecordWastedEvictions counts evictions a strategy made in vain (a drain
// rolled back after them) in the run's result.
func (w *World) RecordWastedEvictions(n int) { w.m.wastedEvictions(n) }

// WatchSpread starts measuring the zone spread of the apps that spread over
// zones; fits says whether an app's pod fits an empty node of a group.
func (w *World) WatchSpread(ctx context.Context, fits func(context.Context, *App, *Group) (bool, error)) error {
	return w.m.watchSpread(ctx, fits)
}

// Observe measures the step that ends: costs, pods, evictions' effects.
func (w *World) Observe(step time.Duration) { w.m.observe(step) }

// Result is what the run measured, as the report's row of the strategy.
func (w *World) Result(strategy string, days float64) report.Result {
	return w.m.result(strategy, days)
}

// StaticFit is the autoscaler's cache of whether an app's pod fits an empty
// node of a group.
func (a *Autoscaler) StaticFit() *StaticFit { return a.static }

// NewPopulated builds the world of a scenario written for a test: each
// app's Low pods are created and those of app i bound to the node named
// nodes[i] ("" or none leaves them Pending), then a minute passes, so that
// they are Ready and the apps' desired scale is set.
func NewPopulated(sc *scenario.Scenario, nodes []string) (*World, error) {
	w, err := New(sc, 1, false)
	if err != nil {
		return nil, err
	}
	for i, a := range w.Apps {
		for k := range int(a.Low) {
			p := w.createPod(a, k)
			if i < len(nodes) && nodes[i] != "" {
				w.bind(p, w.NodeByName(nodes[i]))
			}
		}
	}
	w.Clock.Step(time.Minute)
	w.Advance()
	return w, nil
}
