package sim

import (
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"spotter.dev/spotter/internal/sim/scenario"
	"spotter.dev/spotter/internal/sim/simtest"
	"spotter.dev/spotter/internal/sim/strategy"
	"spotter.dev/spotter/internal/sim/world"
)

// A zone whose trace has prices bills its spot nodes at the group's price
// times the trace's price relative to its mean; on-demand nodes keep theirs.
func TestTracePricesSetTheSpotPrice(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "priced.json"), `{"metadata": {"gap_seconds": 3600}, "data": [5, 5], "prices": [1, 3]}`)
	sc, err := scenario.ParseScenario([]byte(`apiVersion: spotter.dev/v1alpha1
kind: SimulationScenario
duration: 2h
zones:
- {name: a, spotCapacity: {trace: priced.json}}
nodeGroups:
- {name: od, zone: a, capacityType: on-demand, cpu: "2", memory: 8Gi, pricePerHour: 0.5, initial: 1}
- {name: sp, zone: a, capacityType: spot, cpu: "2", memory: 8Gi, pricePerHour: 0.2, initial: 1}
workloads:
- {name: web, replicas: 1, cpu: 500m, memory: 1Gi}
`), dir)
	if err != nil {
		t.Fatal(err)
	}
	w, err := world.New(sc, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	var od, sp *world.Group
	for _, g := range w.Groups {
		if g.Spot {
			sp = g
		} else {
			od = g
		}
	}
	for _, tc := range []struct {
		at          time.Duration
		spot, onDem float64
	}{{0, 0.1, 0.5}, {59 * time.Minute, 0.1, 0.5}, {time.Hour, 0.3, 0.5}, {2 * time.Hour, 0.1, 0.5}} {
		w.Clock.SetTime(w.Start().Add(tc.at))
		if got := w.PricePerHour(sp); math.Abs(got-tc.spot) > 1e-12 {
			t.Errorf("spot at %s: %v, want %v", tc.at, got, tc.spot)
		}
		if got := w.PricePerHour(od); got != tc.onDem {
			t.Errorf("on-demand at %s: %v, want %v", tc.at, got, tc.onDem)
		}
	}
	w.Clock.SetTime(w.Start())
	w.Observe(time.Hour)
	w.Clock.SetTime(w.Start().Add(time.Hour))
	w.Observe(time.Hour)
	if want := 0.5 + 0.1 + 0.5 + 0.3; math.Abs(w.Result("test", 1).Cost-want) > 1e-9 {
		t.Errorf("cost of two hours %.4f, want %.4f", w.Result("test", 1).Cost, want)
	}
	rep := run(t, sc, strategy.None)
	if !slices.Equal(rep.PricedZones, []string{"a"}) {
		t.Errorf("priced zones %v", rep.PricedZones)
	}
}

// Relative trace paths resolve against the scenario file's folder in every
// code path, also when flags change the loaded scenario and it is validated
// again (spotter simulate --seed / --duration), from another working folder.
func TestRelativeTracePathsAfterFlags(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "traces"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "traces", "cap.json"), `{"metadata": {"gap_seconds": 60, "note": "x"}, "data": [2, 2, 0, 3]}`)
	writeFile(t, filepath.Join(dir, "s.yaml"), `apiVersion: spotter.dev/v1alpha1
kind: SimulationScenario
duration: 2h
zones:
- {name: a, spotCapacity: {trace: traces/cap.json}, preemptions: {trace: traces/cap.json}}
nodeGroups:
- {name: od, zone: a, capacityType: on-demand, cpu: "2", memory: 8Gi, pricePerHour: 0.1, initial: 1}
- {name: sp, zone: a, capacityType: spot, cpu: "2", memory: 8Gi, pricePerHour: 0.03}
workloads:
- {name: web, replicas: 3, cpu: 500m, memory: 1Gi}
`)
	// Loaded through a relative path, from the scenario's folder.
	t.Chdir(dir)
	sc, err := scenario.LoadScenario("s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	sc.Duration.Duration, sc.Seed = 3*time.Hour, 7
	if errs := scenario.ValidateScenario(sc, ""); len(errs) > 0 {
		t.Fatalf("validated again after --duration and --seed: %v", errs)
	}
	rep := run(t, sc, strategy.None)
	want := []string{`zones[0].spotCapacity.trace: traces/cap.json: unknown field "metadata.note" ignored`,
		`zones[0].preemptions.trace: traces/cap.json: unknown field "metadata.note" ignored`}
	if !slices.Equal(rep.Warnings, want) {
		t.Errorf("warnings %q, want %q", rep.Warnings, want)
	}
	var table strings.Builder
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "Warning: "+want[0]) {
		t.Errorf("the table does not show the warnings:\n%s", table.String())
	}
}

// traceDir is the folder of the embedded traces (scenario/traces/README.md): the
// spot capacity traces of AWS p3.2xlarge in three zones and the preemption
// traces of AWS and GCP, as files.
const traceDir = "scenario/traces"

// Every trace of the folder loads as a file, by a path relative to a scenario
// there (as a trace of the user's own would), and a simulation replays it:
// availability traces as spot capacity, preemption traces as preemptions
// (their prices, when they have some, as the spot price).
func TestTraceFilesLoad(t *testing.T) {
	var files []string
	err := filepath.WalkDir(traceDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".json") {
			rel, _ := filepath.Rel(traceDir, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var builtin []string
	for _, b := range scenario.BuiltinTraces() {
		builtin = append(builtin, strings.TrimPrefix(b, scenario.BuiltinPrefix))
	}
	if len(files) == 0 || !slices.Equal(files, builtin) {
		t.Fatalf("trace files %v, want the built-in traces %v", files, builtin)
	}
	for _, rel := range files {
		t.Run(rel, func(t *testing.T) {
			tr, err := scenario.LoadTrace(rel, traceDir)
			if err != nil {
				t.Fatal(err)
			}
			if len(tr.Data) == 0 || tr.Gap <= 0 || len(tr.Warnings) > 0 {
				t.Errorf("%d ticks of %s, warnings %q", len(tr.Data), tr.Gap, tr.Warnings)
			}
			if strings.Contains(rel, "_intel_64") != (tr.Prices != nil) {
				t.Errorf("prices: %d, want them exactly in the AWS 1-node (r5.16xlarge) traces", len(tr.Prices))
			}
			market := "spotCapacity: {nodes: 10}, preemptions: {trace: " + rel + "}"
			if strings.HasPrefix(rel, "availability/") {
				market = "spotCapacity: {trace: " + rel + "}"
			}
			sc, err := scenario.ParseScenario([]byte(strings.Replace(simtest.Tiny, "{name: b, spotCapacity: {nodes: 3}}", "{name: b, "+market+"}", 1)), traceDir)
			if err != nil {
				t.Fatal(err)
			}
			rep := run(t, sc, strategy.Spotter)
			if (tr.Prices != nil) != slices.Contains(rep.PricedZones, "b") {
				t.Errorf("priced zones %v", rep.PricedZones)
			}
		})
	}
}

func writeFile(t *testing.T, name, body string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}
