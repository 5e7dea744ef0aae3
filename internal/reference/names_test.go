package reference

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// metricName is a Spotter metric named in a file: a series of a histogram
// (_bucket, _count, _sum) counts as the histogram.
var metricName = regexp.MustCompile(`spotter_[a-z0-9_]*[a-z0-9]\b`)

// Every Spotter metric that the chart's alerts and dashboard and the docs name
// is one that spotter controller or spotter-agent registers: a metric
// renamed in the code and not in an alert would leave the alert silent.
// Names written as a prefix (spotter_agent_*) are not checked.
func TestChartAndDocsNameRegisteredMetrics(t *testing.T) {
	registered := map[string]bool{}
	agent := agentRegistry()
	for _, reg := range []interface {
		prometheus.Gatherer
		Describe(chan<- *prometheus.Desc)
	}{ctrlmetrics.Registry.(*prometheus.Registry), agent} {
		for _, m := range metricsOf(t, reg) {
			registered[m.name] = m.typ == "histogram"
		}
	}
	var files []string
	for _, pattern := range []string{"../../charts/spotter/templates/*.yaml", "../../charts/spotter/dashboards/*.json", "../../docs/*.md", "../../README.md"} {
		matches, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, matches...)
	}
	if len(files) < 10 {
		t.Fatalf("found only %v", files)
	}
	named := 0
	for _, f := range files {
		if f == docPath {
			continue // generated from the registries
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		var unknown []string
		for _, loc := range metricName.FindAllStringIndex(text, -1) {
			name := text[loc[0]:loc[1]]
			if strings.HasPrefix(text[loc[1]:], "_*") || strings.HasPrefix(text[loc[1]:], "*") {
				continue
			}
			named++
			if _, ok := registered[name]; ok {
				continue
			}
			base := name
			for _, suffix := range []string{"_bucket", "_count", "_sum"} {
				base = strings.TrimSuffix(base, suffix)
			}
			if histogram, ok := registered[base]; ok && histogram && base != name {
				continue
			}
			if !slices.Contains(unknown, name) {
				unknown = append(unknown, name)
			}
		}
		if len(unknown) > 0 {
			t.Errorf("%s names metrics that no Spotter binary registers: %s", f, strings.Join(unknown, ", "))
		}
	}
	if named < 50 {
		t.Errorf("only %d metric names found in %d files: is the pattern right?", named, len(files))
	}
}
