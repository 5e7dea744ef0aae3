// Command promrules checks the PrometheusRule objects of rendered manifests
// as Prometheus loads rule files (model/rulefmt, what promtool check rules
// runs): every expression parses, every label and annotation is valid, and
// annotation templates parse. With -test it also runs alert tests on their
// alerting rules (ruletest.go): which alerts fire, given input series, at
// which time. It is its own module, so that Prometheus's dependencies stay
// out of Spotter's; hack/chartschema's tests run it on the chart's rendered
// golden.
//
//	go run . FILE...
//	go run . -test TESTS.yaml FILE...
//
// It prints one line per problem (each failed alert test: the expected and
// the firing alerts), naming the file, the object and the rule, and exits 1
// when there is one, or when the files hold no PrometheusRule.
package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"
)

func main() {
	args, tests := os.Args[1:], ""
	if len(args) > 0 && args[0] == "-test" {
		if len(args) < 2 {
			args = nil
		} else {
			tests, args = args[1], args[2:]
		}
	}
	if len(args) < 1 {
		fmt.Fprintln(os.Stderr, "usage: promrules [-test TESTS.yaml] FILE...")
		os.Exit(2)
	}
	problems := 0
	var rules []rulefmt.Rule
	for _, file := range args {
		groups, errs := check(file)
		for _, g := range groups {
			rules = append(rules, g.Rules...)
		}
		for _, err := range errs {
			fmt.Fprintln(os.Stderr, err)
		}
		problems += len(errs)
	}
	if len(rules) == 0 && problems == 0 {
		fmt.Fprintln(os.Stderr, "no PrometheusRule with rules in", args)
		os.Exit(1)
	}
	if problems > 0 {
		os.Exit(1)
	}
	fmt.Printf("%d rules valid\n", len(rules))
	if tests == "" {
		return
	}
	passed, errs := runTests(tests, rules)
	for _, err := range errs {
		fmt.Fprintln(os.Stderr, err)
	}
	if len(errs) > 0 {
		os.Exit(1)
	}
	fmt.Printf("%d alert tests passed\n", passed)
}

// object is what check reads of a manifest.
type object struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Spec yaml.Node `yaml:"spec"`
}

// check validates the PrometheusRules of one file (a YAML stream) and
// returns their rule groups and what is wrong with them.
func check(file string) ([]rulefmt.RuleGroup, []error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, []error{err}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var (
		rules []rulefmt.RuleGroup
		errs  []error
	)
	for {
		var obj object
		if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
			return rules, errs
		} else if err != nil {
			return rules, append(errs, fmt.Errorf("%s: %w", file, err))
		}
		if obj.Kind != "PrometheusRule" {
			continue
		}
		spec, err := yaml.Marshal(&obj.Spec)
		if err != nil {
			return rules, append(errs, fmt.Errorf("%s: PrometheusRule %s: %w", file, obj.Metadata.Name, err))
		}
		groups, problems := rulefmt.Parse(spec, false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
		for _, p := range problems {
			errs = append(errs, fmt.Errorf("%s: PrometheusRule %s: %w", file, obj.Metadata.Name, p))
		}
		if groups != nil {
			rules = append(rules, groups.Groups...)
		}
	}
}
