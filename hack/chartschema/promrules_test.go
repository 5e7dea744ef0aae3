package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// promrules runs hack/tools/promrules (Prometheus's own rule-file checks, in
// a module of its own) on files, and returns its exit error and output. An
// argument starting with "-" is a flag, passed as it is.
func promrules(t *testing.T, files ...string) (string, error) {
	t.Helper()
	for i, f := range files {
		if strings.HasPrefix(f, "-") {
			continue
		}
		abs, err := filepath.Abs(f)
		if err != nil {
			t.Fatal(err)
		}
		files[i] = abs
	}
	cmd := exec.Command("go", append([]string{"run", "."}, files...)...)
	cmd.Dir = filepath.Join(root, "hack/tools/promrules")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// The alerts the chart renders (the monitoring case of the render goldens,
// which TestChartRender keeps equal to Helm's output) load in Prometheus:
// every expression parses, every annotation template too. A broken rule is
// reported by name, so the check can fail.
func TestAlertsLoadInPrometheus(t *testing.T) {
	out, err := promrules(t, filepath.Join(root, "test/e2e/testdata/chart/render/monitoring.golden"))
	if err != nil || !strings.Contains(out, "rules valid") {
		t.Fatalf("the chart's PrometheusRule does not load: %v\n%s", err, out)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	rule := "kind: PrometheusRule\nmetadata: {name: bad}\nspec:\n  groups:\n  - name: g\n    rules:\n    - alert: Broken\n      expr: sum(rate(spotter_x[5m]) > 0\n"
	if err := os.WriteFile(bad, []byte(rule), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := promrules(t, bad); err == nil || !strings.Contains(out, `"Broken": could not parse expression`) {
		t.Errorf("a broken expression passed: %v\n%s", err, out)
	}
}

// The agent's alerts fire when they should and only then, on the rules as
// rendered (testdata/alert-tests.yaml, in promtool's test format, evaluated
// as Prometheus's rule manager does: pending, then firing after `for`). An
// expectation the rules do not meet fails, and so does a test of an alert
// the chart does not render, so that a renamed alert cannot pass unseen.
func TestAlertsFire(t *testing.T) {
	golden := filepath.Join(root, "test/e2e/testdata/chart/render/monitoring.golden")
	out, err := promrules(t, "-test", "testdata/alert-tests.yaml", golden)
	if err != nil || !strings.Contains(out, "7 alert tests passed") {
		t.Fatalf("the alert tests: %v\n%s", err, out)
	}

	wrong := filepath.Join(t.TempDir(), "wrong.yaml")
	tests := `tests:
  - name: up
    input_series:
      - series: 'spotter_agent_metadata_last_success_timestamp_seconds{namespace="spotter-system", pod="a", path="/p"}'
        values: '0+60x20'
    alert_rule_test:
      - eval_time: 20m
        alertname: SpotterAgentNotReadingNotices
        exp_alerts:
          - exp_labels: {pod: a, path: /p, severity: warning}
  - name: renamed
    alert_rule_test:
      - eval_time: 1m
        alertname: SpotterAgentBlind
`
	if err := os.WriteFile(wrong, []byte(tests), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = promrules(t, "-test", wrong, golden)
	if err == nil || !strings.Contains(out, `alert SpotterAgentNotReadingNotices at 20m0s: firing [], want [{path="/p", pod="a", severity="warning"}]`) {
		t.Errorf("an alert expected and not firing passed: %v\n%s", err, out)
	}
	if err == nil || !strings.Contains(out, "no alerting rule SpotterAgentBlind") {
		t.Errorf("a test of an alert the chart does not render passed: %v\n%s", err, out)
	}
}
