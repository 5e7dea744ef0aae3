package scenario_test

import (
	"errors"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"spotter.dev/spotter/internal/sim/scenario"
	"spotter.dev/spotter/internal/sim/simtest"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// Scenario and trace files that never end are refused at their limit.
func TestScenarioAndTraceFilesAreBounded(t *testing.T) {
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip("no /dev/zero")
	}
	_, err := scenario.LoadScenario("/dev/zero")
	var tl *v1alpha1.TooLargeError
	if !errors.As(err, &tl) || !strings.Contains(err.Error(), "the scenario file is larger than 1 MiB, the limit") {
		t.Errorf("LoadScenario(/dev/zero) = %v", err)
	}
	_, err = simtest.Parse(t, strings.Replace(simtest.Tiny, "{nodes: 3}", "{trace: /dev/zero}", 1))
	if err == nil || !strings.Contains(err.Error(), "zones[1].spotCapacity.trace: Invalid value: \"/dev/zero\": reading trace: the trace file is larger than 16 MiB, the limit") {
		t.Errorf("a trace of /dev/zero: %v", err)
	}
}

// Trace positions wrap for any elapsed time, negative or huge.
func TestTraceIndexNeverOutOfRange(t *testing.T) {
	tr := &scenario.Trace{Gap: time.Minute, Data: []int{1, 2, 3}}
	for _, d := range []time.Duration{0, -1, -time.Minute, math.MinInt64, math.MaxInt64, 3 * time.Minute, 4*time.Minute - 1} {
		if i := tr.Index(d); i < 0 || i >= len(tr.Data) {
			t.Errorf("Index(%d) = %d", d, i)
		}
	}
}

// A number written in the file is kept, zero included; a field left out (or
// null) gets its default.
func TestExplicitZeroIsNotADefault(t *testing.T) {
	body := strings.Replace(simtest.Tiny, "pricePerHour: 0.03}", "pricePerHour: 0.03, max: 0}", 1)
	body = strings.Replace(body, "{trace: builtin:availability/16-node/aws-08-27-2023/us-east-2b_v100_1.json}",
		"{trace: builtin:availability/16-node/aws-08-27-2023/us-east-2b_v100_1.json, scale: 0}", 1)
	body += "load: {peakHour: 0}\ncluster: {podStartup: 0s}\n"
	sc, err := simtest.Parse(t, body)
	if err != nil {
		t.Fatal(err)
	}
	if sc.NodeGroups[1].Max != 0 || sc.Zones[0].SpotCapacity.Scale != 0 || sc.Load.PeakHour != 0 || sc.Cluster.PodStartup.Duration != 0 {
		t.Errorf("explicit zeros replaced: max %d scale %v peakHour %d podStartup %s",
			sc.NodeGroups[1].Max, sc.Zones[0].SpotCapacity.Scale, sc.Load.PeakHour, sc.Cluster.PodStartup.Duration)
	}
	if sc.NodeGroups[0].Max != 100 || sc.Zones[1].SpotCapacity.Scale != 1 || sc.Cluster.GracePeriod.Duration != 30*time.Second || sc.NodeGroups[0].Pods != 110 {
		t.Errorf("unset fields not defaulted: %+v", sc)
	}
	// A printed scenario reads back the same, zeros included.
	data, err := scenario.MarshalScenario(sc)
	if err != nil {
		t.Fatal(err)
	}
	back, err := simtest.Parse(t, string(data))
	if err != nil {
		t.Fatal(err)
	}
	if back.NodeGroups[1].Max != 0 || back.Zones[0].SpotCapacity.Scale != 0 || back.Load.PeakHour != 0 {
		t.Errorf("zeros lost on a round trip:\n%s", data)
	}
	// Null is unset.
	sc, err = simtest.Parse(t, strings.Replace(simtest.Tiny, "pricePerHour: 0.03}", "pricePerHour: 0.03, max: null}", 1))
	if err != nil || sc.NodeGroups[1].Max != 100 {
		t.Errorf("max: null: %v %v", err, sc)
	}

	// A zero that the field does not allow is an error, not a default.
	for _, tc := range []struct{ from, to, want string }{
		{"{name: web, replicas: 3,", "{name: web, count: 0, replicas: 3,", "workloads[0].count: Invalid value: 0: must be between 1 and 1000"},
		{"{name: web, replicas: 3,", "{name: web, peakReplicas: 0, replicas: 3,", "workloads[0].peakReplicas: Invalid value: 0: must be between replicas (3) and 1000"},
		{"pricePerHour: 0.1,", "pricePerHour: 0.1, pods: 0,", "nodeGroups[0].pods: Invalid value: 0: must be 1 or more"},
		{"name: tiny\n", "name: tiny\nseed: 0\n", "seed: Invalid value: 0: must be 1 or more"},
		{"duration: 2h\n", "duration: 0s\n", "duration: Invalid value: \"0s\": must be between 1h0m0s and 720h0m0s"},
		{"{name: web, replicas: 3,", "{name: web, zoneSpread: true, minDomains: 3, replicas: 3,", "workloads[0].minDomains: Invalid value: 3: must be between 0 (unset) and the number of zones (2)"},
		{"{name: web, replicas: 3,", "{name: web, minDomains: 2, replicas: 3,", "workloads[0].minDomains: Invalid value: 2: applies to the zone spread constraint: set zoneSpread: true, or remove minDomains"},
	} {
		if _, err := simtest.Parse(t, strings.Replace(simtest.Tiny, tc.from, tc.to, 1)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want %q", err, tc.want)
		}
	}
}

// A scenario is bounded in total, not only field by field: the product of
// counts cannot ask for millions of pods or nodes.
func TestScenarioTotalsAreBounded(t *testing.T) {
	for _, tc := range []struct{ from, to, want string }{
		{"{name: web, replicas: 3,", "{name: web, count: 1000, replicas: 1000,",
			"workloads: Invalid value: 1000000: the workloads have 1000000 pods at their peak (count × peakReplicas, summed): at most 50000"},
		{"{name: sp, zone: b, capacityType: spot,", "{name: sp, zone: b, capacityType: spot, max: 1000,",
			""},
	} {
		body := strings.Replace(simtest.Tiny, tc.from, tc.to, 1)
		if tc.want == "" {
			// Eleven groups of 1000 nodes.
			for i := range 10 {
				body = strings.Replace(body, "workloads:\n", "- {name: sp"+string(rune('a'+i))+", zone: b, capacityType: spot, cpu: \"2\", memory: 8Gi, max: 1000}\nworkloads:\n", 1)
			}
			tc.want = "nodeGroups: Invalid value: 11100: the node groups can grow to 11100 nodes (max, summed): at most 10000"
		}
		if _, err := simtest.Parse(t, body); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want %q", err, tc.want)
		}
	}
}
