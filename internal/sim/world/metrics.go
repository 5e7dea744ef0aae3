package world

import (
	"context"
	"maps"
	"slices"
	"sort"
	"time"

	"spotter.dev/spotter/internal/sim/market"
	"spotter.dev/spotter/internal/sim/report"
)

// recorder accumulates a run's metrics, step by step.
type recorder struct {
	w                                  *World
	r                                  report.Result
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
	zones map[*market.Zone]bool
}

// watchSpread finds the workloads that must spread over zones and, with fits
// (whether an app's pod passes the filter plugins on a node of a group), the
// zones where they may run: those of two zones or more are measured
// (ZoneSpreadShortZoneMinutes).
func (m *recorder) watchSpread(ctx context.Context, fits func(context.Context, *App, *Group) (bool, error)) error {
	for _, a := range m.w.Apps {
		if zoneSpread, _ := SpreadOf(a.Template); !zoneSpread {
			continue
		}
		zones := map[*market.Zone]bool{}
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
	var in []*market.Zone
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
	if !report.Involuntary(by) {
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
	if !report.Involuntary(by) {
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
	m.r.Preemptions = append(m.r.Preemptions, report.Mark{Hours: m.w.Elapsed().Hours(), Zone: n.Group.Zone, Node: n.Name, Pods: pods})
}

// observe accounts for the interval [now, now+step) as the world is now.
func (m *recorder) observe(step time.Duration) {
	w := m.w
	sec := step.Seconds()
	var cost float64
	spotNodes, odNodes := 0, 0
	spotByZone := map[*market.Zone]int{}
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
	misplaced := map[*market.Zone]int{}
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
			healthy, desired := w.PDBHealth(a)
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
		if misplaced[z] > 0 && z.Capacity(w.Elapsed()) > spotByZone[z] {
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
		m.nextSample += report.SampleEvery
		s := report.Sample{Hours: e.Hours(), Cost: m.r.Cost, Pending: pending, SpotNodes: spotNodes, OnDemandNodes: odNodes}
		if running > 0 {
			s.SpotShare = float64(onSpot) / float64(running)
		}
		for _, z := range w.zones {
			s.Capacity = append(s.Capacity, z.Capacity(e))
		}
		m.r.Series = append(m.r.Series, s)
	}
}

// result completes the run's figures.
func (m *recorder) result(strategy string, days float64) report.Result {
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
		r.EvictionsBy = maps.Clone(m.evictBy)
	}
	if len(m.refusedBy) > 0 {
		r.EvictionsRefusedBy = maps.Clone(m.refusedBy)
	}
	if avg := m.podCountSum / max(m.steps, 1); avg > 0 && days > 0 {
		r.EvictionsPerPodDay = float64(m.evict) / avg / days
	}
	episodes := slices.Clone(m.episodes) // the run may go on (World.Result mid-run)
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
