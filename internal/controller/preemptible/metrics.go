package preemptible

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"spotter.dev/spotter/internal/drain"
)

// Metrics of the preemptible controller, under spotter_preemptible_.
var (
	nodes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "spotter", Subsystem: "preemptible", Name: "nodes",
		Help: "Nodes of preemptible VMs by state at the last cycle: running (before their drain time), due (to be drained now), " +
			"drained (cordoned until their VM goes), ended (their run ended before they were drained), replaced (drained in an earlier boot).",
	}, []string{labelState})
	drains = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "spotter", Subsystem: "preemptible", Name: "drains_total",
		Help: "Drains of preemptible nodes before the end of their run, by outcome: started, succeeded, failed, rolled_back.",
	}, []string{drain.LabelOutcome})
	podsEvicted = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "spotter", Subsystem: "preemptible", Name: "pods_evicted_total",
		Help: "Pods evicted from preemptible nodes before the end of their run.",
	})
	evictionRetries = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "spotter", Subsystem: "preemptible", Name: "eviction_retries_total",
		Help: "Evictions from preemptible nodes refused by a PodDisruptionBudget (HTTP 429) and retried.",
	})
	notDrained = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "spotter", Subsystem: "preemptible", Name: "not_drained_total",
		Help: "Preemptible nodes whose run ended before they were drained (counted once per node and process); their pods were left to the preemption notice.",
	})
)

const labelState = "state"

func init() {
	metrics.Registry.MustRegister(nodes, drains, podsEvicted, evictionRetries, notDrained)
}

// CountEvictionRetry counts one eviction refused by a PodDisruptionBudget; give
// it to the drain engine as drain.Options.OnEvictionRetry.
func CountEvictionRetry() { evictionRetries.Inc() }
