package sim

import (
	"errors"
	"os"
	"path/filepath"
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

// A scenario names trace files relative to itself, or synthetic markets.
func TestScenarioFileWithTracesAndSynthetic(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "cap.json"), []byte(`{"metadata": {"gap_seconds": 60}, "data": [2, 2, 0, 3]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "s.yaml")
	if err := os.WriteFile(file, []byte(`apiVersion: spotter.dev/v1alpha1
kind: SimulationScenario
name: tiny
duration: 2h
zones:
- {name: a, spotCapacity: {trace: cap.json}}
- {name: b, cloud: gcp, spotCapacity: {nodes: 3, shortagesPerDay: 2}, preemptions: {ratePerNodeHour: 0.1}}
nodeGroups:
- {name: od, zone: a, capacityType: on-demand, cpu: "2", memory: 8Gi, pricePerHour: 0.1, initial: 1}
- {name: sp, zone: b, capacityType: spot, cpu: "2", memory: 8Gi, pricePerHour: 0.03}
workloads:
- {name: web, replicas: 3, cpu: 500m, memory: 1Gi, pdb: {maxUnavailable: 1}}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	sc, err := scenario.LoadScenario(file)
	if err != nil {
		t.Fatal(err)
	}
	if sc.Step.Duration.String() != "1m0s" || sc.Zones[0].Cloud != "aws" || scenario.Notice(sc.Zones[1].Cloud).String() != "30s" {
		t.Errorf("defaults: %+v", sc)
	}
	if r := run(t, sc); len(r.Results) != 4 {
		t.Errorf("got %d results", len(r.Results))
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
