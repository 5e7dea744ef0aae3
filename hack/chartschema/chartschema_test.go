package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"spotter.dev/spotter/internal/agent/app"
	"spotter.dev/spotter/internal/cli"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

const root = "../.."

// The committed schema and values reference are what the generator writes:
// a field added to the configuration, or a value to values.yaml, without
// running it fails here. UPDATE_GOLDEN=1 rewrites them, as `go run
// ./hack/chartschema` does.
func TestGeneratedFilesUpToDate(t *testing.T) {
	if os.Getenv("UPDATE_GOLDEN") == "1" {
		if err := run(root, false); err != nil {
			t.Fatal(err)
		}
	}
	files, err := generate(root)
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range files {
		got, err := os.ReadFile(filepath.Join(root, path))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is out of date; run go run ./hack/chartschema (or UPDATE_GOLDEN=1 go test ./hack/chartschema)", path)
		}
	}
}

func loadSchema(t *testing.T) object {
	t.Helper()
	s, err := readSchema(filepath.Join(root, schemaPath))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func loadValues(t *testing.T) map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, valuesPath))
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// merge lays patch over base as Helm merges values: maps key by key, a null
// deletes, anything else replaces.
func merge(base, patch map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range patch {
		if v == nil {
			delete(out, k)
			continue
		}
		pm, ok1 := v.(map[string]any)
		bm, ok2 := out[k].(map[string]any)
		if ok1 && ok2 {
			out[k] = merge(bm, pm)
		} else {
			out[k] = v
		}
	}
	return out
}

func yamlMap(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// values.yaml passes the schema once the one required value is set, and
// fails it without.
func TestDefaultValuesMatchSchema(t *testing.T) {
	schema, values := loadSchema(t), loadValues(t)
	problems, err := validate(schema, values)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 1 || !strings.Contains(problems[0], "/image/repository") {
		t.Errorf("values.yaml as shipped: problems %q, want only image.repository", problems)
	}
	problems, err = validate(schema, merge(values, yamlMap(t, "image: {repository: REGISTRY:5000/platform}")))
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) > 0 {
		t.Errorf("values.yaml with image.repository: %q", problems)
	}
}

func TestSchemaRefusesBadValues(t *testing.T) {
	schema := loadSchema(t)
	base := merge(loadValues(t), yamlMap(t, "image: {repository: REGISTRY/team}"))
	for _, tc := range []struct {
		name, patch, want string
	}{
		{"misspelt value", "controler: {replicas: 2}", `unknown property "controler"`},
		{"misspelt nested value", "controller: {replica: 2}", `/controller: unknown property "replica"`},
		{"no replica", "controller: {replicas: 0}", "/controller/replicas: 0 is out of range"},
		{"replicas as text", "controller: {replicas: two}", "/controller/replicas: is string, want integer"},
		{"unknown cloud", "agent: {cloud: aliyun}", "/agent/cloud: aliyun is not one of"},
		{"unknown log format", "logFormat: xml", "/logFormat: xml is not one of"},
		{"repository with a tag", "image: {repository: REGISTRY/team:v1}", "/image/repository"},
		{"digest not sha256", "controller: {image: {digest: latest}}", "/controller/image/digest"},
		{"apiVersion inside config", "config: {apiVersion: spotter.dev/v1alpha1}", `/config: unknown property "apiVersion"`},
		{"misspelt config section", "config: {resheduler: {enabled: true}}", `/config: unknown property "resheduler"`},
		{"misspelt config field", "config: {drain: {timout: 5m}}", `/config/drain: unknown property "timout"`},
		{"unknown cloud provider", "config: {cloud: {provider: openstack}}", "/config/cloud/provider: openstack is not one of"},
		{"unknown migration mode", "config: {migrator: {mode: Fast}}", "/config/migrator/mode: Fast is not one of"},
		{"duration without unit", "config: {drain: {timeout: 600}}", "/config/drain/timeout: is number, want string"},
		{"duration in days", "config: {rescheduler: {interval: 1d}}", "/config/rescheduler/interval"},
		{"negative count", "config: {drain: {maxConcurrentEvictions: -1}}", "/config/drain/maxConcurrentEvictions: -1 is out of range"},
		{"price as text", "config: {pricing: {instanceTypes: {m5.large: {onDemand: cheap}}}}", "/config/pricing/instanceTypes/m5.large/onDemand: is string, want number"},
		{"window field misspelt", "config: {disruption: {windows: [{schedule: '@daily', duration: 1h, tz: UTC}]}}", `/config/disruption/windows/0: unknown property "tz"`},
		{"alert duration", "prometheusRule: {drainStuckFor: soon}", "/prometheusRule/drainStuckFor"},
		{"empty kube-state-metrics selector", "prometheusRule: {kubeStateMetrics: {selector: ''}}", "/prometheusRule/kubeStateMetrics/selector"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			problems, err := validate(schema, merge(base, yamlMap(t, tc.patch)))
			if err != nil {
				t.Fatal(err)
			}
			joined := strings.Join(problems, "\n")
			if !strings.Contains(joined, tc.want) {
				t.Errorf("problems:\n%s\nwant one containing %q", joined, tc.want)
			}
		})
	}
}

// Whatever Spotter accepts, the schema accepts: the complete defaulted
// configuration (every field set), and the richest configuration the tests
// of the configuration API keep.
func TestConfigSchemaAcceptsSpotterConfigurations(t *testing.T) {
	schema := loadSchema(t)
	props, _ := schema.get("properties")
	config, _ := props.(object).get("config")
	defaults, err := json.Marshal(v1alpha1.NewDefaults())
	if err != nil {
		t.Fatal(err)
	}
	var full map[string]any
	if err := yaml.Unmarshal(defaults, &full); err != nil {
		t.Fatal(err)
	}
	full = dropNulls(full).(map[string]any)
	delete(full, "apiVersion")
	delete(full, "kind")
	rich := yamlMap(t, `
dryRun: true
classification: {spotSelectors: [pool=spot], onDemandSelectors: ["tier in (a,b)"], excludeSelectors: [gpu]}
drain: {maxGracePeriod: 1m30s, shutdownGracePeriod: "0s", onRestart: Rollback}
disruption: {maxConcurrentDrains: 2, windows: [{schedule: "0 22 * * 1-5", duration: 8h, timeZone: Europe/Berlin}]}
rescheduler: {enabled: false, drainDelay: "0", interval: 30s}
migrator: {enabled: true, mode: DrainFirst, schedule: "@daily"}
agent: {cloud: azure, rebalanceAction: Cordon, metricsAuthentication: None, metricsBindAddress: "127.0.0.1:9102", deadlineMargin: 500ms}
cloud: {provider: aws, aws: {clusterName: c, autoScalingGroups: [a, b]}, clusterAPI: {namespace: capi}}
pricing: {currency: EUR, instanceTypes: {m5.large: {onDemand: 0.096, spot: 0.035}, t3.small: {onDemand: 1, spot: 0}}}
manager: {leaderElection: {enabled: false, leaseName: x}}
`)
	for name, c := range map[string]map[string]any{"defaults": full, "rich": rich} {
		// Spotter accepts it...
		body, err := json.Marshal(merge(c, map[string]any{"apiVersion": v1alpha1.APIVersion, "kind": v1alpha1.Kind}))
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "config.yaml")
		if err := os.WriteFile(path, body, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := v1alpha1.Load(path); err != nil {
			t.Fatalf("%s: Spotter refuses it: %v", name, err)
		}
		// ...and so does the chart.
		problems, err := validate(config.(object), c)
		if err != nil {
			t.Fatal(err)
		}
		if len(problems) > 0 {
			t.Errorf("%s: the schema refuses what Spotter accepts: %q", name, problems)
		}
	}
}

func dropNulls(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if e == nil {
				delete(v, k)
				continue
			}
			v[k] = dropNulls(e)
		}
	case []any:
		for i, e := range v {
			v[i] = dropNulls(e)
		}
	}
	return v
}

// The duration pattern accepts exactly the durations metav1.Duration reads
// that are not negative.
func TestDurationPattern(t *testing.T) {
	re := regexp.MustCompile(durationPattern)
	for _, s := range []string{
		"0", "0s", "10s", "1m30s", "1h", "1.5h", ".5s", "5.s", "100ms", "10us", "10µs", "10μs", "1ns", "2h45m10s500ms",
		"", "5", "10 s", "1d", "1w", "-1s", "+1s", "s", "1.2.3s", "1m-5s", "10S", " 1s",
	} {
		d, err := time.ParseDuration(s)
		want := err == nil && d >= 0 && !strings.HasPrefix(s, "+") && !strings.HasPrefix(s, "-")
		if got := re.MatchString(s); got != want {
			t.Errorf("%q: pattern says %v, time.ParseDuration says %v (%v)", s, got, want, err)
		}
	}
}

// metricRef is a Spotter metric named in a chart file, with the label names
// its selector uses.
var metricRef = regexp.MustCompile(`(spotter_[a-z_]+)(\{[^}]*\})?`)

// Every metric the alerts and the dashboard use exists (docs/reference.md,
// generated from the registries), with the labels they select on.
func TestAlertsAndDashboardUseRealMetrics(t *testing.T) {
	reference, err := os.ReadFile(filepath.Join(root, "docs/reference.md"))
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string][]string{} // metric -> its labels
	row := regexp.MustCompile("(?m)^\\| `(spotter_[a-z_]+)` \\| (counter|gauge|histogram|summary) \\| ([^|]*) \\|")
	for _, m := range row.FindAllStringSubmatch(string(reference), -1) {
		labels[m[1]] = regexp.MustCompile("`([a-z_]+)`").FindAllString(m[3], -1)
		if m[2] == "histogram" {
			for _, suffix := range []string{"_bucket", "_count", "_sum"} {
				labels[m[1]+suffix] = append(labels[m[1]], "`le`")
			}
		}
	}
	if len(labels) < 10 {
		t.Fatalf("found %d metrics in docs/reference.md: the table's format changed", len(labels))
	}
	for _, file := range []string{"charts/spotter/templates/prometheusrule.yaml", "charts/spotter/dashboards/spotter.json"} {
		data, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		// Template actions ({{ $sel }}, legend formats) out of the way of the
		// selectors' braces.
		text := regexp.MustCompile(`\{\{[^}]*\}\}`).ReplaceAllString(string(data), "")
		found := 0
		for _, m := range metricRef.FindAllStringSubmatch(text, -1) {
			found++
			known, ok := labels[m[1]]
			if !ok {
				t.Errorf("%s: metric %s is not in docs/reference.md", file, m[1])
				continue
			}
			for _, sel := range regexp.MustCompile(`([a-z_]+)\s*(=~|!~|!=|=)`).FindAllStringSubmatch(m[2], -1) {
				name := sel[1]
				if name == "namespace" || name == "job" {
					continue // target labels Prometheus adds
				}
				if !strings.Contains(strings.Join(known, " "), "`"+name+"`") {
					t.Errorf("%s: %s has no label %s (it has %v)", file, m[1], name, known)
				}
			}
		}
		if found == 0 {
			t.Errorf("%s names no spotter_ metric", file)
		}
	}
}

// templateFlags are the flags a template passes ("- --name=...").
func templateFlags(t *testing.T, file string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "charts/spotter/templates", file))
	if err != nil {
		t.Fatal(err)
	}
	var flags []string
	for _, m := range regexp.MustCompile(`(?m)^\s*- (--?[a-z][a-z-]*)=`).FindAllStringSubmatch(string(data), -1) {
		flags = append(flags, m[1])
	}
	if len(flags) == 0 {
		t.Fatalf("%s passes no flags", file)
	}
	return flags
}

// The flags the chart passes are flags of the binaries, with the values the
// chart gives them.
func TestChartFlagsExist(t *testing.T) {
	samples := map[string][]string{
		"--config": {"/etc/spotter/config/config.yaml"}, "--zap-encoder": {"json", "console"},
		"--v": {"1"}, "-v": {"1"}, "--cloud": {"auto", "aws", "gcp", "azure"}, "--log-format": {"json", "text"},
	}
	controller, _, err := cli.NewRootCommand(cli.Streams{In: strings.NewReader(""), Out: io.Discard, Err: io.Discard}).Find([]string{"controller"})
	if err != nil {
		t.Fatal(err)
	}
	for _, flag := range templateFlags(t, "controller-deployment.yaml") {
		values := samples[flag]
		if len(values) == 0 {
			t.Errorf("controller flag %s: add sample values to the test", flag)
			values = []string{"x"}
		}
		for _, v := range values {
			if err := controller.ParseFlags([]string{flag + "=" + v}); err != nil {
				t.Errorf("spotter controller %s=%s: %v", flag, v, err)
			}
		}
	}
	for _, flag := range templateFlags(t, "agent-daemonset.yaml") {
		values := samples[flag]
		if len(values) == 0 {
			t.Errorf("agent flag %s: add sample values to the test", flag)
			values = []string{"x"}
		}
		for _, v := range values {
			if _, err := app.ParseFlags([]string{flag + "=" + v}, io.Discard); err != nil {
				t.Errorf("spotter-agent %s=%s: %v", flag, v, err)
			}
		}
	}
}
