package spotfirst

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Decisions, the values of the metric's decision label.
const (
	// DecisionSteered: the gate taken off, the pod restricted to spot nodes.
	DecisionSteered = "steered"
	// DecisionReleased: the gate taken off, nothing else (the pod cannot run
	// on spot, would not be recreated by the fallback, or its workload needs
	// it now).
	DecisionReleased = "released"
	// DecisionFallback: the gate taken off, nothing else, because a pod of
	// the same owner waited for spot in vain.
	DecisionFallback = "fallback"
	// DecisionFellBack: a steered pod deleted after waiting FallbackAfter.
	DecisionFellBack = "fell_back"
)

var admitted = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: "spotter", Subsystem: "spot_first", Name: "pods_total",
	Help: "Pods the spot-first controller acted on, by decision: steered (to spot nodes), released (gate taken off, nothing else), fallback (released because a pod of the same owner waited in vain), fell_back (a steered pod deleted after waiting for spot).",
}, []string{"decision"})

func init() {
	metrics.Registry.MustRegister(admitted)
	for _, d := range []string{DecisionSteered, DecisionReleased, DecisionFallback, DecisionFellBack} {
		admitted.WithLabelValues(d)
	}
}
