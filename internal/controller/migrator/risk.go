package migrator

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"spotter.dev/spotter/internal/agent/interrupt"
	"spotter.dev/spotter/internal/agent/notice"
	"spotter.dev/spotter/internal/plan"
)

// Market is a spot market as the migrator tells them apart: an instance type
// in a zone, read from the well-known labels of a node or of a node group's
// template node. Spot capacity is taken back per market, so this is the unit
// the migrator counts interruptions and spreads spot nodes by. An empty field
// (a regional group's template has no zone) matches every value.
type Market struct {
	InstanceType, Zone string
}

// MarketOf reads the market of a node (or template node) from its labels.
func MarketOf(n *corev1.Node) Market {
	return Market{InstanceType: n.Labels[plan.InstanceTypeLabel], Zone: n.Labels[corev1.LabelTopologyZone]}
}

// holds reports whether a node of market n is in market m (m's empty fields
// match anything).
func (m Market) holds(n Market) bool {
	return (m.InstanceType == "" || m.InstanceType == n.InstanceType) && (m.Zone == "" || m.Zone == n.Zone)
}

// priorNodeHours is the running time, without interruption, that every
// market is assumed to have beside what was observed: one interruption of a
// node seen for minutes then counts as one per hour, not one per minute.
const priorNodeHours = 1.0

// Interrupted reports whether the agent has tainted node for a termination
// notice (interrupt.TaintKey with the notice kind termination): its capacity
// is being taken back.
func Interrupted(node *corev1.Node) bool {
	for _, t := range node.Spec.Taints {
		if t.Key == interrupt.TaintKey && t.Value == string(notice.Termination) {
			return true
		}
	}
	return false
}

// Risk records what the migrator has seen of the cluster's spot nodes over a
// window: per node its market, when it ran (from its creation to when it was
// last seen), and when it was first seen interrupted (tainted by the agent
// for a termination notice). It is fed by the node informer's events
// (Observe, Gone) and by each run's read of the cache (Sync), so it costs no
// API call. It is safe for concurrent use: the informer's handler and the
// migrator's loop both write to it.
type Risk struct {
	mu     sync.Mutex
	window time.Duration
	nodes  map[string]*seenNode
	// readyAt is when a spot node of a market last became Ready: capacity
	// of that market is there (see Returned).
	readyAt map[Market]time.Time
}

type seenNode struct {
	market      Market
	first, last time.Time // ran from first to last (last: when last seen)
	gone        bool      // not in the cluster any more: ran until last
	interrupted time.Time // zero when never seen interrupted
}

// NewRisk returns an empty record that counts over window.
func NewRisk(window time.Duration) *Risk {
	return &Risk{window: window, nodes: map[string]*seenNode{}, readyAt: map[Market]time.Time{}}
}

// Observe records a spot node as seen at now: alive, and interrupted from now
// when it carries the agent's termination taint (and was not before).
func (r *Risk) Observe(node *corev1.Node, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.observe(node, now)
}

func (r *Risk) observe(node *corev1.Node, now time.Time) {
	s := r.nodes[node.Name]
	if s == nil {
		first := node.CreationTimestamp.Time
		if first.IsZero() || first.After(now) {
			first = now
		}
		s = &seenNode{market: MarketOf(node), first: first}
		r.nodes[node.Name] = s
	}
	s.last, s.gone = now, false
	if s.interrupted.IsZero() && Interrupted(node) {
		s.interrupted = now
	}
}

// Ready records that a spot node of market m became Ready at now.
func (r *Risk) Ready(m Market, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now.After(r.readyAt[m]) {
		r.readyAt[m] = now
	}
}

// Returned reports whether a spot node of market m (or one it holds) became
// Ready after since: the market delivers capacity again.
func (r *Risk) Returned(m Market, since time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, at := range r.readyAt {
		if m.holds(k) && at.After(since) {
			return true
		}
	}
	return false
}

// Gone records that a node left the cluster at now.
func (r *Risk) Gone(name string, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s := r.nodes[name]; s != nil && !s.gone {
		s.last, s.gone = now, true
	}
}

// Sync brings the record in line with the spot nodes the cache holds at now:
// each is observed, and a node recorded alive that is not among them is
// gone (since it was last seen: an informer's delete event, when it came,
// said exactly when). Records older than the window are forgotten.
func (r *Risk) Sync(spot []*corev1.Node, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	alive := make(map[string]bool, len(spot))
	for _, n := range spot {
		alive[n.Name] = true
		r.observe(n, now)
	}
	from := now.Add(-r.window)
	for name, s := range r.nodes {
		if !alive[name] {
			s.gone = true
		}
		if s.gone && s.last.Before(from) {
			delete(r.nodes, name)
		}
	}
	for m, at := range r.readyAt {
		if at.Before(from) {
			delete(r.readyAt, m)
		}
	}
}

// MarketStats are what the record says of a market over the window ending at
// a time.
type MarketStats struct {
	// Interruptions counts the nodes first seen interrupted in the window.
	Interruptions int
	// NodeHours is how long its spot nodes ran in the window, together.
	NodeHours float64
	// Nodes counts its spot nodes alive and not interrupted.
	Nodes int
}

// Rate is the observed interruptions per node-hour, with priorNodeHours of
// uninterrupted running added so that a market seen briefly is not judged on
// minutes; 0 without interruptions.
func (s MarketStats) Rate() float64 {
	return float64(s.Interruptions) / (s.NodeHours + priorNodeHours)
}

// Stats returns what the record says of market m over the window ending at
// now.
func (r *Risk) Stats(m Market, now time.Time) MarketStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	from := now.Add(-r.window)
	var st MarketStats
	for _, s := range r.nodes {
		if !m.holds(s.market) {
			continue
		}
		end := now
		if s.gone {
			end = s.last
		}
		if start := maxTime(s.first, from); end.After(start) {
			st.NodeHours += end.Sub(start).Hours()
		}
		if !s.interrupted.IsZero() && !s.interrupted.Before(from) {
			st.Interruptions++
		}
		if !s.gone && s.interrupted.IsZero() {
			st.Nodes++
		}
	}
	return st
}

// SpotNodes counts the spot nodes alive and not interrupted, of any market.
func (r *Risk) SpotNodes() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, s := range r.nodes {
		if !s.gone && s.interrupted.IsZero() {
			n++
		}
	}
	return n
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
