package migrator

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	runs = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "spotter", Subsystem: "migrator", Name: "runs_total",
		Help: "Migration runs started.",
	})
	nodesMigrated = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "spotter", Subsystem: "migrator", Name: "nodes_migrated_total",
		Help: "On-demand nodes drained and deleted after their pods found spot capacity.",
	})
	spotUnavailable = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "spotter", Subsystem: "migrator", Name: "spot_unavailable_total",
		Help: "Requests for spot capacity that did not come in time and were cancelled, by node group.",
	}, []string{"node_group"})
	refusedGroups = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "spotter", Subsystem: "migrator", Name: "refused_node_groups_total",
		Help: "Node groups refused because they would put the control plane on spot (counted per run).",
	})
)

func init() {
	metrics.Registry.MustRegister(runs, nodesMigrated, spotUnavailable, refusedGroups)
}
