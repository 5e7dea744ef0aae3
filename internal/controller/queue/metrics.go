package queue

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	messages = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "spotter", Subsystem: "queue", Name: "messages_total",
		Help: "Messages read from the interruption queue, by outcome: handled, ignored (an event that asks nothing), malformed, foreign (an instance no node of this cluster has), duplicate (an event already handled); all these are deleted. failed: the cluster could not be read or written, the message comes back after the queue's visibility timeout.",
	}, []string{"outcome"})
	receiveErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "spotter", Subsystem: "queue", Name: "receive_errors_total",
		Help: "Failed reads of the interruption queue (retried with backoff up to a minute).",
	})
	lifecycleActions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "spotter", Subsystem: "queue", Name: "lifecycle_actions_total",
		Help: "Auto Scaling terminating lifecycle actions ended, by result: completed (CONTINUE, once the node was drained or gone, or at the deadline) or failed (Auto Scaling goes on at the hook's heartbeat timeout).",
	}, []string{"result"})
)

func init() {
	metrics.Registry.MustRegister(messages, receiveErrors, lifecycleActions)
	for _, o := range []string{OutcomeHandled, OutcomeIgnored, OutcomeMalformed, OutcomeForeign, OutcomeDuplicate, OutcomeFailed} {
		messages.WithLabelValues(o)
	}
}
