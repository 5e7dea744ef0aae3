package app

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

func TestFlagsOverrideConfigFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	body := "apiVersion: spotter.dev/v1alpha1\nkind: SpotterConfiguration\nagent:\n  cloud: aws\n  metadataEndpoint: http://127.0.0.1:1\n"
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("NODE_NAME", "from-env")

	o, err := ParseFlags([]string{"--config", path}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if o.NodeName != "from-env" {
		t.Errorf("--node-name default = %q, want $NODE_NAME", o.NodeName)
	}
	c, err := o.Config()
	if err != nil {
		t.Fatal(err)
	}
	if c.Agent.Cloud != v1alpha1.CloudAWS || c.Agent.MetadataEndpoint != "http://127.0.0.1:1" || c.Agent.DryRun {
		t.Errorf("file values lost: %+v", c.Agent)
	}

	if c.Agent.HealthProbeBindAddress != ":9103" || c.Agent.ReadinessFailureThreshold != 3 {
		t.Errorf("health probe defaults: %q, threshold %d", c.Agent.HealthProbeBindAddress, c.Agent.ReadinessFailureThreshold)
	}

	o, err = ParseFlags([]string{"--config", path, "--cloud", "gcp", "--metadata-endpoint", "http://127.0.0.1:2", "--dry-run",
		"--health-probe-bind-address", "0"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if c, err = o.Config(); err != nil {
		t.Fatal(err)
	}
	if c.Agent.Cloud != v1alpha1.CloudGCP || c.Agent.MetadataEndpoint != "http://127.0.0.1:2" || !c.Agent.DryRun || c.Agent.HealthProbeBindAddress != "0" {
		t.Errorf("flags must override the file: %+v", c.Agent)
	}

	o, err = ParseFlags([]string{"--cloud", "ibm"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.Config(); err == nil || !strings.Contains(err.Error(), `agent.cloud: Unsupported value: "ibm"`) {
		t.Errorf("bad --cloud: %v", err)
	}
	if _, err := ParseFlags([]string{"extra"}, &bytes.Buffer{}); err == nil {
		t.Error("positional arguments accepted")
	}
}

func TestMainUsageErrors(t *testing.T) {
	t.Setenv("NODE_NAME", "")
	var out, errOut bytes.Buffer
	if code := Main(context.Background(), []string{"--version"}, &out, &errOut); code != 0 || !strings.HasPrefix(out.String(), "spotter ") {
		t.Errorf("--version: exit %d, %q", code, out.String())
	}
	errOut.Reset()
	if code := Main(context.Background(), []string{"--kubeconfig", "x"}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "--node-name is required") {
		t.Errorf("no node name: exit %d, %q", code, errOut.String())
	}
	errOut.Reset()
	if code := Main(context.Background(), []string{"--no-such-flag"}, &out, &errOut); code != 1 {
		t.Errorf("unknown flag: exit %d, %q", code, errOut.String())
	}
}

// Credentials in the metadata endpoint are refused before anything reads,
// logs or echoes it, with an error that names where it came from and never
// shows them.
func TestMetadataEndpointCredentialsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	body := "apiVersion: spotter.dev/v1alpha1\nkind: SpotterConfiguration\nagent:\n  metadataEndpoint: http://admin:s3cret@127.0.0.1:1\n"
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{name: "flag", args: []string{"--metadata-endpoint", "http://admin:s3cret@127.0.0.1:1"}, want: "--metadata-endpoint"},
		{name: "flag, malformed URL", args: []string{"--metadata-endpoint", "http://admin:s3cret@127.0.0.1:port"}, want: "--metadata-endpoint"},
		{name: "flag, no scheme", args: []string{"--metadata-endpoint", "admin:s3cret@127.0.0.1"}, want: "--metadata-endpoint"},
		{name: "flag overriding a file", args: []string{"--config", path, "--metadata-endpoint", "http://admin:s3cret@127.0.0.1:2"}, want: "--metadata-endpoint"},
		{name: "file", args: []string{"--config", path}, want: "agent.metadataEndpoint in " + path},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			args := append([]string{"--node-name", "n", "--kubeconfig", filepath.Join(t.TempDir(), "none")}, tc.args...)
			code := Main(context.Background(), args, &out, &errOut)
			if code != 1 || !strings.Contains(errOut.String(), tc.want) || !strings.Contains(errOut.String(), "credentials") {
				t.Errorf("exit %d, %q; want 1 and an error naming %s and the credentials", code, errOut.String(), tc.want)
			}
			if all := out.String() + errOut.String(); strings.Contains(all, "s3cret") || strings.Contains(all, "admin") {
				t.Errorf("the credentials are shown: %q", all)
			}
		})
	}
	// Without credentials, the endpoint passes and the next step fails.
	var out, errOut bytes.Buffer
	code := Main(context.Background(), []string{"--node-name", "n", "--kubeconfig", filepath.Join(t.TempDir(), "none"),
		"--metadata-endpoint", "http://127.0.0.1:1"}, &out, &errOut)
	if code != 1 || !strings.Contains(errOut.String(), "reading kubeconfig") {
		t.Errorf("exit %d, %q; want the kubeconfig error", code, errOut.String())
	}
}

// A bad flag value is reported as the flag, with or without a file; a bad value
// in the file is not.
func TestBadFlagValuesNameTheFlag(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	body := "apiVersion: spotter.dev/v1alpha1\nkind: SpotterConfiguration\nagent:\n  pollInterval: 1h\n"
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want []string
		not  string
	}{
		{"flag alone", []string{"--cloud", "ibm"}, []string{`agent.cloud: Unsupported value: "ibm"`, "(from --cloud)"}, ""},
		{"health probe address", []string{"--health-probe-bind-address", "9103"},
			[]string{`agent.healthProbeBindAddress: Invalid value: "9103"`, "(from --health-probe-bind-address)"}, ""},
		{"flag beside a file", []string{"--config", path, "--metrics-bind-address", "bad"},
			[]string{`agent.metricsBindAddress: Invalid value: "bad"`, "(from --metrics-bind-address)", "agent.pollInterval"}, "pollInterval: Invalid value: \"1h0m0s\": must be between 100ms and 1m0s (from"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := ParseFlags(tc.args, &bytes.Buffer{})
			if err != nil {
				t.Fatal(err)
			}
			_, err = o.Config()
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain %q:\n%v", w, err)
				}
			}
			if tc.not != "" && strings.Contains(err.Error(), tc.not) {
				t.Errorf("the file's problem is put on a flag:\n%v", err)
			}
		})
	}
}

// -log-format json writes one JSON object a line; -v decides which V levels
// are written.
func TestLogFormatAndVerbosity(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		json, v1ok bool
	}{
		{nil, false, false},
		{[]string{"-v", "1"}, false, true},
		{[]string{"-log-format", "json"}, true, false},
		{[]string{"-log-format", "json", "-v", "2"}, true, true},
	} {
		o, err := ParseFlags(tc.args, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		logger := newLogger(o, &buf)
		logger.Info("notice", "node", "n1")
		logger.V(1).Info("detail")
		lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
		if want := map[bool]int{false: 1, true: 2}[tc.v1ok]; len(lines) != want {
			t.Errorf("%v: %d lines, want %d:\n%s", tc.args, len(lines), want, buf.String())
		}
		var obj map[string]any
		isJSON := json.Unmarshal([]byte(lines[0]), &obj) == nil
		if isJSON != tc.json || tc.json && (obj["msg"] != "notice" || obj["node"] != "n1") {
			t.Errorf("%v: first line %q, JSON %v", tc.args, lines[0], isJSON)
		}
	}
	for _, bad := range [][]string{{"-log-format", "xml"}, {"-v", "-1"}} {
		if _, err := ParseFlags(bad, io.Discard); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}
