package scenario_test

import (
	"errors"
	"strings"
	"testing"

	"spotter.dev/spotter/internal/sim/scenario"
)

func TestDefaultScenarioIsValid(t *testing.T) {
	sc := scenario.DefaultScenario()
	if len(sc.Zones) != 3 || len(sc.NodeGroups) != 6 {
		t.Errorf("zones %d, groups %d", len(sc.Zones), len(sc.NodeGroups))
	}
	apps := 0
	for _, w := range sc.Workloads {
		apps += int(w.Count)
	}
	if apps < 35 || apps > 45 {
		t.Errorf("%d workloads, want about 40", apps)
	}
	// Printing and reading back gives the same scenario.
	data, err := scenario.MarshalScenario(sc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := scenario.ParseScenario(data, ""); err != nil {
		t.Errorf("the printed default does not parse: %v", err)
	}
}

// A bad scenario file gets every problem with its field path.
func TestBadScenarios(t *testing.T) {
	base := string(scenario.DefaultScenarioYAML())
	cases := []struct {
		name string
		edit func(string) string
		want []string
	}{
		{"unknown field with suggestion", func(s string) string { return strings.Replace(s, "seed: 1", "sed: 1", 1) },
			[]string{`sed: Invalid value: "sed": unknown field (did you mean "seed"?)`}},
		{"wrong types and values, all reported", func(s string) string {
			s = strings.Replace(s, "duration: 168h", "duration: forever", 1)
			s = strings.Replace(s, "step: 1m", "step: 1s", 1)
			s = strings.Replace(s, "cloud: aws\n  spotCapacity:\n    trace: builtin:availability/16-node/aws-08-27-2023/us-west-2a_v100_1.json",
				"cloud: ibm\n  spotCapacity:\n    trace: builtin:availability/nope.json", 1)
			s = strings.Replace(s, "capacityType: spot, instanceType: m5.xlarge, cpu: 3920m, memory: 15Gi, pricePerHour: 0.072, max: 40}\n- {name: spot-b",
				"capacityType: spotty, instanceType: m5.xlarge, cpu: 3920m, memory: 15Gi, pricePerHour: -1, max: 40}\n- {name: spot-b", 1)
			s = strings.Replace(s, "{name: batch, count: 4,", "{name: batch, count: 4, kind: Job, peakReplicas: 0,", 1)
			return strings.Replace(s, "pdb: {minAvailable: 2}", "pdb: {minAvailable: 2, maxUnavailable: 1}", 1)
		}, []string{
			"duration: Invalid value: \"forever\": must be a duration",
			"step: Invalid value: \"1s\": must be between 10s and 10m0s",
			"zones[1].cloud: Unsupported value: \"ibm\"",
			"zones[1].spotCapacity.trace: Invalid value: \"builtin:availability/nope.json\": no such built-in trace",
			"nodeGroups[3].capacityType: Unsupported value: \"spotty\"",
			"nodeGroups[3].pricePerHour: Invalid value: -1",
			"workloads[3].kind: Unsupported value: \"Job\"",
			"workloads[6].pdb: Invalid value: \"\": set exactly one of minAvailable and maxUnavailable",
		}},
		{"unknown zone and duplicate", func(s string) string {
			s = strings.Replace(s, "{name: on-demand-b, zone: zone-b", "{name: on-demand-a, zone: zone-x", 1)
			return s
		}, []string{"nodeGroups[1].name: Duplicate value: \"on-demand-a\"", "nodeGroups[1].zone: Not found: \"zone-x\""}},
		{"missing trace file", func(s string) string {
			return strings.Replace(s, "trace: builtin:preemption/4-node/aws-08-03-2023/us-east-1f_v100_1.json", "trace: missing.json", 1)
		}, []string{"zones[2].preemptions.trace: Invalid value: \"missing.json\": reading trace"}},
		{"empty", func(string) string { return "" }, []string{"the document is empty"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := scenario.ParseScenario([]byte(tc.edit(base)), t.TempDir())
			var ie *scenario.InvalidScenarioError
			if !errors.As(err, &ie) {
				t.Fatalf("got %v, want an *InvalidScenarioError", err)
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error lacks %q:\n%s", want, err)
				}
			}
		})
	}
}

func FuzzParseTrace(f *testing.F) {
	f.Add([]byte(`{"metadata": {"gap_seconds": 300}, "data": [0, 1, 2]}`))
	f.Add([]byte(`{"metadata": {}, "data": []}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, err := scenario.ParseTrace(data)
		if err != nil {
			return
		}
		if tr.Gap <= 0 || len(tr.Data) == 0 {
			t.Fatalf("accepted a trace without ticks: %+v", tr)
		}
		_ = tr.At(tr.Gap * 1000)
	})
}
