package gencluster

import (
	"k8s.io/apimachinery/pkg/types"
)

const (
	// Every node has the same allocatable.
	nodeMilliCPU = 8000
	nodeMemory   = 32 << 30
	nodeMaxPods  = 110

	namespaceCount = 20

	// spotFillSpread is how far a spot node's target may lie from SpotFill.
	spotFillSpread = 0.05

	// maxMisses is how many workloads in a row may place no pod at all
	// before the cluster counts as full.
	maxMisses = 50
	// probes random nodes are tried for each replica, and of the first
	// candidates that fit, the one furthest below its target is taken, so
	// that nodes fill evenly and all end near their targets.
	probes     = 32
	candidates = 3
)

var zoneNames = [...]string{"synthetic-1a", "synthetic-1b", "synthetic-1c"}

const zoneCount = len(zoneNames)

// request is the container request of every pod of a workload.
type request struct {
	milliCPU  int64
	mebibytes int64
}

func (r request) bytes() int64 { return r.mebibytes << 20 }

// requestMix is the weighted set workloads draw their request from. It is
// skewed towards small pods so that about 30 pods fill a node to about half
// of its allocatable. The first entry is the smallest in both resources.
var requestMix = []struct {
	request
	weight int
}{
	{request{100, 128}, 75},
	{request{100, 256}, 75},
	{request{100, 512}, 48},
	{request{100, 1024}, 14},
	{request{250, 512}, 10},
	{request{250, 1024}, 7},
	{request{500, 1024}, 3},
	{request{500, 2048}, 3},
	{request{1000, 2048}, 1},
	{request{1000, 4096}, 1},
	{request{2000, 4096}, 1},
}

// replicaCounts are drawn with equal probability.
var replicaCounts = []int{1, 2, 2, 3, 3, 3, 4, 5, 6, 8, 10, 12, 16, 20}

// The fraction of workloads with each feature.
const (
	tolerateShare     = 0.80
	antiAffinityShare = 0.15
	zoneSpreadShare   = 0.15
	pdbShare          = 0.30
)

// A pool is a set of nodes that admit the same pods.
type pool int

const (
	spotPool     pool = iota // spot nodes: pods that tolerate the taint
	spotOnlyPool             // on-demand nodes that take only pods tolerating the spot taint
	mixedPool                // other on-demand nodes: any pod
	poolCount
)

// node is a node of the model: what the writer needs and what placement
// has put on it so far.
type node struct {
	uid      types.UID
	zone     int
	spot     bool
	spotOnly bool
	target   float64 // the utilisation placement aims at
	milliCPU int64   // requested so far
	memory   int64
	pods     int
}

// utilisation is max(CPU, memory) requests over a node's allocatable.
func utilisation(milliCPU, memory int64) float64 {
	return max(float64(milliCPU)/nodeMilliCPU, float64(memory)/nodeMemory)
}

func (n *node) utilisation() float64 { return utilisation(n.milliCPU, n.memory) }

// fill is the share of its target a node has reached.
func (n *node) fill() float64 { return n.utilisation() / n.target }

// takes reports whether one more pod with request r keeps n within its pod
// limit and its target.
func (n *node) takes(r request) bool {
	return n.pods < nodeMaxPods && utilisation(n.milliCPU+r.milliCPU, n.memory+r.bytes()) <= n.target
}

type workload struct {
	index        int // the workload is app-<index>
	team         int // and lives in namespace team-<team>
	req          request
	tolerates    bool // the spot taint
	antiAffinity bool
	zoneSpread   bool
	hasPDB       bool
	hash         string // pod-template-hash, the ReplicaSet's name suffix
	rsUID        types.UID
	pdbUID       types.UID
	pods         []pod
}

type pod struct {
	suffix string // of the pod's name, after the ReplicaSet's
	uid    types.UID
	node   int
}

// Cluster is a generated cluster: nodes and workloads with every pod placed.
// WriteTo writes it as YAML.
type Cluster struct {
	opts      Options
	nodes     []node
	workloads []workload
	// open lists, by pool and zone, the nodes not yet known to be full.
	open [poolCount][zoneCount][]int
}

// Generate builds the cluster o describes. It returns an error only for
// invalid options.
func Generate(o Options) (*Cluster, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	c := &Cluster{opts: o}
	src := &source{state: o.Seed}
	c.addNodes(src)
	c.addWorkloads(src)
	return c, nil
}

func (c *Cluster) addNodes(src *source) {
	o := c.opts
	onDemand := int(float64(o.Nodes)*o.OnDemandFrac + 0.5)
	spotLow := o.SpotFill - spotFillSpread
	c.nodes = make([]node, o.Nodes)
	for i := range c.nodes {
		n := &c.nodes[i]
		n.uid = src.uid()
		n.zone = i % zoneCount
		n.spot = i >= onDemand
		p := mixedPool
		if n.spot {
			n.target = spotLow + 2*spotFillSpread*src.unit()
			p = spotPool
		} else {
			n.target = 0.20 + 0.70*src.unit()
			if n.spotOnly = src.bernoulli(o.SpotOnlyFrac); n.spotOnly {
				p = spotOnlyPool
			}
		}
		c.open[p][n.zone] = append(c.open[p][n.zone], i)
	}
}

func (c *Cluster) addWorkloads(src *source) {
	budget := c.opts.Nodes * c.opts.PodsPerNode
	placed := 0
	for misses := 0; placed < budget && misses < maxMisses; {
		w := workload{index: len(c.workloads), team: src.below(namespaceCount)}
		w.req = drawRequest(src)
		w.tolerates = src.bernoulli(tolerateShare)
		w.antiAffinity = src.bernoulli(antiAffinityShare)
		w.zoneSpread = src.bernoulli(zoneSpreadShare)
		w.hasPDB = src.bernoulli(pdbShare)
		w.hash = src.suffix(10)
		w.rsUID = src.uid()
		if w.hasPDB {
			w.pdbUID = src.uid()
		}
		want := min(replicaCounts[src.below(len(replicaCounts))], budget-placed)
		c.place(src, &w, want)
		if len(w.pods) == 0 {
			misses++
			continue
		}
		misses = 0
		placed += len(w.pods)
		c.workloads = append(c.workloads, w)
	}
}

func drawRequest(src *source) request {
	total := 0
	for _, m := range requestMix {
		total += m.weight
	}
	x := src.below(total)
	for _, m := range requestMix {
		if x < m.weight {
			return m.request
		}
		x -= m.weight
	}
	panic("unreachable: x < total")
}

// place puts up to want replicas of w on nodes, each where the spot taint,
// w's anti-affinity, w's zone spread and the node's target allow it.
func (c *Cluster) place(src *source, w *workload, want int) {
	pools := []pool{mixedPool}
	if w.tolerates {
		pools = []pool{spotPool, spotOnlyPool, mixedPool}
	}
	var perZone [zoneCount]int
	var holding map[int]bool // nodes that already hold a replica, under anti-affinity
	if w.antiAffinity {
		holding = map[int]bool{}
	}
	for len(w.pods) < want {
		i := c.pick(src, w.req, pools, zonesAllowed(w.zoneSpread, perZone), holding)
		if i < 0 {
			return
		}
		n := &c.nodes[i]
		n.milliCPU += w.req.milliCPU
		n.memory += w.req.bytes()
		n.pods++
		perZone[n.zone]++
		if holding != nil {
			holding[i] = true
		}
		w.pods = append(w.pods, pod{suffix: src.suffix(5), uid: src.uid(), node: i})
	}
}

// zonesAllowed returns the zones the next replica may go to. Under a zone
// spread constraint with maxSkew 1 and DoNotSchedule that is the zones
// holding the fewest replicas: any other would raise the skew to 2.
func zonesAllowed(spread bool, perZone [zoneCount]int) []int {
	zones := make([]int, 0, zoneCount)
	fewest := min(perZone[0], perZone[1], perZone[2])
	for z, n := range perZone {
		if !spread || n == fewest {
			zones = append(zones, z)
		}
	}
	return zones
}

// shelf is the open list of one pool in one zone.
type shelf struct {
	pool pool
	zone int
}

// pick returns an open node of pools and zones, not in holding, that takes
// one more pod with request r, or -1 if there is none. Nodes met on the way
// that cannot take even the smallest request are closed.
func (c *Cluster) pick(src *source, r request, pools []pool, zones []int, holding map[int]bool) int {
	shelves := make([]shelf, 0, len(pools)*len(zones))
	open := 0
	for _, p := range pools {
		for _, z := range zones {
			shelves = append(shelves, shelf{p, z})
			open += len(c.open[p][z])
		}
	}
	// nth finds the k-th open node, counting through the shelves in order.
	nth := func(k int) (shelf, int) {
		for _, s := range shelves {
			if l := len(c.open[s.pool][s.zone]); k >= l {
				k -= l
				continue
			}
			return s, k
		}
		panic("unreachable: k < open")
	}
	fits := func(i int) bool { return !holding[i] && c.nodes[i].takes(r) }

	best, found := -1, 0
	for range probes {
		if open == 0 {
			return -1
		}
		s, at := nth(src.below(open))
		i := c.open[s.pool][s.zone][at]
		if fits(i) {
			if best < 0 || c.nodes[i].fill() < c.nodes[best].fill() {
				best = i
			}
			if found++; found == candidates {
				break
			}
			continue
		}
		if !c.nodes[i].takes(requestMix[0].request) {
			c.close(s, at)
			open--
		}
	}
	if best >= 0 {
		return best
	}
	if open == 0 {
		return -1
	}
	// The probes found nothing: look at every open node once, from a random
	// start.
	start := src.below(open)
	for k := range open {
		s, at := nth((start + k) % open)
		if i := c.open[s.pool][s.zone][at]; fits(i) {
			return i
		}
	}
	return -1
}

// close removes the node at position at of shelf s from the open lists.
func (c *Cluster) close(s shelf, at int) {
	l := c.open[s.pool][s.zone]
	l[at] = l[len(l)-1]
	c.open[s.pool][s.zone] = l[:len(l)-1]
}
