package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// promrules runs hack/tools/promrules (Prometheus's own rule-file checks, in
// a module of its own) on files, and returns its exit error and output.
func promrules(t *testing.T, files ...string) (string, error) {
	t.Helper()
	for i, f := range files {
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
