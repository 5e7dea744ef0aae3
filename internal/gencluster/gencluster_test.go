package gencluster

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"spotter.dev/spotter/internal/snapshot"
)

func options(mods ...func(*Options)) Options {
	o := DefaultOptions()
	o.Nodes = 45
	for _, m := range mods {
		m(&o)
	}
	return o
}

func generate(t *testing.T, o Options) (*Cluster, []byte) {
	t.Helper()
	c, err := Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	n, err := c.WriteTo(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(buf.Len()) {
		t.Fatalf("WriteTo returned %d, wrote %d bytes", n, buf.Len())
	}
	return c, buf.Bytes()
}

func TestDeterministic(t *testing.T) {
	_, first := generate(t, options())
	_, second := generate(t, options())
	if !bytes.Equal(first, second) {
		t.Fatal("the same options gave different bytes")
	}
	_, other := generate(t, options(func(o *Options) { o.Seed = 2 }))
	if bytes.Equal(first, other) {
		t.Fatal("seeds 1 and 2 gave the same bytes")
	}
}

// The statistics of a small cluster, as the tool this package replaced
// printed them for the same flags (and, below, the bytes it wrote, less the
// registry prefix, 16 bytes, of its pods' image, which this package leaves
// out).
func TestStats(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  Options
		want  string
		bytes int
	}{{
		name:  "-nodes 90",
		opts:  options(func(o *Options) { o.Nodes = 90 }),
		want:  "gencluster seed=1: nodes=90 (on-demand=54 spot-only-on-demand=17 spot=36) workloads=363 (spot-tolerating=284 anti-affinity=58 zone-spread=55) pods=2540 (28.2/node) pdbs=104 util min/mean/max on-demand=20/54/89% spot=44/50/54%",
		bytes: 3144670 - 2540*16,
	}, {
		name: "dense, more pods, another seed",
		opts: options(func(o *Options) {
			o.Nodes, o.SpotFill, o.Seed, o.OnDemandFrac, o.SpotOnlyFrac, o.PodsPerNode = 120, 0.8, 7, 0.5, 0.2, 40
		}),
		want:  "gencluster seed=7: nodes=120 (on-demand=60 spot-only-on-demand=10 spot=60) workloads=682 (spot-tolerating=544 anti-affinity=110 zone-spread=101) pods=4800 (40.0/node) pdbs=234 util min/mean/max on-demand=21/53/83% spot=68/73/79%",
		bytes: 5867292 - 4800*16,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			c, out := generate(t, tc.opts)
			if got := c.Stats().String(); got != tc.want {
				t.Errorf("Stats:\n got %s\nwant %s", got, tc.want)
			}
			if len(out) != tc.bytes {
				t.Errorf("wrote %d bytes, want %d", len(out), tc.bytes)
			}
		})
	}
}

// Every placement honours the constraints the package comment promises, and
// the file loads as a snapshot with the counts Stats reports.
func TestPlacement(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"defaults", options()},
		{"dense spot", options(func(o *Options) { o.SpotFill = 0.85 })},
		{"all spot", options(func(o *Options) { o.OnDemandFrac = 0 })},
		{"all on-demand, all spot-only", options(func(o *Options) { o.OnDemandFrac, o.SpotOnlyFrac = 1, 1 })},
		{"full nodes", options(func(o *Options) { o.Nodes, o.PodsPerNode = 12, 110 })},
		{"no pods", options(func(o *Options) { o.PodsPerNode = 0 })},
		{"one node", options(func(o *Options) { o.Nodes = 1 })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, out := generate(t, tc.opts)
			s, err := snapshot.Load(bytes.NewReader(out))
			if err != nil {
				t.Fatal(err)
			}
			st := c.Stats()
			if len(s.Nodes) != st.Nodes || len(s.Pods) != st.Pods || len(s.PDBs) != st.PDBs {
				t.Fatalf("loaded %s, Stats says %d nodes, %d pods, %d PDBs", s.Counts(), st.Nodes, st.Pods, st.PDBs)
			}
			if st.Pods > tc.opts.Nodes*tc.opts.PodsPerNode {
				t.Errorf("%d pods, more than nodes × pods-per-node", st.Pods)
			}
			checkPlacement(t, tc.opts, s)
			for i := range c.workloads {
				w := &c.workloads[i]
				for _, p := range w.pods {
					if n := &c.nodes[p.node]; n.spotOnly && !w.tolerates {
						t.Errorf("%s, which does not tolerate spot, is on spot-only node %s", w.name(), nodeName(p.node))
					}
				}
			}
		})
	}
}

func checkPlacement(t *testing.T, o Options, s *snapshot.Snapshot) {
	t.Helper()
	type use struct{ milliCPU, memory, pods int64 }
	nodes := map[string]*corev1.Node{}
	used := map[string]*use{}
	for _, n := range s.Nodes {
		nodes[n.Name] = n
		used[n.Name] = &use{}
	}
	type key struct{ ns, app string }
	hosts := map[key]map[string]bool{}
	zones := map[key]map[string]int{}
	replicas := map[key]int32{}
	for _, p := range s.Pods {
		n := nodes[p.Spec.NodeName]
		if n == nil {
			t.Fatalf("pod %s/%s is on unknown node %q", p.Namespace, p.Name, p.Spec.NodeName)
		}
		req := p.Spec.Containers[0].Resources.Requests
		u := used[n.Name]
		u.milliCPU += req.Cpu().MilliValue()
		u.memory += req.Memory().Value()
		u.pods++
		if len(n.Spec.Taints) > 0 && len(p.Spec.Tolerations) == 0 {
			t.Errorf("pod %s/%s does not tolerate the taint of %s", p.Namespace, p.Name, n.Name)
		}
		k := key{p.Namespace, p.Labels["app"]}
		replicas[k]++
		if p.Spec.Affinity != nil {
			if hosts[k] == nil {
				hosts[k] = map[string]bool{}
			}
			if hosts[k][n.Name] {
				t.Errorf("two pods of %s with hostname anti-affinity on %s", k.app, n.Name)
			}
			hosts[k][n.Name] = true
		}
		if len(p.Spec.TopologySpreadConstraints) > 0 {
			if zones[k] == nil {
				zones[k] = map[string]int{}
			}
			zones[k][n.Labels[labelZone]]++
		}
	}
	for k, perZone := range zones {
		lo, hi := replicas[k], int32(0)
		for _, z := range zoneNames {
			lo, hi = min(lo, int32(perZone[z])), max(hi, int32(perZone[z]))
		}
		if hi-lo > 1 {
			t.Errorf("%s: zone skew %d, over maxSkew 1: %v", k.app, hi-lo, perZone)
		}
	}
	for _, n := range s.Nodes {
		u, alloc := used[n.Name], n.Status.Allocatable
		if u.milliCPU > alloc.Cpu().MilliValue() || u.memory > alloc.Memory().Value() || u.pods > alloc.Pods().Value() {
			t.Errorf("node %s overcommitted: %+v of %v", n.Name, *u, alloc)
		}
		limit := 0.90
		if n.Labels[labelCapacityType] == "spot" {
			limit = o.SpotFill + spotFillSpread
		}
		if got := utilisation(u.milliCPU, u.memory); got > limit+1e-9 {
			t.Errorf("node %s at %.3f, over %.2f", n.Name, got, limit)
		}
	}
	for _, pdb := range s.PDBs {
		k := key{pdb.Namespace, pdb.Spec.Selector.MatchLabels["app"]}
		if pdb.Status.ExpectedPods != replicas[k] || replicas[k] == 0 {
			t.Errorf("PDB %s/%s expects %d pods, %d exist", pdb.Namespace, pdb.Name, pdb.Status.ExpectedPods, replicas[k])
		}
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		want string // in the error; "" for none
	}{
		{"defaults", DefaultOptions(), ""},
		{"no nodes", options(func(o *Options) { o.Nodes = 0 }), "-nodes"},
		{"too many pods per node", options(func(o *Options) { o.PodsPerNode = 111 }), "-pods-per-node"},
		{"negative pods per node", options(func(o *Options) { o.PodsPerNode = -1 }), "-pods-per-node"},
		{"on-demand over 1", options(func(o *Options) { o.OnDemandFrac = 1.5 }), "-ondemand-frac"},
		{"spot-only negative", options(func(o *Options) { o.SpotOnlyFrac = -0.1 }), "-spot-only-frac"},
		{"spot fill zero", options(func(o *Options) { o.SpotFill = 0 }), "-spot-fill"},
		{"spot fill over allocatable", options(func(o *Options) { o.SpotFill = 1 }), "-spot-fill"},
		{"spot fill at its maximum", options(func(o *Options) { o.SpotFill = 0.95 }), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Generate(tc.opts)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one naming %s", err, tc.want)
			}
		})
	}
}

// parseArgs parses the command's flags, as the command does.
func parseArgs(t *testing.T, args ...string) Options {
	t.Helper()
	o := DefaultOptions()
	fs := flag.NewFlagSet("gencluster", flag.ContinueOnError)
	o.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return o
}

func TestBindFlags(t *testing.T) {
	if got := parseArgs(t); got != DefaultOptions() {
		t.Errorf("no flags: %+v, want the defaults %+v", got, DefaultOptions())
	}
	got := parseArgs(t, "-nodes", "5", "-pods-per-node", "7", "-ondemand-frac", "0.25", "-spot-only-frac", "0.5", "-spot-fill", "0.85", "-seed", "9")
	want := Options{Nodes: 5, PodsPerNode: 7, OnDemandFrac: 0.25, SpotOnlyFrac: 0.5, SpotFill: 0.85, Seed: 9}
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

// writeRecorder keeps the size of the largest write and can fail after some
// bytes.
type writeRecorder struct {
	largest, total, failAfter int
}

var errFull = errors.New("disk full")

func (w *writeRecorder) Write(p []byte) (int, error) {
	if w.failAfter > 0 && w.total+len(p) > w.failAfter {
		return 0, errFull
	}
	w.largest, w.total = max(w.largest, len(p)), w.total+len(p)
	return len(p), nil
}

func TestWriteToStreams(t *testing.T) {
	c, err := Generate(options(func(o *Options) { o.Nodes = 100 }))
	if err != nil {
		t.Fatal(err)
	}
	var w writeRecorder
	if _, err := c.WriteTo(&w); err != nil {
		t.Fatal(err)
	}
	// The output is about 3.5 MB; the writer must see it in buffer-sized
	// pieces.
	if w.total < 3<<20 || w.largest > 1<<20 {
		t.Errorf("%d bytes, largest write %d: want over 3 MiB in writes of at most 1 MiB", w.total, w.largest)
	}

	failing := writeRecorder{failAfter: 2 << 20}
	if n, err := c.WriteTo(&failing); !errors.Is(err, errFull) || n != int64(failing.total) {
		t.Errorf("WriteTo to a failing writer: %d bytes, %v; want %d bytes, %v", n, err, failing.total, errFull)
	}
}

func TestWriteFile(t *testing.T) {
	c, want := generate(t, options(func(o *Options) { o.Nodes = 10 }))
	dir := t.TempDir()
	path := filepath.Join(dir, "cluster.yaml")
	if _, err := c.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the file differs from WriteTo's output (read error %v)", err)
	}
	if _, err := c.WriteFile(filepath.Join(dir, "missing", "cluster.yaml")); err == nil {
		t.Fatal("writing into a missing directory succeeded")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("left %d files behind, want only cluster.yaml", len(entries))
	}
}
