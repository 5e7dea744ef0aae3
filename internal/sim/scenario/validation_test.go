package scenario_test

import (
	"strings"
	"testing"

	"spotter.dev/spotter/internal/sim/simtest"
)

// hazard is refused without a trace, and stockOutDelay beyond an hour.
func TestMarketFieldsValidated(t *testing.T) {
	for body, want := range map[string]string{
		strings.Replace(simtest.Tiny, "{nodes: 3}}", "{nodes: 3}, preemptions: {ratePerNodeHour: 0.1, hazard: true}}", 1): "zones[1].preemptions.hazard: Invalid value: true: only with a trace",
		strings.Replace(simtest.Tiny, "{nodes: 3}", "{nodes: 3, stockOutDelay: 2h}", 1):                                   "zones[1].spotCapacity.stockOutDelay: Invalid value: \"2h0m0s\": must be between 0s and 1h0m0s",
	} {
		if _, err := simtest.Parse(t, body); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want %q", err, want)
		}
	}
}
