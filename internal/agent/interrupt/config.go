package interrupt

import (
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"spotter.dev/spotter/internal/agent/notice"
	"spotter.dev/spotter/internal/drain"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// FromConfig returns the Handler of node that spotter-agent runs with cfg
// (its agent and drain sections), and its drainer: `spotter-agent` and
// `spotter simulate` both build it here. ack and recorder may be nil.
func FromConfig(client kubernetes.Interface, clk clock.Clock, recorder events.EventRecorder, ack notice.Acknowledger, cfg *v1alpha1.SpotterConfiguration, node string, dryRun bool) *Handler {
	return ForComponent(Component, client, clk, recorder, ack, cfg, node, dryRun)
}

// ForComponent is FromConfig for another component than the agent: the
// controller's interruption queue handles notices with the agent's rules
// and configuration, under its own name (Options.Component).
func ForComponent(component string, client kubernetes.Interface, clk clock.Clock, recorder events.EventRecorder, ack notice.Acknowledger, cfg *v1alpha1.SpotterConfiguration, node string, dryRun bool) *Handler {
	a := cfg.Agent
	drainer := drain.New(client, clk, recorder, drain.Options{
		Component:              component,
		MaxConcurrentEvictions: int(cfg.Drain.MaxConcurrentEvictions),
		Timeout:                cfg.Drain.Timeout.Duration,
		MaxGracePeriod:         cfg.Drain.MaxGracePeriod.Duration,
		Backoff:                cfg.Drain.EvictionBackoff.Duration,
		MaxBackoff:             cfg.Drain.MaxEvictionBackoff.Duration,
		// The agent evicts many pods at once: the deadline is short.
		PollInterval: 250 * time.Millisecond,
		DryRun:       dryRun,
	})
	defaults := v1alpha1.NewDefaults().Agent
	return New(client, drainer, clk, recorder, ack, Options{
		Node:              node,
		Component:         component,
		DeadlineMargin:    ptr.Deref(a.DeadlineMargin, *defaults.DeadlineMargin).Duration,
		RebalanceAction:   a.RebalanceAction,
		MaintenanceAction: a.MaintenanceAction,
		Acknowledge:       ptr.Deref(a.AcknowledgeAzureEvents, *defaults.AcknowledgeAzureEvents),
		DryRun:            dryRun,
	})
}
