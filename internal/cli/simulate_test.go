package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestSimulateCommand(t *testing.T) {
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	code := Main([]string{"simulate", "--duration", "6h", "--strategies", "none,spotter", "--out", dir}, Streams{Out: &out, Err: &errOut})
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
	for _, want := range []string{"STRATEGY", "all-on-demand", "none", "spotter", "Report: ",
		"Open it in a browser (self-contained, works offline): file://" + filepath.ToSlash(filepath.Join(dir, "report.html")) + "\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	// Not a terminal: no bar, one final line.
	if errOut.String() != "simulation done\n" {
		t.Errorf("stderr %q", errOut.String())
	}
	for _, f := range []string{"report.json", "report.html"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// --matrix prints one line per variant of the scenarios it runs, the count
// of runs where Spotter is ahead, and writes matrix.json.
func TestSimulateMatrix(t *testing.T) {
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	code := Main([]string{"simulate", "--matrix", "--matrix-scenarios", "gcp-1node", "--duration", "2h", "--out", dir}, Streams{Out: &out, Err: &errOut})
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
	for _, want := range []string{"SCENARIO", "gcp-1node", "as-built", "slow", "hazard", "Spotter saved at least as much as the migrator model in ", "Matrix: " + filepath.Join(dir, "matrix.json")} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if !strings.Contains(errOut.String(), "[16/16] gcp-1node, hazard, seed 4: spotter ") {
		t.Errorf("progress %q: want a line per run", errOut.String())
	}
	if fi, err := os.Stat(filepath.Join(dir, "matrix.json")); err != nil || fi.Size() == 0 {
		t.Errorf("matrix.json: %v", err)
	}
}

// Without --config the spotter row runs the recommended configuration (the
// migrator on); with a file of the defaults, the migrator stays off and the
// row differs.
func TestSimulateRunsTheRecommendedConfiguration(t *testing.T) {
	row := func(args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		args = append([]string{"simulate", "--duration", "24h", "--strategies", "spotter", "--out", t.TempDir()}, args...)
		if code := Main(args, Streams{Out: &out, Err: &errOut}); code != 0 {
			t.Fatalf("exit %d\n%s\n%s", code, out.String(), errOut.String())
		}
		for _, line := range strings.Split(out.String(), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "spotter ") {
				return line
			}
		}
		t.Fatalf("no spotter row:\n%s", out.String())
		return ""
	}
	defaults := filepath.Join(t.TempDir(), "defaults.yaml")
	if err := os.WriteFile(defaults, []byte("apiVersion: spotter.dev/v1alpha1\nkind: SpotterConfiguration\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	recommended := filepath.Join(t.TempDir(), "recommended.yaml")
	if err := os.WriteFile(recommended, []byte("apiVersion: spotter.dev/v1alpha1\nkind: SpotterConfiguration\nmigrator:\n  enabled: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	without, withDefaults, withRecommended := row(), row("--config", defaults), row("--config", recommended)
	if without != withRecommended {
		t.Errorf("without --config:\n%s\nwith the recommended file:\n%s", without, withRecommended)
	}
	if without == withDefaults {
		t.Errorf("the defaults gave the same row as the recommended configuration:\n%s", without)
	}
}

func TestSimulateErrors(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("apiVersion: spotter.dev/v1alpha1\nkind: SimulationScenario\nzones: [{name: a, spotCapacity: {nodes: -1}}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"simulate", "--strategies", "karpenter"}, `unknown strategy "karpenter"`},
		{[]string{"simulate", "--duration", "soon"}, `--duration: "soon" is not a duration`},
		{[]string{"simulate", "--scenario", bad}, "zones[0].spotCapacity.nodes: Invalid value: -1"},
		{[]string{"simulate", "--scenario", bad}, "nodeGroups: Required value"},
		{[]string{"simulate", "--matrix-scenarios", "default"}, "add --matrix"},
		{[]string{"simulate", "--matrix", "--seed", "2"}, "leave out --scenario, --from-cluster, --seed"},
		{[]string{"simulate", "--matrix", "--strategies", "spotter"}, "leave out --strategies"},
		{[]string{"simulate", "--matrix", "--matrix-scenarios", "nope", "--out", t.TempDir()}, `scenario "nope"`},
	} {
		var out, errOut bytes.Buffer
		if code := Main(tc.args, Streams{Out: &out, Err: &errOut}); code != 1 || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", tc.args, code, errOut.String(), tc.want)
		}
	}
}

func TestParseDays(t *testing.T) {
	for in, want := range map[string]time.Duration{"7d": 168 * time.Hour, "1d12h": 36 * time.Hour, "90m": 90 * time.Minute} {
		if got, err := parseDays(in); err != nil || got != want {
			t.Errorf("parseDays(%q) = %s, %v", in, got, err)
		}
	}
}

// The closing line says how long the simulation covered, also under a day.
func TestSimulatedTime(t *testing.T) {
	for days, want := range map[float64]string{7: "7 days", 1: "1 day", 1.5: "36 hours", 1.0 / 24: "1 hour", 90.0 / 1440: "90 minutes", 1.0 / 1440: "1 minute"} {
		if got := simulatedTime(days); got != want {
			t.Errorf("simulatedTime(%v) = %q, want %q", days, got, want)
		}
	}
}

func TestMemTotal(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"MemTotal:       24609876 kB\nMemFree:         1234 kB\n", 24609876 * 1024, true},
		{"MemFree:         1234 kB\nMemTotal: 2048 kB\n", 2048 * 1024, true},
		{"MemFree:         1234 kB\n", 0, false},
		{"MemTotal: lots kB\n", 0, false},
		{"MemTotal: 0 kB\n", 0, false},
	} {
		got, ok := memTotal(strings.NewReader(c.in))
		if ok != c.ok || (ok && got != c.want) {
			t.Errorf("memTotal(%q) = %d, %v; want %d, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func TestCgroupLimit(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"2147483648\n", 2147483648, true},
		{"max\n", 0, false},
		{"", 0, false},
		{"0\n", 0, false},
	} {
		got, ok := cgroupLimit(c.in)
		if ok != c.ok || (ok && got != c.want) {
			t.Errorf("cgroupLimit(%q) = %d, %v; want %d, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}
