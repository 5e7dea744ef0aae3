// Command promrules checks the PrometheusRule objects of rendered manifests
// as Prometheus loads rule files (model/rulefmt, what promtool check rules
// runs): every expression parses, every label and annotation is valid, and
// annotation templates parse. It is its own module, so that Prometheus's
// dependencies stay out of Spotter's; hack/chartschema's tests run it on the
// chart's rendered golden.
//
//	go run . FILE...
//
// It prints one line per problem, naming the file, the object and the rule,
// and exits 1 when there is one, or when the files hold no PrometheusRule.
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
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: promrules FILE...")
		os.Exit(2)
	}
	problems, rules := 0, 0
	for _, file := range os.Args[1:] {
		n, errs := check(file)
		rules += n
		for _, err := range errs {
			fmt.Fprintln(os.Stderr, err)
		}
		problems += len(errs)
	}
	if rules == 0 && problems == 0 {
		fmt.Fprintln(os.Stderr, "no PrometheusRule with rules in", os.Args[1:])
		os.Exit(1)
	}
	if problems > 0 {
		os.Exit(1)
	}
	fmt.Printf("%d rules valid\n", rules)
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
// returns how many rules they hold and what is wrong with them.
func check(file string) (int, []error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return 0, []error{err}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	rules := 0
	var errs []error
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
			for _, g := range groups.Groups {
				rules += len(g.Rules)
			}
		}
	}
}
