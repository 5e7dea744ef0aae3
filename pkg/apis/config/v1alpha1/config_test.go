package v1alpha1

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Set UPDATE_GOLDEN=1 to rewrite testdata/defaults.yaml from the code.
func TestDefaultsGolden(t *testing.T) {
	got, err := Marshal(NewDefaults())
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "defaults.yaml")
	if os.Getenv("UPDATE_GOLDEN") == "1" {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with UPDATE_GOLDEN=1 to create it)", err)
	}
	if string(got) != string(want) {
		t.Errorf("defaults differ from %s; if the change is intended, run UPDATE_GOLDEN=1 go test ./pkg/apis/config/...\n--- got ---\n%s", golden, got)
	}
}

func TestDefaultsAreValidAndRoundTrip(t *testing.T) {
	d := NewDefaults()
	if errs := Validate(d); len(errs) > 0 {
		t.Fatalf("defaults invalid: %v", errs.ToAggregate())
	}
	data, err := Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	back, errs := Parse(data)
	if len(errs) > 0 {
		t.Fatalf("printed defaults do not parse: %v", errs.ToAggregate())
	}
	if !reflect.DeepEqual(normalize(back), normalize(d)) {
		t.Errorf("defaults changed on a round trip:\n got %+v\nwant %+v", back, d)
	}
	// SetDefaults is idempotent.
	again := d.DeepCopy()
	SetDefaults(again)
	if !reflect.DeepEqual(again, d) {
		t.Error("SetDefaults changed an already defaulted configuration")
	}
}

// normalize makes empty and nil collections equal.
func normalize(c *SpotterConfiguration) *SpotterConfiguration {
	c = c.DeepCopy()
	for _, s := range []*[]string{&c.Classification.SpotSelectors, &c.Classification.OnDemandSelectors, &c.Classification.ExcludeSelectors, &c.Cloud.AWS.AutoScalingGroups} {
		if len(*s) == 0 {
			*s = nil
		}
	}
	if len(c.Disruption.Windows) == 0 {
		c.Disruption.Windows = nil
	}
	if len(c.Cloud.GCP.NodeGroups) == 0 {
		c.Cloud.GCP.NodeGroups = nil
	}
	if len(c.Cloud.Azure.NodeGroups) == 0 {
		c.Cloud.Azure.NodeGroups = nil
	}
	if len(c.Pricing.InstanceTypes) == 0 {
		c.Pricing.InstanceTypes = nil
	}
	return c
}

const header = "apiVersion: spotter.dev/v1alpha1\nkind: SpotterConfiguration\n"

func TestParseKeepsSetValues(t *testing.T) {
	c, errs := Parse([]byte(header + `
dryRun: true
rescheduler:
  interval: 30s
  drainDelay: 0s
classification:
  spotSelectors: ["pool=spot", "lifecycle in (spot,preemptible)"]
disruption:
  windows:
  - schedule: "0 22 * * 1-5"
    duration: 8h
pricing:
  instanceTypes:
    m5.large: {onDemand: 0.096, spot: 0.035}
`))
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	if !c.DryRun || c.Rescheduler.Interval.Duration != 30*time.Second {
		t.Errorf("set values lost: dryRun=%v interval=%v", c.DryRun, c.Rescheduler.Interval)
	}
	if c.Rescheduler.DrainDelay.Duration != 0 {
		t.Errorf("drainDelay: 0s must stay 0, got %v", c.Rescheduler.DrainDelay)
	}
	if c.Disruption.Windows[0].TimeZone != "UTC" {
		t.Errorf("window time zone not defaulted: %q", c.Disruption.Windows[0].TimeZone)
	}
	if got := c.Pricing.InstanceTypes["m5.large"].Spot; got != 0.035 {
		t.Errorf("spot price = %v", got)
	}
	if c.Drain.Timeout.Duration != 10*time.Minute {
		t.Errorf("unset field not defaulted: drain.timeout=%v", c.Drain.Timeout)
	}
}

// Every kind of problem is reported with its path (and line); a file with many
// problems reports all of them.
func TestParseReportsProblemsWithPaths(t *testing.T) {
	cases := []struct {
		name string
		body string
		want []string // substrings, one per expected error, in order
	}{
		{"unknown field with suggestion", "rescheduler:\n  intervall: 30s\n",
			[]string{`rescheduler.intervall: Invalid value: "intervall": unknown field (did you mean "interval"?)`}},
		{"unknown top-level field", "reschedular: {}\n",
			[]string{`reschedular: Invalid value: "reschedular": unknown field (did you mean "rescheduler"?)`}},
		{"duplicate field", "dryRun: true\ndryRun: false\n", []string{"dryRun: Duplicate value"}},
		{"wrong type: string for bool", "dryRun: yes\n", []string{"dryRun: Invalid value: \"yes\": must be true or false (line 3)"}},
		{"wrong type: number for duration", "drain:\n  timeout: 30\n", []string{"drain.timeout: Invalid value: \"30\": must be a duration"}},
		{"wrong type: string for int", "disruption:\n  maxConcurrentDrains: two\n", []string{"disruption.maxConcurrentDrains: Invalid value: \"two\": must be a whole number"}},
		{"wrong type: scalar for section", "drain: fast\n", []string{"drain: Invalid value: \"fast\": must be a mapping of fields"}},
		{"wrong type: scalar for list", "classification:\n  spotSelectors: spot\n", []string{"classification.spotSelectors: Invalid value: \"spot\": must be a list"}},
		{"out of range", "disruption:\n  maxConcurrentDrains: 500\n", []string{"disruption.maxConcurrentDrains: Invalid value: 500: must be between 1 and 100 (line 4)"}},
		{"negative saving per eviction", "planner:\n  consolidation:\n    minHourlySavingPerEviction: -1\n", []string{"planner.consolidation.minHourlySavingPerEviction: Invalid value: -1: must be a price per hour from 0 to 1000, in the pricing currency, such as 0.005 (line 5)"}},
		{"duration too short", "rescheduler:\n  interval: 1s\n", []string{"rescheduler.interval: Invalid value: \"1s\": must be between 10s and 24h0m0s"}},
		{"enum", "migrator:\n  mode: BreakFirst\n", []string{`migrator.mode: Unsupported value: "BreakFirst": supported values: "MakeBeforeBreak", "DrainFirst"`}},
		{"agent enums", "agent:\n  cloud: ibm\n  rebalanceAction: Panic\n", []string{
			`agent.cloud: Unsupported value: "ibm": supported values: "auto", "aws", "gcp", "azure"`,
			`agent.rebalanceAction: Unsupported value: "Panic": supported values: "None", "Taint", "Cordon", "Drain"`}},
		{"bad selector", "classification:\n  spotSelectors: [\"a=b=c\"]\n", []string{"classification.spotSelectors[0]: Invalid value: \"a=b=c\": not a label selector"}},
		{"bad cron", "migrator:\n  schedule: every hour\n", []string{"migrator.schedule: Invalid value: \"every hour\": not a cron schedule"}},
		{"bad time zone", "migrator:\n  timeZone: Mars/Base\n", []string{"migrator.timeZone: Invalid value: \"Mars/Base\": not an IANA time zone"}},
		{"migrator's return and risk settings out of range", "migrator:\n  spotReadyDelay: 2h\n  interruptionCost: -1h\n  interruptionWindow: 10m\n  maxSpotSharePercent: 101\n", []string{
			"migrator.spotReadyDelay: Invalid value: \"2h0m0s\": must be between 0s and 1h0m0s",
			"migrator.interruptionCost: Invalid value: \"-1h0m0s\": must be between 0s and 1000h0m0s",
			"migrator.interruptionWindow: Invalid value: \"10m0s\": must be between 1h0m0s and 720h0m0s",
			"migrator.maxSpotSharePercent: Invalid value: 101: must be between 1 and 100"}},
		{"window without duration", "disruption:\n  windows:\n  - schedule: \"@daily\"\n", []string{"disruption.windows[0].duration: Invalid value: \"0s\": must be between 1m0s and 168h0m0s"}},
		{"spot above on-demand", "pricing:\n  instanceTypes:\n    m5.large: {onDemand: 0.1, spot: 0.2}\n", []string{"pricing.instanceTypes[m5.large].spot: Invalid value: 0.2: must not exceed the on-demand price 0.1"}},
		{"negative price", "pricing:\n  instanceTypes:\n    m5.large: {onDemand: -1}\n", []string{"pricing.instanceTypes[m5.large].onDemand: Invalid value: -1: must be a price per hour of 0 or more"}},
		{"bad address", "manager:\n  metricsBindAddress: localhost\n", []string{"manager.metricsBindAddress: Invalid value: \"localhost\": must be host:port"}},
		{"lease timings out of order", "manager:\n  leaderElection:\n    renewDeadline: 20s\n", []string{"manager.leaderElection.leaseDuration: Invalid value: \"15s\": must be between 20s and 10m0s"}},
		{"termination poll interval", "agent:\n  terminationPollInterval: 10ms\n", []string{"agent.terminationPollInterval: Invalid value: \"10ms\""}},
		{"bad endpoint", "agent:\n  metadataEndpoint: 169.254.169.254\n", []string{"agent.metadataEndpoint: Invalid value: \"169.254.169.254\": must be an absolute http:// or https:// URL"}},
		{"agent health probes", "agent:\n  healthProbeBindAddress: localhost\n  readinessFailureThreshold: -1\n", []string{
			"agent.healthProbeBindAddress: Invalid value: \"localhost\": must be host:port",
			"agent.readinessFailureThreshold: Invalid value: -1: must be at least 1: the failed reads in a row of one metadata path that make the agent not ready (line 5)"}},
		{"typo, wrong type and out-of-range together", "rescheduler:\n  intervall: 30s\ndrain:\n  timeout: soon\ndisruption:\n  maxConcurrentDrains: 0\n  windows: [{schedule: \"@daily\", duration: 200h}]\n", []string{
			"rescheduler.intervall: Invalid value: \"intervall\": unknown field",
			"drain.timeout: Invalid value: \"soon\": must be a duration",
			"disruption.windows[0].duration: Invalid value: \"200h0m0s\": must be between 1m0s and 168h0m0s (line 9)"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, errs := Parse([]byte(header + tc.body))
			if c != nil {
				t.Error("Parse returned a configuration despite problems")
			}
			if len(errs) != len(tc.want) {
				t.Fatalf("got %d problems, want %d:\n%v", len(errs), len(tc.want), errs.ToAggregate())
			}
			for i, want := range tc.want {
				if got := errs[i].Error(); !strings.Contains(got, want) {
					t.Errorf("problem %d:\n got %s\nwant it to contain %s", i, got, want)
				}
			}
		})
	}
}

func TestDecodeRequiresHeader(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{"", "the configuration is empty"},
		{"dryRun: true\n", "apiVersion: Required value"},
		{"apiVersion: spotter.dev/v1\nkind: SpotterConfiguration\n", `apiVersion: Unsupported value: "spotter.dev/v1"`},
		{"apiVersion: spotter.dev/v1alpha1\nkind: Config\n", `kind: Unsupported value: "Config"`},
		{header + "---\n" + header, "expected one YAML document"},
		{"{", "not YAML or JSON"},
		{"- a\n- b\n", "must be a mapping of fields"},
	} {
		_, errs := Parse([]byte(tc.body))
		if agg := errs.ToAggregate(); agg == nil || !strings.Contains(agg.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want a problem containing %q", tc.body, agg, tc.want)
		}
	}
	// JSON is accepted too.
	if _, errs := Parse([]byte(`{"apiVersion":"spotter.dev/v1alpha1","kind":"SpotterConfiguration","dryRun":true}`)); len(errs) > 0 {
		t.Errorf("JSON configuration: %v", errs.ToAggregate())
	}
}

func TestOverridesWinOverFile(t *testing.T) {
	c, errs := Parse([]byte(header+"manager:\n  metricsBindAddress: \":9000\"\n"), func(c *SpotterConfiguration) {
		c.DryRun = true
	})
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	if !c.DryRun || c.Manager.MetricsBindAddress != ":9000" {
		t.Errorf("dryRun=%v metrics=%q", c.DryRun, c.Manager.MetricsBindAddress)
	}
}

// checkNode must know every type the configuration uses; a field of a new type
// would otherwise be reported as invalid whatever its value.
func TestEveryFieldTypeIsChecked(t *testing.T) {
	var walk func(t reflect.Type, path string)
	seen := map[reflect.Type]bool{}
	walk = func(rt reflect.Type, path string) {
		for rt.Kind() == reflect.Pointer {
			rt = rt.Elem()
		}
		if seen[rt] {
			return
		}
		seen[rt] = true
		if reflect.PointerTo(rt).Implements(jsonUnmarshaler) {
			if rt != reflect.TypeFor[metav1.Duration]() {
				t.Errorf("%s: type %s has its own JSON form; give checkNode a message for it", path, rt)
			}
			return
		}
		switch rt.Kind() {
		case reflect.Struct:
			for name, ft := range jsonFields(rt) {
				walk(ft, path+"."+name)
			}
		case reflect.Slice, reflect.Map:
			walk(rt.Elem(), path+"[]")
		case reflect.String, reflect.Bool, reflect.Int32, reflect.Float64:
		default:
			t.Errorf("%s: checkNode does not handle %s", path, rt)
		}
	}
	walk(reflect.TypeFor[SpotterConfiguration](), "")
}

func FuzzParse(f *testing.F) {
	golden, err := os.ReadFile(filepath.Join("testdata", "defaults.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(golden)
	f.Add([]byte(header + "rescheduler:\n  interval: 30s\n"))
	f.Add([]byte(header + "pricing: {instanceTypes: {a: {onDemand: 1e308, spot: .nan}}}\n"))
	f.Add([]byte("a: &x [*x]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, errs := Parse(data)
		if (c == nil) == (len(errs) == 0) {
			t.Fatalf("Parse returned config=%v with %d problems", c != nil, len(errs))
		}
		if c != nil {
			if errs := Validate(c); len(errs) > 0 {
				t.Fatalf("Parse accepted an invalid configuration: %v", errs.ToAggregate())
			}
		}
	})
}
