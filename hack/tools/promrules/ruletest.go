package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"
	"go.yaml.in/yaml/v3"
)

// testFile is a file of alert tests in the format of promtool test rules
// (https://prometheus.io/docs/prometheus/latest/configuration/unit_testing_rules/),
// the part of it that tests alerts by their labels: no rule_files (the rules
// are the manifests' PrometheusRules), no promql_expr_test, no
// exp_annotations. A field outside that part is an error, not ignored.
type testFile struct {
	// EvaluationInterval is how often the rules are evaluated; default 1m.
	EvaluationInterval model.Duration `yaml:"evaluation_interval"`
	Tests              []testGroup    `yaml:"tests"`
}

// testGroup is one test: input series and the alerts expected of them.
type testGroup struct {
	Name string `yaml:"name"`
	// Interval is the time between two values of an input series; default 1m.
	Interval       model.Duration `yaml:"interval"`
	InputSeries    []inputSeries  `yaml:"input_series"`
	AlertRuleTests []alertTest    `yaml:"alert_rule_test"`
}

// inputSeries is a series and its values in promtool's expanding notation
// ("1 1 0x10", "_" for a missing value), the first at time 0.
type inputSeries struct {
	Series string `yaml:"series"`
	Values string `yaml:"values"`
}

// alertTest names the alerts of one alerting rule expected to fire at
// EvalTime: none when ExpAlerts is empty.
type alertTest struct {
	EvalTime  model.Duration `yaml:"eval_time"`
	Alertname string         `yaml:"alertname"`
	ExpAlerts []struct {
		// ExpLabels are the alert's labels: its series' and the rule's,
		// alertname aside.
		ExpLabels map[string]string `yaml:"exp_labels"`
	} `yaml:"exp_alerts"`
}

// runTests runs the alert tests of the file path on rules and returns how
// many passed and why the others failed.
func runTests(path string, rules []rulefmt.Rule) (int, []error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, []error{err}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var f testFile
	if err := dec.Decode(&f); err != nil {
		return 0, []error{fmt.Errorf("%s: %w", path, err)}
	}
	if len(f.Tests) == 0 {
		return 0, []error{fmt.Errorf("%s: no tests", path)}
	}
	evalInterval := time.Duration(f.EvaluationInterval)
	if evalInterval == 0 {
		evalInterval = time.Minute
	}
	alerts := map[string]rulefmt.Rule{}
	for _, r := range rules {
		if r.Alert != "" {
			alerts[r.Alert] = r
		}
	}
	passed := 0
	var errs []error
	for _, g := range f.Tests {
		n, failed := g.run(alerts, evalInterval)
		passed += n
		for _, err := range failed {
			errs = append(errs, fmt.Errorf("%s: test %q: %w", path, g.Name, err))
		}
	}
	return passed, errs
}

// run evaluates the rules that g's alert tests name, every evalInterval from
// time 0 to the last eval_time, as the rule manager does: an alert is
// pending from the first evaluation its expression returns its series, and
// firing once that has held for the rule's `for` at an evaluation; it ends
// at the first evaluation without its series. Each test is checked at the
// last evaluation not after its eval_time. It returns how many tests passed
// and why the others failed.
func (g testGroup) run(alerts map[string]rulefmt.Rule, evalInterval time.Duration) (int, []error) {
	db, err := g.storage()
	if err != nil {
		return 0, []error{err}
	}
	names, last := map[string]bool{}, time.Duration(0)
	for _, t := range g.AlertRuleTests {
		r, ok := alerts[t.Alertname]
		if !ok {
			return 0, []error{fmt.Errorf("no alerting rule %s", t.Alertname)}
		}
		for _, v := range r.Labels {
			if strings.Contains(v, "{{") {
				return 0, []error{fmt.Errorf("alert %s: templated labels are not supported", t.Alertname)}
			}
		}
		names[t.Alertname] = true
		last = max(last, time.Duration(t.EvalTime))
	}
	engine := promql.NewEngine(promql.EngineOpts{MaxSamples: 1_000_000, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
	active := map[string]map[string]time.Duration{} // alert -> its labels -> active since
	passed := 0
	var errs []error
	for ts := time.Duration(0); ts <= last; ts += evalInterval {
		firing := map[string][]string{}
		for name := range names {
			r := alerts[name]
			series, err := eval(engine, db, r, ts)
			if err != nil {
				return passed, append(errs, fmt.Errorf("alert %s at %v: %w", name, ts, err))
			}
			was := active[name]
			active[name] = map[string]time.Duration{}
			for _, s := range series {
				since, ok := was[s]
				if !ok {
					since = ts
				}
				active[name][s] = since
				if ts-since >= time.Duration(r.For) {
					firing[name] = append(firing[name], s)
				}
			}
		}
		for _, t := range g.AlertRuleTests {
			if at := time.Duration(t.EvalTime); at < ts || at >= ts+evalInterval {
				continue
			}
			var want []string
			for _, a := range t.ExpAlerts {
				want = append(want, labels.FromMap(a.ExpLabels).String())
			}
			got := firing[t.Alertname]
			slices.Sort(want)
			slices.Sort(got)
			if !slices.Equal(want, got) {
				errs = append(errs, fmt.Errorf("alert %s at %v: firing %v, want %v", t.Alertname, time.Duration(t.EvalTime), got, want))
				continue
			}
			passed++
		}
	}
	return passed, errs
}

// eval evaluates r's expression at ts and returns the labels of each alert
// it makes: the series' labels without the metric name, and r's labels.
func eval(engine *promql.Engine, db storage.Queryable, r rulefmt.Rule, ts time.Duration) ([]string, error) {
	q, err := engine.NewInstantQuery(context.Background(), db, nil, r.Expr, time.Unix(0, 0).Add(ts))
	if err != nil {
		return nil, err
	}
	defer q.Close()
	vec, err := q.Exec(context.Background()).Vector()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, s := range vec {
		b := labels.NewBuilder(s.Metric).Del(model.MetricNameLabel)
		for k, v := range r.Labels {
			b.Set(k, v)
		}
		out = append(out, b.Labels().String())
	}
	return out, nil
}

// storage returns g's input series as a Queryable.
func (g testGroup) storage() (storage.Queryable, error) {
	interval := time.Duration(g.Interval)
	if interval == 0 {
		interval = time.Minute
	}
	p := parser.NewParser(parser.Options{})
	var all []storage.Series
	for _, in := range g.InputSeries {
		lset, values, err := p.ParseSeriesDesc(in.Series + " " + in.Values)
		if err != nil {
			return nil, fmt.Errorf("input series %s: %w", in.Series, err)
		}
		var samples []chunks.Sample
		for i, v := range values {
			if v.Histogram != nil {
				return nil, fmt.Errorf("input series %s: histograms are not supported", in.Series)
			}
			if !v.Omitted {
				samples = append(samples, sample{t: (time.Duration(i) * interval).Milliseconds(), f: v.Value})
			}
		}
		all = append(all, storage.NewListSeries(lset, samples))
	}
	slices.SortFunc(all, func(a, b storage.Series) int { return labels.Compare(a.Labels(), b.Labels()) })
	return storage.QueryableFunc(func(int64, int64) (storage.Querier, error) { return querier(all), nil }), nil
}

// querier is an in-memory storage.Querier of a few series, sorted.
type querier []storage.Series

func (q querier) Select(_ context.Context, _ bool, _ *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	out := &seriesSet{}
	for _, s := range q {
		if matches(s.Labels(), ms) {
			out.series = append(out.series, s)
		}
	}
	return out
}

func matches(lset labels.Labels, ms []*labels.Matcher) bool {
	for _, m := range ms {
		if !m.Matches(lset.Get(m.Name)) {
			return false
		}
	}
	return true
}

func (q querier) LabelValues(context.Context, string, *storage.LabelHints, ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return nil, nil, errors.New("not supported")
}

func (q querier) LabelNames(context.Context, *storage.LabelHints, ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return nil, nil, errors.New("not supported")
}

func (q querier) Close() error { return nil }

// seriesSet is a storage.SeriesSet over a slice.
type seriesSet struct {
	series []storage.Series
	next   int // the index of the series after the current one
}

func (s *seriesSet) Next() bool {
	s.next++
	return s.next <= len(s.series)
}

func (s *seriesSet) At() storage.Series                { return s.series[s.next-1] }
func (s *seriesSet) Err() error                        { return nil }
func (s *seriesSet) Warnings() annotations.Annotations { return nil }

// sample is a float sample (chunks.Sample).
type sample struct {
	t int64
	f float64
}

func (s sample) T() int64                      { return s.t }
func (s sample) ST() int64                     { return 0 }
func (s sample) F() float64                    { return s.f }
func (s sample) H() *histogram.Histogram       { return nil }
func (s sample) FH() *histogram.FloatHistogram { return nil }
func (s sample) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (s sample) Copy() chunks.Sample           { return s }
