package sim

import (
	"context"
	"slices"
	"sort"
	"time"
)

// sampleEvery is the spacing of the time series in the report.
const sampleEvery = 10 * time.Minute

// Result is what one strategy's run measured. Every figure is computed from
// the simulation; none is set by hand.
type Result struct {
	Strategy string `json:"strategy"`
	// Cost is the price of every node from its launch request to its
	// termination, in the scenario's currency.
	Cost float64 `json:"cost"`
	// Saving is the share of the all-on-demand baseline's cost saved (0.3 is
	// 30%); 0 for the baseline itself.
	Saving float64 `json:"saving"`
	// BoundShare is the share of the bound's saving this run achieved:
	// Saving divided by the bound's Saving (1 is all of it, which no run can
	// pass while it runs every pod). Absent for the baseline and the bound,
	// and when the bound saves nothing.
	BoundShare *float64 `json:"boundShare,omitempty"`
	// PackingShare is the share of the packing heuristic's saving this run
	// achieved: Saving divided by the packing's Saving. Absent for the
	// baseline, and when the packing saves nothing.
	PackingShare *float64 `json:"packingShare,omitempty"`
	// SpotShare is the share of pod-hours (pods bound to a node) on spot nodes.
	SpotShare float64 `json:"spotShare"`
	// Evictions counts voluntary evictions (Eviction API calls that succeeded)
	// by strategy components; EvictionsPerPodDay divides them by the average
	// number of pods and the days simulated.
	Evictions          int            `json:"evictions"`
	EvictionsBy        map[string]int `json:"evictionsBy,omitempty"`
	EvictionsPerPodDay float64        `json:"evictionsPerPodDay"`
	// EvictionsRefused counts evictions a PodDisruptionBudget refused (429),
	// EvictionsRefusedBy by strategy component (the agent's drains of nodes
	// being taken back included).
	EvictionsRefused   int            `json:"evictionsRefused"`
	EvictionsRefusedBy map[string]int `json:"evictionsRefusedBy,omitempty"`
	// WastedEvictions counts pods evicted by drains that were then abandoned,
	// leaving their node in place.
	WastedEvictions int `json:"wastedEvictions"`
	// PreemptedNodes are spot nodes the market took back; PreemptedPods the
	// pods running on them when the notice came.
	PreemptedNodes int `json:"preemptedNodes"`
	PreemptedPods  int `json:"preemptedPods"`
	// PendingPodMinutes adds up the minutes each pod spent Pending (unbound).
	PendingPodMinutes float64 `json:"pendingPodMinutes"`
	// LostPodMinutes adds up the minutes pods spent on a node that was gone
	// before their controller noticed (no drain on the notice).
	LostPodMinutes float64 `json:"lostPodMinutes"`
	// PDBBelowBudgetPodMinutes adds up, over the workloads with a
	// PodDisruptionBudget, the pods missing below what the budget demands
	// (desired healthy less healthy, as the disruption controller counts
	// them), minute by minute, whatever the cause: evictions, preemptions,
	// lost nodes, pods still starting after a scale-up. What a user feels,
	// where EvictionsRefused is what the budgets held back.
	PDBBelowBudgetPodMinutes float64 `json:"pdbBelowBudgetPodMinutes"`
	// PDBBelowBudgetVoluntaryPodMinutes is the part of
	// PDBBelowBudgetPodMinutes during which the workload had pods evicted
	// voluntarily (by the strategy, not the agent's drains before a node
	// goes) whose replacements were not Ready yet: at most as many pods as
	// those, minute by minute. The Eviction API refuses an eviction that
	// would take a budget below what it demands; the budget can still fall
	// below while a replacement starts, when something else (a preemption)
	// takes a pod too. An upper bound on what voluntary evictions caused.
	PDBBelowBudgetVoluntaryPodMinutes float64 `json:"pdbBelowBudgetVoluntaryPodMinutes"`
	// ZoneSpreadShortZoneMinutes adds up, over the workloads whose pods must
	// spread over zones (a topology spread constraint on the zone label,
	// DoNotSchedule), the zones missing from where their running pods are,
	// minute by minute: the zones where a node group takes their pods (or as
	// many as their pods, when fewer) less the zones their pods are in. The
	// scheduler spreads over the zones that have nodes only, and never moves
	// a running pod: a cluster whose nodes all leave a zone keeps such a
	// workload "spread" over the zones left, and pods placed while a zone had
	// no node stay where they are when it has one again. This counts the
	// resilience given up, in every row (a scale-down's order ignores zones
	// too).
	ZoneSpreadShortZoneMinutes float64 `json:"zoneSpreadShortZoneMinutes"`
	// PDBViolations counts voluntary evictions after which a
	// PodDisruptionBudget had fewer healthy pods than it demands. The
	// Eviction API refuses those, so it stays 0: a check of the model.
	PDBViolations int `json:"pdbViolations"`
	// BackToSpot measures how long spot capacity stayed unused while
	// spot-eligible pods ran on on-demand nodes of the same zone.
	BackToSpot BackToSpot `json:"backToSpot"`
	// NodesLaunched counts node launch requests that succeeded.
	NodesLaunched int `json:"nodesLaunched"`
	// SpotStockOuts counts spot node requests accepted by a cloud that
	// reports stock-outs late, and failed (see spotCapacity.stockOutDelay).
	SpotStockOuts int `json:"spotStockOuts,omitempty"`
	// Series holds the state every 10 simulated minutes, for the charts.
	Series []Sample `json:"series"`
	// Preemptions lists every preemption notice.
	Preemptions []Mark `json:"preemptions"`
}

// BackToSpot is the "time back to spot after a shortage": an episode opens
// when a zone has both spot capacity to spare and spot-eligible pods on its
// on-demand nodes, and closes when no zone has both.
type BackToSpot struct {
	Episodes    int     `json:"episodes"`
	MeanMinutes float64 `json:"meanMinutes"`
	MaxMinutes  float64 `json:"maxMinutes"`
	// OpenAtEnd is true when an episode was still open when the run ended (it
	// is counted with its length so far).
	OpenAtEnd bool `json:"openAtEnd"`
}

// Sample is the state at one time.
type Sample struct {
	// Hours since the start.
	Hours         float64 `json:"hours"`
	Cost          float64 `json:"cost"`
	SpotShare     float64 `json:"spotShare"`
	Pending       int     `json:"pending"`
	SpotNodes     int     `json:"spotNodes"`
	OnDemandNodes int     `json:"onDemandNodes"`
	// Capacity is each zone's spot capacity (market), in scenario order.
	Capacity []int `json:"capacity"`
}

// Mark is a preemption notice.
type Mark struct {
	Hours float64 `json:"hours"`
	Zone  string  `json:"zone"`
	Node  string  `json:"node"`
	Pods  int     `json:"pods"`
}

// recorder accumulates a run's metrics, step by step.
type recorder struct {
	w                                  *World
	r                                  Result
	podSeconds, spotPodSeconds         float64
	pendingSeconds, lostSeconds        float64
	belowBudgetSeconds                 float64
	belowBudgetVoluntarySeconds        float64
	podCountSum, steps                 float64
	episode                            time.Duration
	inEpisode                          bool
	episodes                           []time.Duration
	nextSample                         time.Duration
	launched                           int
	stockOuts                          int
	refused, wasted, violations, evict int
	evictBy, refusedBy                 map[string]int
	// draining counts, by component, the evictions of the drain each has
	// under way (drainStarted to drainEnded): Spotter's drains, seen
	// through the API.
	draining map[string]int
	// spread are the workloads that must spread over zones, with the zones
	// where they may run (watchSpread); spreadShortSeconds the zones missing
	// from where their pods are, times seconds.
	spread             []spreadApp
	spreadShortSeconds float64
}

// spreadApp is a workload spread over zones and the zones where a node group
// takes its pods.
type spreadApp struct {
	a     *App
	zones map[*zone]bool
}

// watchSpread finds the workloads that must spread over zones and, with fits
// (whether an app's pod passes the filter plugins on a node of a group), the
// zones where they may run: those of two zones or more are measured
// (ZoneSpreadShortZoneMinutes).
func (m *recorder) watchSpread(ctx context.Context, fits func(context.Context, *App, *Group) (bool, error)) error {
	for _, a := range m.w.Apps {
		if zoneSpread, _ := spreadOf(a.Template); !zoneSpread {
			continue
		}
		zones := map[*zone]bool{}
		for _, g := range m.w.Groups {
			if zones[g.zone] {
				continue
			}
			ok, err := fits(ctx, a, g)
			if err != nil {
				return err
			}
			if ok {
				zones[g.zone] = true
			}
		}
		if len(zones) > 1 {
			m.spread = append(m.spread, spreadApp{a: a, zones: zones})
		}
	}
	return nil
}

// missing is how many zones s's running pods are missing from: the zones
// they may run in (or as many as they are, when fewer) less the zones they
// are in.
func (s spreadApp) missing() int {
	var in []*zone
	running := 0
	for _, p := range s.a.pods {
		if p.Node == nil || p.Terminating || p.lost {
			continue
		}
		running++
		if z := p.Node.Group.zone; s.zones[z] && !slices.Contains(in, z) {
			in = append(in, z)
		}
	}
	return max(min(len(s.zones), running)-len(in), 0)
}

func newRecorder(w *World) *recorder {
	return &recorder{w: w, evictBy: map[string]int{}, refusedBy: map[string]int{}, draining: map[string]int{}}
}

func (m *recorder) nodeEnded(*Node) {}

func (m *recorder) evictionRefused(by string) {
	m.refused++
	m.refusedBy[by]++
}

// voluntaryEviction counts an eviction; the agent's and the termination
// handler's, made because the node is being taken back anyway, are listed by
// component but not counted as voluntary.
func (m *recorder) voluntaryEviction(p *Pod, by string) {
	m.evictBy[by]++
	if n, ok := m.draining[by]; ok {
		m.draining[by] = n + 1
	}
	if !involuntary(by) {
		m.evict++
		// Its replacement is on the way until the next pod of the
		// workload becomes Ready (World.markReady).
		p.App.evictedStarting++
	}
}

func (m *recorder) pdbViolation(*App) { m.violations++ }

// wastedEvictions records pods evicted by an abandoned drain.
func (m *recorder) wastedEvictions(n int) { m.wasted += n }

// drainStarted records that component (an eviction's by) put its drain
// taint on a node: its evictions from now on are that drain's. The agent's
// drains (a node being taken back) are not followed: they are never undone.
func (m *recorder) drainStarted(by string) {
	if !involuntary(by) {
		m.draining[by] = 0
	}
}

// drainEnded records that component took its drain taint off a node; when
// pods were left on it, the drain was rolled back, and its evictions were
// wasted (their pods' replacements may land anywhere, the node itself
// included).
func (m *recorder) drainEnded(by string, rolledBack bool) {
	if n, ok := m.draining[by]; ok && rolledBack {
		m.wasted += n
	}
	delete(m.draining, by)
}

func (m *recorder) preempted(n *Node) {
	pods := 0
	for _, p := range n.pods {
		if !p.Terminating {
			pods++
		}
	}
	m.r.PreemptedNodes++
	m.r.PreemptedPods += pods
	m.r.Preemptions = append(m.r.Preemptions, Mark{Hours: m.w.Elapsed().Hours(), Zone: n.Group.Zone, Node: n.Name, Pods: pods})
}

// observe accounts for the interval [now, now+step) as the world is now.
func (m *recorder) observe(step time.Duration) {
	w := m.w
	sec := step.Seconds()
	var cost float64
	spotNodes, odNodes := 0, 0
	spotByZone := map[*zone]int{}
	for _, n := range w.nodes {
		if n.state == unfulfilled {
			continue // no instance, no bill
		}
		cost += w.PricePerHour(n.Group) * step.Hours()
		if n.Group.Spot {
			spotNodes++
			spotByZone[n.Group.zone]++
		} else {
			odNodes++
		}
	}
	m.r.Cost += cost
	running, onSpot, pending := 0, 0, 0
	misplaced := map[*zone]int{}
	for _, p := range w.pods {
		switch {
		case p.lost:
			m.lostSeconds += sec
		case p.Node == nil:
			pending++
		default:
			running++
			if p.Node.Group.Spot {
				onSpot++
			} else if p.App.SpotEligible && !p.Terminating {
				misplaced[p.Node.Group.zone]++
			}
		}
	}
	for _, a := range w.Apps {
		if a.PDB != nil {
			healthy, desired := w.pdbHealth(a)
			// A replacement is on the way only while the workload has fewer
			// healthy pods than its scale: when a scale-down took an evicted
			// pod's place, none comes, and a later shortfall (a preemption)
			// is not the eviction's.
			a.evictedStarting = min(a.evictedStarting, max(a.desired-healthy, 0))
			if healthy < desired {
				m.belowBudgetSeconds += float64(desired-healthy) * sec
				m.belowBudgetVoluntarySeconds += float64(min(desired-healthy, a.evictedStarting)) * sec
			}
		}
	}
	for _, s := range m.spread {
		m.spreadShortSeconds += float64(s.missing()) * sec
	}
	m.podSeconds += float64(running) * sec
	m.spotPodSeconds += float64(onSpot) * sec
	m.pendingSeconds += float64(pending) * sec
	m.podCountSum += float64(running + pending)
	m.steps++

	open := false
	for _, z := range w.zones {
		if !w.hasSpot {
			break // the baseline: no spot to go back to
		}
		if misplaced[z] > 0 && z.capacity(w.Elapsed()) > spotByZone[z] {
			open = true
		}
	}
	switch {
	case open:
		m.inEpisode = true
		m.episode += step
	case m.inEpisode:
		m.episodes = append(m.episodes, m.episode)
		m.inEpisode, m.episode = false, 0
	}

	if e := w.Elapsed(); e >= m.nextSample {
		m.nextSample += sampleEvery
		s := Sample{Hours: e.Hours(), Cost: m.r.Cost, Pending: pending, SpotNodes: spotNodes, OnDemandNodes: odNodes}
		if running > 0 {
			s.SpotShare = float64(onSpot) / float64(running)
		}
		for _, z := range w.zones {
			s.Capacity = append(s.Capacity, z.capacity(e))
		}
		m.r.Series = append(m.r.Series, s)
	}
}

// result completes the run's figures.
func (m *recorder) result(strategy string, days float64) Result {
	r := m.r
	r.Strategy = strategy
	if m.podSeconds > 0 {
		r.SpotShare = m.spotPodSeconds / m.podSeconds
	}
	r.PendingPodMinutes = m.pendingSeconds / 60
	r.LostPodMinutes = m.lostSeconds / 60
	r.PDBBelowBudgetPodMinutes = m.belowBudgetSeconds / 60
	r.PDBBelowBudgetVoluntaryPodMinutes = m.belowBudgetVoluntarySeconds / 60
	r.ZoneSpreadShortZoneMinutes = m.spreadShortSeconds / 60
	r.Evictions, r.EvictionsRefused, r.WastedEvictions, r.PDBViolations = m.evict, m.refused, m.wasted, m.violations
	if len(m.evictBy) > 0 {
		r.EvictionsBy = m.evictBy
	}
	if len(m.refusedBy) > 0 {
		r.EvictionsRefusedBy = m.refusedBy
	}
	if avg := m.podCountSum / max(m.steps, 1); avg > 0 && days > 0 {
		r.EvictionsPerPodDay = float64(m.evict) / avg / days
	}
	episodes := m.episodes
	if m.inEpisode {
		episodes = append(episodes, m.episode)
		r.BackToSpot.OpenAtEnd = true
	}
	r.BackToSpot.Episodes = len(episodes)
	if len(episodes) > 0 {
		var sum time.Duration
		for _, e := range episodes {
			sum += e
		}
		sort.Slice(episodes, func(i, j int) bool { return episodes[i] < episodes[j] })
		r.BackToSpot.MeanMinutes = sum.Minutes() / float64(len(episodes))
		r.BackToSpot.MaxMinutes = episodes[len(episodes)-1].Minutes()
	}
	r.NodesLaunched, r.SpotStockOuts = m.launched, m.stockOuts
	return r
}
