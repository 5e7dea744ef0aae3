package cli

import (
	"os"
	"strings"
	"testing"
)

// A bad flag value is reported as the flag's, not at the line of the file that
// the flag overrides.
func TestConfigValidateNamesTheFlag(t *testing.T) {
	path := writeFile(t, "apiVersion: spotter.dev/v1alpha1\nkind: SpotterConfiguration\nmanager:\n  metricsBindAddress: \":9000\"\n")
	code, _, errOut := run(t, "config", "validate", "-f", path, "--metrics-bind-address", "bad")
	if code != 1 || !strings.Contains(errOut, `manager.metricsBindAddress: Invalid value: "bad"`) ||
		!strings.Contains(errOut, "(from --metrics-bind-address)") || strings.Contains(errOut, "line 4") {
		t.Errorf("exit %d, %q", code, errOut)
	}
	// Without a file too.
	code, _, errOut = run(t, "config", "validate", "-f", writeFile(t, "apiVersion: spotter.dev/v1alpha1\nkind: SpotterConfiguration\n"), "--health-probe-bind-address", "x")
	if code != 1 || !strings.Contains(errOut, "(from --health-probe-bind-address)") {
		t.Errorf("exit %d, %q", code, errOut)
	}
	// The file's own problems keep their lines.
	path = writeFile(t, "apiVersion: spotter.dev/v1alpha1\nkind: SpotterConfiguration\nmanager:\n  metricsBindAddress: \"nonsense\"\n")
	code, _, errOut = run(t, "config", "validate", "-f", path, "--dry-run")
	if code != 1 || !strings.Contains(errOut, "(line 4)") || strings.Contains(errOut, "from --") {
		t.Errorf("exit %d, %q", code, errOut)
	}
}

// A configuration that never ends (/dev/zero) is refused at once, naming the
// limit, by every command that reads one.
func TestConfigFilesAreBounded(t *testing.T) {
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip("no /dev/zero")
	}
	for _, args := range [][]string{
		{"config", "validate", "-f", "/dev/zero"},
		{"plan", "--config", "/dev/zero", "--snapshot", "/nonexistent"},
		{"simulate", "--config", "/dev/zero"},
	} {
		code, _, errOut := run(t, args...)
		if code != 1 || !strings.Contains(errOut, "the configuration file is larger than 1 MiB, the limit") {
			t.Errorf("%v: exit %d, %q", args, code, errOut)
		}
	}
}

// The file to validate is the argument or -f, not both unless they agree; a
// bad one is named.
func TestConfigValidateTakesTheFileAsArgument(t *testing.T) {
	good := writeFile(t, "apiVersion: spotter.dev/v1alpha1\nkind: SpotterConfiguration\n")
	bad := writeFile(t, "apiVersion: spotter.dev/v1alpha1\nkind: SpotterConfiguration\nmanager:\n  metricsBindAddress: \"nonsense\"\n")
	for _, tc := range []struct {
		args    []string
		code    int
		out     string
		errWant string
	}{
		{args: []string{good}, out: good + ": valid"},
		{args: []string{"-f", good}, out: good + ": valid"},
		{args: []string{good, "-f", good}, out: good + ": valid"},
		{args: []string{bad}, code: 1, errWant: "(line 4)"},
		{args: []string{good, "-f", bad}, code: 1, errWant: "two files, " + bad + " (-f) and " + good},
		{args: nil, code: 1, errWant: "no file: give the configuration file to validate as the argument"},
		{args: []string{good, bad}, code: 1, errWant: "accepts at most 1 arg"},
	} {
		code, out, errOut := run(t, append([]string{"config", "validate"}, tc.args...)...)
		if code != tc.code || !strings.Contains(out, tc.out) || !strings.Contains(errOut, tc.errWant) {
			t.Errorf("config validate %v: exit %d, stdout %q, stderr %q", tc.args, code, out, errOut)
		}
	}
}
