package strategy

import (
	"testing"

	"spotter.dev/spotter/internal/agent/interrupt"
	"spotter.dev/spotter/internal/sim/report"
)

// The report names the agent's evictions without importing the agent: the
// name must stay the one the agent's drains are labelled with.
func TestAgentComponentName(t *testing.T) {
	if want := "spotter-" + interrupt.Component; report.ComponentAgent != want {
		t.Errorf("report.ComponentAgent = %q, the agent's drains are labelled %q", report.ComponentAgent, want)
	}
}
