package rescheduler

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"spotter.dev/spotter/internal/drain"
)

// Metrics of the rescheduler, under spotter_rescheduler_.
var (
	drains = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "spotter", Subsystem: "rescheduler", Name: "drains_total",
		Help: "Node drains by outcome: started, succeeded, failed, rolled_back.",
	}, []string{drain.LabelOutcome})
	podsEvicted = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "spotter", Subsystem: "rescheduler", Name: "pods_evicted_total",
		Help: "Pods evicted from on-demand nodes.",
	})
	evictionRetries = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "spotter", Subsystem: "rescheduler", Name: "eviction_retries_total",
		Help: "Evictions refused by a PodDisruptionBudget (HTTP 429) and retried.",
	})
	evictionsHeld = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "spotter", Subsystem: "rescheduler", Name: "evictions_held_total",
		Help: "Eviction attempts held back, each asked again after a backoff, because another pod under the same PodDisruptionBudget is on a node under a termination notice.",
	})
	planDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "spotter", Subsystem: "rescheduler", Name: "plan_duration_seconds",
		Help:    "Time to compute one plan.",
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 14),
	})
	drainableNodes = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "spotter", Subsystem: "rescheduler", Name: "drainable_nodes",
		Help: "On-demand nodes with pods to move that the last plan found could be emptied onto spot (a node with nothing to move needs no drain).",
	})
	planErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "spotter", Subsystem: "rescheduler", Name: "plan_errors_total",
		Help: "Cycles that made no plan, by stage: read (the cluster could not be read from the cache) or plan (the planner failed).",
	}, []string{labelStage})
	hourlySavings = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "spotter", Subsystem: "rescheduler", Name: "estimated_hourly_savings",
		Help: "On-demand price per hour of the nodes counted by drainable_nodes, when prices are configured.",
	})
)

const labelStage = "stage"

func init() {
	metrics.Registry.MustRegister(drains, podsEvicted, evictionRetries, evictionsHeld, planDuration, planErrors, drainableNodes, hourlySavings)
}

// CountEvictionHeld counts one eviction held back (drain.ErrNotNow); give it
// to the drain engine as drain.Options.OnEvictionHeld.
func CountEvictionHeld() { evictionsHeld.Inc() }

// CountEvictionRetry counts one eviction refused by a PodDisruptionBudget; give
// it to the drain engine as drain.Options.OnEvictionRetry.
func CountEvictionRetry() { evictionRetries.Inc() }
