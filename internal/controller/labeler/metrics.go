package labeler

import (
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"spotter.dev/spotter/internal/classify"
)

// nodesByClass is spotter_nodes{class}: the labeler sees every node, so it
// keeps the count.
var nodesByClass = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Namespace: "spotter",
	Name:      "nodes",
	Help:      "Nodes by class: spot, on-demand, control-plane, excluded, unknown.",
}, []string{labelClass})

const labelClass = "class"

// controlPlaneOnSpot is spotter_control_plane_on_spot_nodes: control-plane
// nodes that also look like spot. Spotter never uses them as spot; the count
// should be 0.
var controlPlaneOnSpot = prometheus.NewGauge(prometheus.GaugeOpts{
	Namespace: "spotter",
	Name:      "control_plane_on_spot_nodes",
	Help:      "Control-plane nodes that also carry spot markers: an error in the cluster's setup; Spotter never uses them as spot.",
})

func init() {
	metrics.Registry.MustRegister(nodesByClass, controlPlaneOnSpot)
}

// classCounter remembers each node's class and keeps nodesByClass (and
// controlPlaneOnSpot) in step.
type classCounter struct {
	mu     sync.Mutex
	nodes  map[string]classify.Class
	warned map[string]bool // control-plane nodes on spot
	logged map[string]bool // those of them named in the log
}

func newClassCounter() *classCounter {
	for _, c := range []classify.Class{classify.Spot, classify.OnDemand, classify.ControlPlane, classify.Excluded, classify.Unknown} {
		nodesByClass.WithLabelValues(string(c)).Set(0)
	}
	controlPlaneOnSpot.Set(0)
	return &classCounter{nodes: map[string]classify.Class{}, warned: map[string]bool{}, logged: map[string]bool{}}
}

// warn records whether node is a control-plane node on spot, and reports
// whether that is new (so that it is said once in an Event).
func (c *classCounter) warn(node string, onSpot bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.warned[node] == onSpot {
		return false
	}
	if onSpot {
		c.warned[node] = true
		controlPlaneOnSpot.Inc()
	} else {
		delete(c.warned, node)
		delete(c.logged, node)
		controlPlaneOnSpot.Dec()
	}
	return onSpot
}

// unlogged returns, sorted, all of names when any of them was not logged yet
// (and records them as logged), else nothing.
func (c *classCounter) unlogged(names []string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	fresh := false
	for _, n := range names {
		fresh = fresh || !c.logged[n]
		c.logged[n] = true
	}
	if !fresh {
		return nil
	}
	slices.Sort(names)
	return names
}

func (c *classCounter) set(node string, class classify.Class) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.nodes[node]; ok {
		if old == class {
			return
		}
		nodesByClass.WithLabelValues(string(old)).Dec()
	}
	c.nodes[node] = class
	nodesByClass.WithLabelValues(string(class)).Inc()
}

func (c *classCounter) forget(node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.nodes[node]; ok {
		nodesByClass.WithLabelValues(string(old)).Dec()
		delete(c.nodes, node)
	}
	delete(c.logged, node)
	if c.warned[node] {
		delete(c.warned, node)
		controlPlaneOnSpot.Dec()
	}
}
