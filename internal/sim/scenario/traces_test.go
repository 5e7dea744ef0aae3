package scenario_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"spotter.dev/spotter/internal/sim/scenario"
)

// A trace may carry the spot price at each tick ("prices", as the AWS 1-node
// preemption traces of spot-traces do); fields the simulator does not read
// are warnings, not errors: the format grows.
func TestTraceWithPricesAndUnknownFields(t *testing.T) {
	tr, err := scenario.ParseTrace([]byte(`{"metadata": {"gap_seconds": 60, "instance_type": "r5.16xlarge"},
		"data": [1, 1, 0, 1], "prices": [1.0, 3.0, 2.0, 2.0], "source": "aws"}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Prices) != 4 || tr.PriceFactor(0) != 0.5 || tr.PriceFactor(time.Minute) != 1.5 || tr.PriceFactor(5*time.Minute) != 1.5 {
		t.Errorf("prices %v, factors %v %v", tr.Prices, tr.PriceFactor(0), tr.PriceFactor(time.Minute))
	}
	want := []string{`unknown field "source" ignored`, `unknown field "metadata.instance_type" ignored`}
	if !slices.Equal(tr.Warnings, want) {
		t.Errorf("warnings %q, want %q", tr.Warnings, want)
	}
	plain, err := scenario.ParseTrace([]byte(`{"metadata": {"gap_seconds": 60}, "data": [1]}`))
	if err != nil || plain.Prices != nil || plain.Warnings != nil || plain.PriceFactor(0) != 1 {
		t.Errorf("a trace without prices: %+v, %v", plain, err)
	}

	for _, tc := range []struct{ body, want string }{
		{`{"metadata": {"gap_seconds": 60}, "data": [1, 2], "prices": [1]}`, "prices has 1 entries, data 2"},
		{`{"metadata": {"gap_seconds": 60}, "data": [1, 2], "prices": [1, 0]}`, "prices[1] is 0: must be a price above 0"},
		{`{"metadata": {"gap_seconds": 60}, "data": [1], "prices": [-2]}`, "prices[0] is -2"},
		{`{"metadata": {"gap_seconds": 60}, "data": [1], "prices": ["1"]}`, "not a trace file"},
		{`{"metadata": {"gap_seconds": 60}, "data": [1]} trailing`, "not a trace file"},
		{`{"metadata": {"gap": 60}, "data": [1]}`, "metadata.gap_seconds must be"},
	} {
		if _, err := scenario.ParseTrace([]byte(tc.body)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.body, err, tc.want)
		}
	}
}
