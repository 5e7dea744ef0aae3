package interrupt

import "github.com/prometheus/client_golang/prometheus"

// Label names.
const (
	labelCloud = "cloud"
	labelKind  = "kind"
)

var (
	noticesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "spotter", Subsystem: "agent", Name: "notices_total",
		Help: "Interruption notices received, by cloud and kind (termination, rebalance, maintenance).",
	}, []string{labelCloud, labelKind})
	cordonSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "spotter", Subsystem: "agent", Name: "notice_to_cordon_seconds",
		Help:    "Time from a notice's arrival to its node being tainted NoSchedule and cordoned.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
	})
	drainSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "spotter", Subsystem: "agent", Name: "drain_duration_seconds",
		Help:    "Duration of the drains started by notices, by notice kind.",
		Buckets: []float64{1, 2.5, 5, 10, 15, 20, 25, 30, 45, 60, 90, 120, 300},
	}, []string{labelKind})
	podsEvicted = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "spotter", Subsystem: "agent", Name: "pods_evicted_total",
		Help: "Pods evicted through the Eviction API by the agent's drains.",
	})
	podsDeleted = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "spotter", Subsystem: "agent", Name: "pods_deleted_total",
		Help: "Pods deleted by the agent's drains because their eviction was still refused as the deadline neared.",
	})
	deadlineMisses = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "spotter", Subsystem: "agent", Name: "deadline_misses_total",
		Help: "Drains that did not empty the node before the notice's deadline less the margin.",
	})
)

// MustRegister registers the agent's metrics with reg.
func MustRegister(reg prometheus.Registerer) {
	reg.MustRegister(noticesTotal, cordonSeconds, drainSeconds, podsEvicted, podsDeleted, deadlineMisses)
}
