package migrator

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"spotter.dev/spotter/internal/cloud"
	"spotter.dev/spotter/internal/drain"
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
		Help: "Requests for spot capacity that did not come, by node group: refused or reported short by the cloud, or not Ready in time; each cancelled and its group backed off.",
	}, []string{"node_group"})
	spotRequestErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "spotter", Subsystem: "migrator", Name: "spot_request_errors_total",
		Help: "Requests for spot capacity a node group refused for another reason than a shortage, by node group and kind: throttled (asked again after the cloud's Retry-After) or error (access denied, a malformed group; no backoff).",
	}, []string{"node_group", LabelKind})
	spotGivenBack = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "spotter", Subsystem: "migrator", Name: "spot_given_back_total",
		Help: "Instances a short request for spot capacity brought and Spotter deleted, by node group and kind: unregistered (running, but no Node that takes pods when the request ended) or unused (Ready, too few for the node's pods, and no pod on them).",
	}, []string{"node_group", LabelKind})
	leftOutGroups = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "spotter", Subsystem: "migrator", Name: "node_group_left_out",
		Help: "1 for each node group the cloud provider left out at the last run because it could not read or use it (a launch template that cannot be read, a launch configuration); the Event SpotterNodeGroupLeftOut says why.",
	}, []string{"node_group"})
	refusedGroups = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "spotter", Subsystem: "migrator", Name: "refused_node_groups_total",
		Help: "Node groups, and control planes outside them (a Cluster API KubeadmControlPlane), refused because they would put the control plane on spot, " +
			"by kind: node_group, control_plane, or unchecked when the check itself failed (counted per run).",
	}, []string{LabelKind})
	evictionRetries = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "spotter", Subsystem: "migrator", Name: "eviction_retries_total",
		Help: "Evictions from replaced nodes refused by a PodDisruptionBudget (HTTP 429) and retried.",
	})
	evictionsHeld = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "spotter", Subsystem: "migrator", Name: "evictions_held_total",
		Help: "Eviction attempts from replaced nodes held back, each asked again after a backoff: another pod under the same PodDisruptionBudget is on a node under a termination notice, " +
			"or the pod no longer fitted on spot and a node was added for it (top_ups_total).",
	})
	topUps = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "spotter", Subsystem: "migrator", Name: "top_ups_total",
		Help: "Spot nodes added during a drain, by node group: a pod still to be evicted no longer fitted on the spot capacity (other pods had taken the room asked for), " +
			"and the drain, which had evicted pods already, went on instead of being rolled back.",
	}, []string{"node_group"})
	drains = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "spotter", Subsystem: "migrator", Name: "drains_total",
		Help: "Drains of on-demand nodes being replaced by spot capacity, by outcome: started, succeeded, failed, rolled_back.",
	}, []string{drain.LabelOutcome})
	podsEvicted = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "spotter", Subsystem: "migrator", Name: "pods_evicted_total",
		Help: "Pods evicted by the drains of replaced nodes, those of drains that failed and the pods a consolidation moves off other on-demand nodes included.",
	})
)

// LabelKind is the label of spotter_migrator_refused_node_groups_total.
const LabelKind = "kind"

// Values of LabelKind.
const (
	KindNodeGroup    = "node_group"
	KindControlPlane = "control_plane"
	KindUnchecked    = "unchecked"
)

// Values of LabelKind on spotter_migrator_spot_request_errors_total.
const (
	labelThrottled = "throttled"
	labelError     = "error"
	// Kinds of spot_given_back_total.
	labelUnregistered = "unregistered"
	labelUnused       = "unused"
)

// refusedKind is the LabelKind value of a refusal of cloud.UsableNodeGroups.
func refusedKind(err error) string {
	var cp *cloud.ControlPlaneError
	switch {
	case !errors.As(err, &cp):
		return KindUnchecked
	case cp.Kind == cloud.KindControlPlane:
		return KindControlPlane
	}
	return KindNodeGroup
}

func init() {
	metrics.Registry.MustRegister(runs, nodesMigrated, spotUnavailable, spotRequestErrors, spotGivenBack, leftOutGroups, refusedGroups, evictionRetries, evictionsHeld, topUps, drains, podsEvicted)
	// Every outcome's series from the start: increase() does not count a
	// series' first sample, and SpotterMigrationsFailing would miss the
	// first failure after a restart.
	for _, o := range []string{drain.OutcomeStarted, drain.OutcomeSucceeded, drain.OutcomeFailed, drain.OutcomeRolledBack} {
		drains.WithLabelValues(o)
	}
}

// CountEvictionRetry counts one eviction refused by a PodDisruptionBudget;
// give it to the drain engine as drain.Options.OnEvictionRetry.
func CountEvictionRetry() { evictionRetries.Inc() }

// CountEvictionHeld counts one eviction held back (drain.ErrNotNow); give it
// to the drain engine as drain.Options.OnEvictionHeld.
func CountEvictionHeld() { evictionsHeld.Inc() }
