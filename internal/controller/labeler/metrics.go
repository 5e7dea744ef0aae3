package labeler

import (
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

func init() {
	metrics.Registry.MustRegister(nodesByClass)
}

// classCounter remembers each node's class and keeps nodesByClass in step.
type classCounter struct {
	mu    sync.Mutex
	nodes map[string]classify.Class
}

func newClassCounter() *classCounter {
	for _, c := range []classify.Class{classify.Spot, classify.OnDemand, classify.ControlPlane, classify.Excluded, classify.Unknown} {
		nodesByClass.WithLabelValues(string(c)).Set(0)
	}
	return &classCounter{nodes: map[string]classify.Class{}}
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
}
