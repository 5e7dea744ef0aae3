package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A --duration too large for a time.Duration is refused, not wrapped round to
// a small one that passes validation (213505d wraps to about 24 hours).
func TestParseDaysRefusesOverflow(t *testing.T) {
	for _, in := range []string{"213505d", "106752d", "1d2562047h", "106751d23h59m59s"} {
		if d, err := parseDays(in); err == nil {
			t.Errorf("parseDays(%q) = %s, want an error", in, d)
		} else if !strings.Contains(err.Error(), "too long") {
			t.Errorf("parseDays(%q): %v", in, err)
		}
	}
	if d, err := parseDays("30d"); err != nil || d != 720*time.Hour {
		t.Errorf("30d: %s %v", d, err)
	}
	for _, in := range []string{"-1d", "d", "1d-2h", ""} {
		if d, err := parseDays(in); err == nil {
			t.Errorf("parseDays(%q) = %s, want an error", in, d)
		}
	}
	code, out, errOut := run(t, "simulate", "--duration", "213505d", "--strategies", "none", "--out", t.TempDir())
	if code != 1 || !strings.Contains(errOut, "--duration") || out != "" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// An --out folder that cannot be written is reported before the run, not
// after it.
func TestSimulateChecksOutBeforeTheRun(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run(t, "simulate", "--duration", "1h", "--strategies", "none", "--out", filepath.Join(file, "report"))
	if code != 1 || !strings.Contains(errOut, "--out "+filepath.Join(file, "report")+": cannot write the report there") {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
	if out != "" || strings.Contains(errOut, "simulation done") {
		t.Errorf("the simulation ran before the check: stdout %q, stderr %q", out, errOut)
	}
}

// A scenario that never ends is refused at its limit.
func TestSimulateScenarioIsBounded(t *testing.T) {
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip("no /dev/zero")
	}
	code, _, errOut := run(t, "simulate", "--scenario", "/dev/zero", "--out", t.TempDir())
	if code != 1 || !strings.Contains(errOut, "the scenario file is larger than 1 MiB, the limit") {
		t.Errorf("exit %d, %q", code, errOut)
	}
}
