package v1alpha1

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// endless is an io.Reader that never ends, as /dev/zero; it counts what was
// read from it.
type endless struct {
	fill byte
	read int64
}

func (e *endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = e.fill
	}
	e.read += int64(len(p))
	return len(p), nil
}

// A reader that never ends is refused once the limit is passed: the error
// names the limit, and no more than the limit (and a read buffer) is read.
func TestReadLimitedStopsAtTheLimit(t *testing.T) {
	for _, fill := range []byte{0, 'a', '\n'} {
		r := &endless{fill: fill}
		_, err := ReadLimited(r, MaxFileBytes, "the configuration file", "")
		var tl *TooLargeError
		if !errors.As(err, &tl) {
			t.Fatalf("fill %q: got %v, want a *TooLargeError", fill, err)
		}
		if !strings.Contains(err.Error(), "1 MiB") {
			t.Errorf("the error does not name the limit: %v", err)
		}
		if r.read > MaxFileBytes+64<<10 {
			t.Errorf("read %d bytes for a limit of %d", r.read, MaxFileBytes)
		}
	}
}

func TestLoadRefusesLargeFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.yaml")
	body := header + "dryRun: true\n" + strings.Repeat("# padding\n", MaxFileBytes/10)
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	if err == nil || !strings.Contains(err.Error(), "larger than 1 MiB") || !strings.Contains(err.Error(), path) {
		t.Errorf("got %v, want the file refused, naming the file and the limit", err)
	}
	if _, err := os.Stat("/dev/zero"); err == nil {
		if _, err := Load("/dev/zero"); err == nil || !strings.Contains(err.Error(), "larger than 1 MiB") {
			t.Errorf("/dev/zero: got %v", err)
		}
	}
	// A file just under the limit is read.
	ok := header + "dryRun: true\n" + strings.Repeat("#\n", (MaxFileBytes-len(header)-20)/2)
	if err := os.WriteFile(path, []byte(ok), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err != nil {
		t.Errorf("a file under the limit: %v", err)
	}
}

// No message echoes more than a short excerpt of a value, whether decoding or
// validation found the problem.
func TestErrorsEchoOnlyAnExcerpt(t *testing.T) {
	long := strings.Repeat("x", 200<<10)
	for name, body := range map[string]string{
		"wrong type":        "dryRun: " + long + "\n",
		"unknown field":     long + ": 1\n",
		"duplicate key":     "pricing:\n  instanceTypes:\n    " + long + ": {}\n    " + long + ": {}\n",
		"validation":        "migrator:\n  schedule: \"" + long + "\"\n",
		"selector":          "classification:\n  spotSelectors: [\"a in (" + long + "\"]\n",
		"not YAML":          "dryRun: \"" + long + "\n",
		"duration":          "drain:\n  timeout: " + long + "\n",
		"enum":              "agent:\n  cloud: " + long + "\n",
		"time zone":         "migrator:\n  timeZone: " + long + "\n",
		"endpoint":          "agent:\n  metadataEndpoint: " + long + "\n",
		"whole number":      "disruption:\n  maxConcurrentDrains: 1" + strings.Repeat("0", 100<<10) + "\n",
		"leaseNamespace":    "manager:\n  leaderElection:\n    leaseNamespace: " + long + "\n",
		"metrics address":   "manager:\n  metricsBindAddress: " + long + "\n",
		"instance type key": "pricing:\n  instanceTypes:\n    " + long + ": {onDemand: -1}\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, errs := Parse([]byte(header + body))
			if len(errs) == 0 {
				t.Fatal("no error")
			}
			msg := (&InvalidError{Errors: errs}).Error()
			if len(msg) > 2000 {
				t.Errorf("the message is %d bytes long:\n%.600s...", len(msg), msg)
			}
		})
	}
}

// A NaN or infinite number is reported at its field, with every other problem
// of the file, not as one encoding error that hides them.
func TestNaNAndInfinityAreReportedWithTheOthers(t *testing.T) {
	_, errs := Parse([]byte(header + `rescheduler:
  intervall: 30s
disruption:
  maxConcurrentDrains: 500
pricing:
  instanceTypes:
    m5.large: {onDemand: .nan, spot: .inf}
    m5.xlarge: {onDemand: -.Inf}
`))
	want := []string{
		`rescheduler.intervall: Invalid value: "intervall": unknown field (did you mean "interval"?)`,
		`pricing.instanceTypes[m5.large].onDemand: Invalid value: ".nan": must be a finite number (line 9)`,
		`pricing.instanceTypes[m5.large].spot: Invalid value: ".inf": must be a finite number (line 9)`,
		`pricing.instanceTypes[m5.xlarge].onDemand: Invalid value: "-.Inf": must be a finite number (line 10)`,
		`disruption.maxConcurrentDrains: Invalid value: 500: must be between 1 and 100 (line 6)`,
	}
	checkErrors(t, errs, want)
}

// An alias is checked where it is used: its problems carry the line of the
// use, a bad value behind an anchor is reported at each use and nowhere else,
// and nothing else is made up.
func TestAliases(t *testing.T) {
	_, errs := Parse([]byte(header + `x: &sel "not=a=selector"
classification:
  spotSelectors: &list
  - "pool=spot"
  - 5
  excludeSelectors: *list
  onDemandSelectors: [*sel]
disruption:
  windows:
  - &w {schedule: "@daily", duration: 1h}
  - *w
  - {schedule: "bad cron", duration: 1h}
rescheduler:
  interval: *w
drain: *sel
`))
	checkErrors(t, errs, []string{
		`x: Invalid value: "x": unknown field`,
		`classification.spotSelectors[1]: Invalid value: "5": must be a string (quote it) (line 7)`,
		`classification.excludeSelectors[1]: Invalid value: "5": must be a string (quote it) (line 7, through the alias at line 8)`,
		`rescheduler.interval: Invalid value: "": must be a duration such as 90s, 5m or 1h30m (line 16)`,
		`drain: Invalid value: "not=a=selector": must be a mapping of fields (line 17)`,
		`classification.onDemandSelectors[0]: Invalid value: "not=a=selector": not a label selector`,
		`disruption.windows[2].schedule: Invalid value: "bad cron": not a cron schedule`,
	})
	// The line of a field given by an alias is the alias's.
	_, errs = Parse([]byte(header + "a: &d 5s\nrescheduler:\n  interval: *d\n"))
	if len(errs) != 2 || !strings.Contains(errs[1].Error(), "rescheduler.interval: Invalid value: \"5s\": must be between 10s and 24h0m0s (line 5)") {
		t.Errorf("got %v", errs.ToAggregate())
	}
}

// A list item of the wrong type is reported once, not again by validation as
// the empty value it was decoded to.
func TestWrongTypeReportedOnce(t *testing.T) {
	_, errs := Parse([]byte(header + "classification:\n  spotSelectors: [\"a=b\", {x: 1}]\ndisruption:\n  windows: [{schedule: \"@daily\", duration: soon}]\n"))
	checkErrors(t, errs, []string{
		`classification.spotSelectors[1]: Invalid value: "": must be a string (quote it) (line 4)`,
		`disruption.windows[0].duration: Invalid value: "soon": must be a duration such as 90s, 5m or 1h30m (line 6)`,
	})
}

// Aliases do not multiply the work: a small file that expands to millions of
// values is refused.
func TestAliasExpansionIsBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString(header + "x: &a {")
	for i := range 2000 {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("k" + itoa(i) + ": 1")
	}
	b.WriteString("}\ndisruption:\n  windows: [")
	for i := range 2000 {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("*a")
	}
	b.WriteString("]\n")
	_, errs := Parse([]byte(b.String()))
	msg := (&InvalidError{Errors: errs}).Error()
	if !strings.Contains(msg, "aliases") {
		t.Errorf("want the expansion refused, got %d problems:\n%.500s", len(errs), msg)
	}
	if len(errs) > 10000 {
		t.Errorf("%d problems: the aliases were expanded", len(errs))
	}
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var d []byte
	for ; i > 0; i /= 10 {
		d = append([]byte{byte('0' + i%10)}, d...)
	}
	return string(d)
}

// A problem with a field an override set is not reported at the file's line
// for that field: the value is not the file's.
func TestOverriddenFieldsHaveNoFileLine(t *testing.T) {
	_, errs := Parse([]byte(header+"manager:\n  metricsBindAddress: \":9000\"\n"), func(c *SpotterConfiguration) {
		c.Manager.MetricsBindAddress = "bad"
	})
	if len(errs) != 1 {
		t.Fatalf("got %v", errs.ToAggregate())
	}
	if got := errs[0].Error(); !strings.HasPrefix(got, `manager.metricsBindAddress: Invalid value: "bad"`) || strings.Contains(got, "line") {
		t.Errorf("got %s, want the problem without a line of the file", got)
	}
}

// InvalidError lists a bounded number of problems.
func TestInvalidErrorListsABoundedNumber(t *testing.T) {
	var b strings.Builder
	b.WriteString(header)
	for i := range 5000 {
		b.WriteString("unknown" + itoa(i) + ": 1\n")
	}
	_, errs := Parse([]byte(b.String()))
	msg := (&InvalidError{Errors: errs}).Error()
	if len(errs) != 5000 || !strings.Contains(msg, "5000 problem(s)") || !strings.Contains(msg, "and 4900 more") || strings.Count(msg, "\n") > 110 {
		t.Errorf("%d problems, message of %d lines:\n%.300s", len(errs), strings.Count(msg, "\n"), msg)
	}
}

func checkErrors(t *testing.T, errs field.ErrorList, want []string) {
	t.Helper()
	if len(errs) != len(want) {
		var all []string
		for _, e := range errs {
			all = append(all, e.Error())
		}
		t.Errorf("got %d problems, want %d:\n%s", len(errs), len(want), strings.Join(all, "\n"))
	}
	for i, w := range want {
		if i < len(errs) && !strings.Contains(errs[i].Error(), w) {
			t.Errorf("problem %d:\n got %s\nwant it to contain %s", i, errs[i].Error(), w)
		}
	}
}

// Merge keys take the fields of an anchored mapping; the mapping's own fields
// win.
func TestMergeKeys(t *testing.T) {
	c, errs := Parse([]byte(header + `disruption:
  windows:
  - &w {schedule: "@daily", duration: 1h, timeZone: Europe/Paris}
  - <<: *w
    duration: 2h
  - <<: [*w, {duration: 3h}]
    schedule: "@weekly"
`))
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	w := c.Disruption.Windows
	if len(w) != 3 || w[1].Schedule != "@daily" || w[1].Duration.Hours() != 2 || w[1].TimeZone != "Europe/Paris" ||
		w[2].Schedule != "@weekly" || w[2].Duration.Hours() != 1 {
		t.Errorf("windows: %+v", w)
	}
	_, errs = Parse([]byte(header + "disruption:\n  windows:\n  - <<: {schedule: \"@daily\", durationn: 1h}\n"))
	checkErrors(t, errs, []string{
		`disruption.windows[0].durationn: Invalid value: "durationn": unknown field (did you mean "duration"?)`,
		`disruption.windows[0].duration: Invalid value: "0s": must be between 1m0s and 168h0m0s`,
	})
}

// The decoder reads numbers and booleans as YAML does.
func TestScalarsReadAsYAMLDoes(t *testing.T) {
	for _, v := range []string{"12", "0x1F", "0o17", "0b101", "1_000", "+7", "-0", "017", "2147483647"} {
		var want struct {
			N int32 `yaml:"n"`
		}
		if err := yaml.Unmarshal([]byte("n: "+v), &want); err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		c, errs := Decode([]byte(header + "disruption: {maxConcurrentDrains: " + v + "}\n"))
		if len(errs) > 0 || c.Disruption.MaxConcurrentDrains != want.N {
			t.Errorf("%s: got %d %v, YAML reads %d", v, c.Disruption.MaxConcurrentDrains, errs.ToAggregate(), want.N)
		}
	}
	for _, v := range []string{"1.5", "1e2", ".5", "+.5", "-1.25e-3", "7", "0x10", "1_0.5"} {
		var want struct {
			F float64 `yaml:"f"`
		}
		if err := yaml.Unmarshal([]byte("f: "+v), &want); err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		c, errs := Decode([]byte(header + "pricing: {instanceTypes: {a: {onDemand: " + v + "}}}\n"))
		if len(errs) > 0 || c.Pricing.InstanceTypes["a"].OnDemand != want.F {
			t.Errorf("%s: got %v %v, YAML reads %v", v, c.Pricing.InstanceTypes["a"].OnDemand, errs.ToAggregate(), want.F)
		}
	}
	for _, v := range []string{"true", "True", "TRUE", "false", "False", "FALSE"} {
		var want struct {
			B bool `yaml:"b"`
		}
		if err := yaml.Unmarshal([]byte("b: "+v), &want); err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		c, errs := Decode([]byte(header + "dryRun: " + v + "\n"))
		if len(errs) > 0 || c.DryRun != want.B {
			t.Errorf("%s: got %v %v", v, c.DryRun, errs.ToAggregate())
		}
	}
}
