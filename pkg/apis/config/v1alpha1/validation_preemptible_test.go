package v1alpha1

import (
	"strings"
	"testing"
)

func TestPreemptible(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       []string // nil means valid
	}{
		{"defaults, on", "preemptible:\n  enabled: true\n", nil},
		{"a shorter run for the lab", "preemptible:\n  enabled: true\n  maxRunTime: 10m\n  drainBefore: 9m\n  replacementTimeout: 10s\n", nil},
		{"more than Compute Engine's 24 hours", "preemptible:\n  maxRunTime: 25h\n", []string{
			`preemptible.maxRunTime: Invalid value: "25h0m0s": must be at most 24h: Compute Engine stops a preemptible VM after 24 hours`}},
		{"too short a run", "preemptible:\n  maxRunTime: 5m\n  drainBefore: 1m\n", []string{
			`preemptible.maxRunTime: Invalid value: "5m0s": must be between 10m0s and 24h0m0s`}},
		{"a margin as long as the run", "preemptible:\n  maxRunTime: 1h\n  drainBefore: 1h\n", []string{
			`preemptible.drainBefore: Invalid value: "1h0m0s": must be at most maxRunTime less 1m (59m0s)`}},
		{"a margin too short", "preemptible:\n  drainBefore: 30s\n", []string{
			`preemptible.drainBefore: Invalid value: "30s": must be at least 1m`}},
		{"no selector while on", "preemptible:\n  enabled: true\n  nodeSelectors: []\n", []string{
			"preemptible.nodeSelectors: Required value: the preemptible controller needs at least one selector"}},
		{"a bad selector", "preemptible:\n  nodeSelectors: [\"pool in (a\"]\n", []string{
			`preemptible.nodeSelectors[0]: Invalid value: "pool in (a": not a label selector`}},
		{"replacement timeout out of range", "preemptible:\n  replacementTimeout: 2h\n", []string{
			`preemptible.replacementTimeout: Invalid value: "2h0m0s": must be between 10s and 1h0m0s`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errs := Parse([]byte(header + tc.body))
			if len(errs) != len(tc.want) {
				t.Fatalf("got %d problem(s), want %d: %v", len(errs), len(tc.want), errs.ToAggregate())
			}
			for i, w := range tc.want {
				if !strings.Contains(errs[i].Error(), w) {
					t.Errorf("problem %d: %q, want it to contain %q", i, errs[i].Error(), w)
				}
			}
		})
	}
}

// The defaults select GKE's preemptible nodes, with Compute Engine's 24
// hours and an hour of margin; a margin shorter than a drain warns.
func TestPreemptibleDefaultsAndWarning(t *testing.T) {
	c := NewDefaults()
	p := c.Preemptible
	if *p.Enabled || len(p.NodeSelectors) != 1 || p.NodeSelectors[0] != "cloud.google.com/gke-preemptible=true" ||
		p.MaxRunTime.Duration.String() != "24h0m0s" || p.DrainBefore.Duration.String() != "1h0m0s" {
		t.Errorf("defaults: %+v", p)
	}
	if w := Warnings(c); len(w) != 0 {
		t.Errorf("defaults warn: %v", w)
	}
	c, errs := Parse([]byte(header + "preemptible:\n  enabled: true\n  drainBefore: 5m\ndrain:\n  timeout: 10m\n"))
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	if w := Warnings(c); len(w) != 1 || !strings.Contains(w[0], "preemptible.drainBefore (5m0s) is shorter than drain.timeout (10m0s)") {
		t.Errorf("warnings %v", w)
	}
}
