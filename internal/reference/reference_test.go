package reference

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"spotter.dev/spotter/internal/agent/health"
	"spotter.dev/spotter/internal/agent/interrupt"

	// The packages whose metrics the controller serves register them when
	// imported.
	_ "spotter.dev/spotter/internal/cloud/metrics"
	_ "spotter.dev/spotter/internal/controller/labeler"
	_ "spotter.dev/spotter/internal/controller/migrator"
	_ "spotter.dev/spotter/internal/controller/preemptible"
	_ "spotter.dev/spotter/internal/controller/queue"
	_ "spotter.dev/spotter/internal/controller/replacer"
	_ "spotter.dev/spotter/internal/controller/rescheduler"
	_ "spotter.dev/spotter/internal/kubeclient"
)

// docPath is the generated reference; UPDATE_GOLDEN=1 rewrites it.
const docPath = "../../docs/reference.md"

func TestReferenceUpToDate(t *testing.T) {
	got := render(t)
	if os.Getenv("UPDATE_GOLDEN") == "1" {
		if err := os.WriteFile(docPath, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatalf("%v (run UPDATE_GOLDEN=1 go test ./internal/reference/ to create it)", err)
	}
	if string(want) != got {
		t.Errorf("%s is out of date with internal/reference; run UPDATE_GOLDEN=1 go test ./internal/reference/", docPath)
	}
}

// Every spotter.dev key and every Spotter Event reason written in the code
// (outside tests, the lab and the emulators) is listed.
func TestEveryKeyListed(t *testing.T) {
	keys := map[string]bool{}
	for _, k := range Keys {
		keys[k.Name] = true
	}
	reasons := map[string]bool{}
	for _, r := range Reasons {
		reasons[r.Name] = true
	}
	keyRE := regexp.MustCompile(`"(spotter\.dev/[a-z0-9.-]+)"`)
	reasonRE := regexp.MustCompile(`"(Spotter[A-Z][A-Za-z]+)"`)
	notReasons := map[string]bool{"SpotterConfiguration": true} // the configuration's kind
	notKeys := map[string]bool{"spotter.dev/v1alpha1": true}
	var missing []string
	for _, root := range []string{"../../internal", "../../cmd", "../../pkg"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel := filepath.ToSlash(path)
			if d.IsDir() && (strings.HasSuffix(rel, "/lab") || strings.Contains(rel, "/emulator") || strings.HasSuffix(rel, "/testutil") ||
				strings.HasSuffix(rel, "/testenv") || strings.HasSuffix(rel, "/sim")) {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range keyRE.FindAllSubmatch(src, -1) {
				if k := string(m[1]); !keys[k] && !notKeys[k] {
					missing = append(missing, fmt.Sprintf("key %s (%s)", k, rel))
				}
			}
			for _, m := range reasonRE.FindAllSubmatch(src, -1) {
				if r := string(m[1]); !reasons[r] && !notReasons[r] {
					missing = append(missing, fmt.Sprintf("Event reason %s (%s)", r, rel))
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(missing) > 0 {
		t.Errorf("not in internal/reference (add them, then UPDATE_GOLDEN=1 go test ./internal/reference/):\n  %s", strings.Join(missing, "\n  "))
	}
}

// metric is a metric as its collector describes it.
type metric struct {
	name, help, typ string
	labels          []string
}

var descRE = regexp.MustCompile(`^Desc\{fqName: ("(?:[^"\\]|\\.)*"), help: ("(?:[^"\\]|\\.)*"), (?:unit: "[^"]*", )?constLabels: \{[^}]*\}, variableLabels: \{([^}]*)\}\}$`)

// metricsOf describes the spotter_ metrics registered with reg; types come
// from a gather where the metric has a series, else from the naming
// convention (_total counters, _seconds histograms, the rest gauges), which
// the gathered ones are checked against.
func metricsOf(t *testing.T, reg interface {
	prometheus.Gatherer
	Describe(chan<- *prometheus.Desc)
}) []metric {
	t.Helper()
	ch := make(chan *prometheus.Desc)
	go func() { reg.Describe(ch); close(ch) }()
	var out []metric
	for d := range ch {
		m := descRE.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read %s", d)
		}
		name, _ := strconv.Unquote(m[1])
		help, _ := strconv.Unquote(m[2])
		if !strings.HasPrefix(name, "spotter_") {
			continue
		}
		var labels []string
		if m[3] != "" {
			labels = strings.Split(m[3], ",")
		}
		typ := "gauge"
		switch {
		case strings.HasSuffix(name, "_timestamp_seconds"): // a time, not a duration
		case strings.HasSuffix(name, "_total"):
			typ = "counter"
		case strings.HasSuffix(name, "_seconds"):
			typ = "histogram"
		}
		out = append(out, metric{name: name, help: help, typ: typ, labels: labels})
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	gathered := map[string]string{}
	for _, f := range families {
		gathered[f.GetName()] = strings.ToLower(dto.MetricType_name[int32(f.GetType())])
	}
	for _, m := range out {
		if g, ok := gathered[m.name]; ok && g != m.typ {
			t.Errorf("metric %s is a %s, named like a %s", m.name, g, m.typ)
		}
	}
	slices.SortFunc(out, func(a, b metric) int { return strings.Compare(a.name, b.name) })
	return out
}

func render(t *testing.T) string {
	var b bytes.Buffer
	cell := func(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
	b.WriteString(`# Reference: labels, annotations, taints, Events and metrics

Generated from ` + "`internal/reference`" + ` (` + "`UPDATE_GOLDEN=1 go test ./internal/reference/`" + `); a test fails
when the code uses a ` + "`spotter.dev/`" + ` key or an Event reason this page does not list.

## Labels, annotations, taints and tags

| key | kind | on | Spotter | by | meaning |
|---|---|---|---|---|---|
`)
	for _, k := range Keys {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s |\n", cell(k.Name), k.Kind, k.On, k.Access, k.By, cell(k.Meaning))
	}
	b.WriteString(`
## Event reasons

Events are recorded through the events.k8s.io API; ` + "`kubectl describe node`" + ` shows them.

| reason | about | type | by | meaning |
|---|---|---|---|---|
`)
	for _, r := range Reasons {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", r.Name, r.On, r.Type, r.By, cell(r.Meaning))
	}
	agent := agentRegistry()
	for _, part := range []struct {
		title string
		reg   interface {
			prometheus.Gatherer
			Describe(chan<- *prometheus.Desc)
		}
	}{
		{"`spotter controller` (docs/metrics.md: HTTPS on `:8443`)", ctrlmetrics.Registry.(*prometheus.Registry)},
		{"`spotter-agent` (HTTPS on `:9102`)", agent},
	} {
		fmt.Fprintf(&b, "\n## Metrics of %s\n\n| metric | type | labels | meaning |\n|---|---|---|---|\n", part.title)
		for _, m := range metricsOf(t, part.reg) {
			labels := "-"
			if len(m.labels) > 0 {
				labels = "`" + strings.Join(m.labels, "`, `") + "`"
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", m.name, m.typ, labels, cell(m.help))
		}
	}
	return b.String()
}

// agentRegistry returns a registry with every metric spotter-agent
// registers (internal/agent/app).
func agentRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	interrupt.MustRegister(reg)
	health.NewMetrics().MustRegister(reg)
	return reg
}
