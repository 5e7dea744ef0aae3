package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = Main(args, Streams{In: strings.NewReader(""), Out: &out, Err: &errOut})
	return code, out.String(), errOut.String()
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestVersion(t *testing.T) {
	code, out, _ := run(t, "version")
	if code != 0 || !strings.HasPrefix(out, "spotter ") {
		t.Errorf("version: exit %d, %q", code, out)
	}
	code, out, _ = run(t, "version", "-o", "json")
	if code != 0 || !strings.Contains(out, `"goVersion"`) {
		t.Errorf("version -o json: exit %d, %q", code, out)
	}
	if code, _, errOut := run(t, "version", "-o", "xml"); code != 1 || !strings.Contains(errOut, "use text or json") {
		t.Errorf("version -o xml: exit %d, %q", code, errOut)
	}
}

func TestConfigDefaultsMatchesGolden(t *testing.T) {
	code, out, _ := run(t, "config", "defaults")
	want, err := os.ReadFile("../../pkg/apis/config/v1alpha1/testdata/defaults.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if code != 0 || out != string(want) {
		t.Errorf("config defaults: exit %d, output differs from the golden file:\n%s", code, out)
	}
	// What it prints is a valid configuration file.
	code, out, errOut := run(t, "config", "validate", "-f", writeFile(t, out))
	if code != 0 || !strings.HasSuffix(out, ": valid\n") {
		t.Errorf("validating the printed defaults: exit %d, %q %q", code, out, errOut)
	}
}

func TestConfigValidateListsEveryProblem(t *testing.T) {
	path := writeFile(t, `apiVersion: spotter.dev/v1alpha1
kind: SpotterConfiguration
rescheduler:
  intervall: 30s
drain:
  maxConcurrentEvictions: many
disruption:
  maxConcurrentDrains: 1000
agent:
  cloud: ibm
`)
	code, out, errOut := run(t, "config", "validate", "-f", path)
	if code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	if out != "" {
		t.Errorf("stdout %q, want nothing", out)
	}
	for _, want := range []string{
		"4 problem(s)",
		`rescheduler.intervall: Invalid value: "intervall": unknown field (did you mean "interval"?)`,
		`drain.maxConcurrentEvictions: Invalid value: "many": must be a whole number (line 6)`,
		`disruption.maxConcurrentDrains: Invalid value: 1000: must be between 1 and 100 (line 8)`,
		`agent.cloud: Unsupported value: "ibm": supported values: "auto", "aws", "gcp", "azure" (line 10)`,
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("output lacks %q:\n%s", want, errOut)
		}
	}
}

func TestConfigValidateUsageErrors(t *testing.T) {
	if code, _, errOut := run(t, "config", "validate"); code != 1 || !strings.Contains(errOut, "no file: give the configuration file to validate") {
		t.Errorf("no file: exit %d, %q", code, errOut)
	}
	if code, _, errOut := run(t, "config", "validate", "-f", "/nonexistent.yaml"); code != 1 || !strings.Contains(errOut, "no such file") {
		t.Errorf("missing file: exit %d, %q", code, errOut)
	}
}

func TestFlagsOverrideFile(t *testing.T) {
	path := writeFile(t, "apiVersion: spotter.dev/v1alpha1\nkind: SpotterConfiguration\nmanager:\n  metricsBindAddress: \":9000\"\n  leaderElection:\n    leaseNamespace: ops\n")
	load := func(args ...string) (*v1alpha1.SpotterConfiguration, error) {
		var o configOptions
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		o.addFlags(fs)
		if err := fs.Parse(append([]string{"-f", path}, args...)); err != nil {
			t.Fatal(err)
		}
		return o.load()
	}
	c, err := load()
	if err != nil {
		t.Fatal(err)
	}
	if c.Manager.MetricsBindAddress != ":9000" || c.DryRun || !*c.Manager.LeaderElection.Enabled {
		t.Errorf("without flags the file wins: %+v", c.Manager)
	}
	c, err = load("--metrics-bind-address=127.0.0.1:9100", "--dry-run", "--leader-elect=false")
	if err != nil {
		t.Fatal(err)
	}
	if c.Manager.MetricsBindAddress != "127.0.0.1:9100" || !c.DryRun || *c.Manager.LeaderElection.Enabled {
		t.Errorf("flags must override the file: dryRun=%v %+v", c.DryRun, c.Manager)
	}
	if c.Manager.LeaderElection.LeaseNamespace != "ops" {
		t.Errorf("a flag not given must leave the file's value: %q", c.Manager.LeaderElection.LeaseNamespace)
	}
	// A bad flag value is reported with the field it overrides.
	_, err = load("--metrics-bind-address=nonsense")
	if err == nil || !strings.Contains(err.Error(), "manager.metricsBindAddress") {
		t.Errorf("bad flag value: %v", err)
	}
	// Through the command line as well.
	code, _, errOut := run(t, "config", "validate", "-f", path, "--health-probe-bind-address", "x")
	if code != 1 || !strings.Contains(errOut, "manager.healthProbeBindAddress") {
		t.Errorf("exit %d, %q", code, errOut)
	}
}
