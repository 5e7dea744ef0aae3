package sim

import (
	"strings"
	"testing"

	"spotter.dev/spotter/internal/sim/simtest"
)

// Offsets and durations that would overflow the simulator's arithmetic are
// refused with their paths; within the limits, any offset runs.
func TestOffsetsAndDurationsInRange(t *testing.T) {
	for _, tc := range []struct{ edit, want string }{
		{"{trace: builtin:availability/16-node/aws-08-27-2023/us-east-2b_v100_1.json}",
			"zones[0].spotCapacity.offset: Invalid value: \"2562047h0m0s\": must be between 0s and 8760h0m0s"},
		{"preemptions: {trace: builtin:preemption/4-node/aws-08-03-2023/us-east-2a_v100_1.json}",
			"zones[0].preemptions.offset: Invalid value: \"2562047h0m0s\": must be between 0s and 8760h0m0s"},
	} {
		edited := strings.Replace(simtest.Tiny, tc.edit, strings.Replace(tc.edit, "json}", "json, offset: 2562047h}", 1), 1)
		if _, err := simtest.Parse(t, edited); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want %q", err, tc.want)
		}
	}
	for _, tc := range []struct{ edit, want string }{
		{"{nodes: 3, shortagesPerDay: 1, shortageDuration: 2562047h}", "zones[1].spotCapacity.shortageDuration: Invalid value: \"2562047h0m0s\": must be between 1m0s and 720h0m0s"},
		{"{nodes: 3, shortagesPerDay: 1, shortageDuration: 0s}", "zones[1].spotCapacity.shortageDuration: Invalid value: \"0s\": must be between 1m0s and 720h0m0s"},
	} {
		if _, err := simtest.Parse(t, strings.Replace(simtest.Tiny, "{nodes: 3}", tc.edit, 1)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want %q", err, tc.want)
		}
	}

	// The largest offsets run, and so does a rare synthetic shortage.
	body := strings.Replace(simtest.Tiny, "us-east-2b_v100_1.json}", "us-east-2b_v100_1.json, offset: 8760h}", 1)
	body = strings.Replace(body, "us-east-2a_v100_1.json}", "us-east-2a_v100_1.json, offset: 8759h59m59s}", 1)
	body = strings.Replace(body, "{nodes: 3}", "{nodes: 3, shortagesPerDay: 1e-300}", 1)
	sc, err := simtest.Parse(t, body)
	if err != nil {
		t.Fatal(err)
	}
	run(t, sc, "spotter")
}
