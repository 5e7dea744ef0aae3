package plan

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"spotter.dev/spotter/internal/classify"
	"spotter.dev/spotter/internal/gencluster"
	"spotter.dev/spotter/internal/snapshot"
)

// Benchmarks on the synthetic clusters of internal/gencluster, generated at
// benchmark time (and cached in the temp directory by their flags, the flags
// of go run ./hack/gencluster):
//
//	go test ./internal/plan -run '^$' -bench Plan -benchtime 5x
func BenchmarkPlan1000(b *testing.B)      { benchPlan(b, "-nodes", "1000") }
func BenchmarkPlan1000Dense(b *testing.B) { benchPlan(b, "-nodes", "1000", "-spot-fill", "0.85") }
func BenchmarkPlan5000(b *testing.B)      { benchPlan(b, "-nodes", "5000") }

// The same with consolidation (every node priced as the on-demand price of
// consolidationPrices): the time of the consolidation pass, and how many
// nodes it adds.
//
//	go test ./internal/plan -run '^$' -bench Consolidation -benchtime 5x
func BenchmarkPlan1000Consolidation(b *testing.B) {
	benchPlanWith(b, Options{Pricing: consolidationPrices, Consolidation: Consolidation{Enabled: true, MinHourlySavingPerEviction: 0.005}}, "-nodes", "1000")
}
func BenchmarkPlan5000Consolidation(b *testing.B) {
	benchPlanWith(b, Options{Pricing: consolidationPrices, Consolidation: Consolidation{Enabled: true, MinHourlySavingPerEviction: 0.005}}, "-nodes", "5000")
}

// The exhaustive planner (every plugin afresh for every pod on every spot
// node) must agree with the planner on the benchmark files too: the same
// drainable nodes and the same destination for every pod. It reports how long
// the exhaustive plan takes.
//
//	go test ./internal/plan -run '^$' -bench Exhaustive -benchtime 1x
func BenchmarkExhaustive1000(b *testing.B) { benchExhaustive(b, "-nodes", "1000") }
func BenchmarkExhaustive1000Dense(b *testing.B) {
	benchExhaustive(b, "-nodes", "1000", "-spot-fill", "0.85")
}
func BenchmarkExhaustive5000(b *testing.B) { benchExhaustive(b, "-nodes", "5000") }

// Waves: how many nodes are drainable with waves and with the rule before
// them (a budget must allow all of a node's pods at once), and how many of
// them go in more than one wave. The plan time is BenchmarkPlan1000's.
//
//	go test ./internal/plan -run '^$' -bench Waves -benchtime 1x
func BenchmarkWaves1000(b *testing.B)      { benchWaves(b, "-nodes", "1000") }
func BenchmarkWaves1000Dense(b *testing.B) { benchWaves(b, "-nodes", "1000", "-spot-fill", "0.85") }
func BenchmarkWaves5000(b *testing.B)      { benchWaves(b, "-nodes", "5000") }

func benchWaves(b *testing.B, args ...string) {
	s := loadGenerated(b, args...)
	ctx := context.Background()
	before := New(Options{})
	before.oneWave = true
	for b.Loop() {
		with, err := New(Options{}).Plan(ctx, s)
		if err != nil {
			b.Fatal(err)
		}
		without, err := before.Plan(ctx, s)
		if err != nil {
			b.Fatal(err)
		}
		waved := 0
		for _, n := range with.Nodes {
			if n.Waves > 1 {
				waved++
			}
		}
		b.ReportMetric(float64(with.Summary.DrainableNodes), "drainable")
		b.ReportMetric(float64(without.Summary.DrainableNodes), "drainable-one-wave")
		b.ReportMetric(float64(waved), "in-waves")
	}
}

func benchExhaustive(b *testing.B, args ...string) {
	s := loadGenerated(b, args...)
	ctx := context.Background()
	fast, err := New(Options{}).Plan(ctx, s)
	if err != nil {
		b.Fatal(err)
	}
	ref := New(Options{})
	ref.exhaustive = true
	b.ResetTimer()
	for b.Loop() {
		slow, err := ref.Plan(ctx, s)
		if err != nil {
			b.Fatal(err)
		}
		if diffs := comparePlans(fast, slow); len(diffs) > 0 {
			b.Fatalf("%d disagreements with the exhaustive planner, first: %s", len(diffs), diffs[0])
		}
	}
	b.ReportMetric(float64(fast.Summary.DrainableNodes), "drainable")
}

func benchPlan(b *testing.B, args ...string) { benchPlanWith(b, Options{}, args...) }

func benchPlanWith(b *testing.B, opts Options, args ...string) {
	s := loadGenerated(b, args...)
	if len(opts.Pricing.InstanceTypes) > 0 {
		for _, n := range s.Nodes {
			n.Labels[InstanceTypeLabel] = "m5.xlarge"
		}
	}
	p := New(opts)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	var drainable, consolidated int
	var times []time.Duration
	for b.Loop() {
		start := time.Now()
		out, err := p.Plan(ctx, s)
		if err != nil {
			b.Fatal(err)
		}
		times = append(times, time.Since(start))
		drainable, consolidated = out.Summary.DrainableNodes, out.Summary.ConsolidatedNodes
	}
	// ns/op is the mean; a plan that a garbage collection of the loaded
	// snapshot (hundreds of MB live) overlaps takes longer, so the median is
	// reported too.
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2])/1e6, "ms-median")
	b.ReportMetric(float64(drainable), "drainable")
	if opts.Consolidation.Enabled {
		b.ReportMetric(float64(consolidated), "consolidated")
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MiB")
}

// loadGenerated loads the cluster that go run ./hack/gencluster writes for
// args, generating it in-process into the temp directory the first time. The
// cached file is named after the flags only: delete the spotter-gencluster_*
// files there when the generator's output changes.
func loadGenerated(b *testing.B, args ...string) *snapshot.Snapshot {
	b.Helper()
	opts := gencluster.DefaultOptions()
	flags := flag.NewFlagSet("gencluster", flag.ContinueOnError)
	opts.BindFlags(flags)
	if err := flags.Parse(args); err != nil {
		b.Fatal(err)
	}
	name := "spotter-gencluster"
	for _, a := range args {
		name += "_" + filepath.Base(a)
	}
	path := filepath.Join(os.TempDir(), name+".yaml")
	if _, err := os.Stat(path); err != nil {
		c, err := gencluster.Generate(opts)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.WriteFile(path); err != nil {
			b.Fatal(err)
		}
	}
	s, err := snapshot.LoadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	if len(s.Nodes) == 0 {
		b.Fatal(fmt.Errorf("no nodes in %s", path))
	}
	return s
}

// The drains' re-check before each eviction, on the generated clusters:
// BenchmarkRecheckFresh builds a snapshot of the whole cluster per question
// (as every re-check did before the Resident), BenchmarkRecheckResident
// answers from a kept one after applying one pod change (a pod of another
// on-demand node replaced by a copy, as an eviction's replacement would be).
// Each question is about a pod of an on-demand node.
func BenchmarkRecheckFresh1000(b *testing.B)    { benchRecheck(b, false, "-nodes", "1000") }
func BenchmarkRecheckResident1000(b *testing.B) { benchRecheck(b, true, "-nodes", "1000") }
func BenchmarkRecheckFresh5000(b *testing.B)    { benchRecheck(b, false, "-nodes", "5000") }
func BenchmarkRecheckResident5000(b *testing.B) { benchRecheck(b, true, "-nodes", "5000") }

func benchRecheck(b *testing.B, resident bool, args ...string) {
	s := loadGenerated(b, args...)
	p := New(Options{})
	var asked []*corev1.Pod
	for _, pod := range s.Pods {
		if n := nodeNamed(s, pod.Spec.NodeName); n != nil && p.Classify(n).Class == classify.OnDemand {
			asked = append(asked, pod)
			if len(asked) == 200 {
				break
			}
		}
	}
	res := p.NewResident(func(context.Context) (*snapshot.Snapshot, error) { return s, nil })
	res.Fed()
	ctx := context.Background()
	if _, _, err := res.FitsOnSpot(ctx, asked[0]); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		pod := asked[i%len(asked)]
		if !resident {
			if _, _, err := p.FitsOnSpot(ctx, s, pod); err != nil {
				b.Fatal(err)
			}
			continue
		}
		other := asked[(i+1)%len(asked)]
		c := other.DeepCopy()
		c.UID += types.UID(fmt.Sprint("-", i))
		res.PodChanged(other, nil)
		res.PodChanged(nil, c)
		asked[(i+1)%len(asked)] = c
		if _, _, err := res.FitsOnSpot(ctx, pod); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	// About five changes a question (the replacement, and the question's own
	// moves); the snapshot is built again after as many as the cluster has
	// pods.
	if st := res.Stats(); resident && st.Builds > 1+b.N*5/len(s.Pods) {
		b.Fatalf("%+v: the kept snapshot was built again too often", st)
	}
}
