package world

import (
	"math"
	"sort"
	"time"

	"spotter.dev/spotter/internal/sim/market"
	"spotter.dev/spotter/internal/sim/scenario"
)

// Advance runs the world's own processes at the end of a step: nodes become
// Ready, noticed nodes terminate, the market's notices of the next step are
// scheduled, terminating and lost pods go, pods become Ready, and the
// workload controllers create and delete pods for the load.
func (w *World) Advance() {
	now, e := w.Now(), w.Elapsed()
	for _, n := range w.nodes {
		if n.state == provisioning && !n.Noticed() && !now.Before(n.ReadyAt) {
			n.state = ready
			w.schedEvents++ // registered
			w.refresh(n)
			if w.OnReady != nil {
				w.OnReady(n)
			}
		}
	}
	for _, n := range append([]*Node(nil), w.nodes...) {
		if n.Noticed() && !now.Before(n.TerminateAt) {
			w.terminate(n)
		}
	}
	w.preemptions(e + w.sc.Step.Duration)
	for _, p := range append([]*Pod(nil), w.pods...) {
		switch {
		case p.Terminating && !now.Before(p.goneAt):
			w.removePod(p)
		case p.lost && !now.Before(p.lostUntil):
			w.removePod(p)
		case p.Node != nil && !p.ready && !p.Terminating && !now.Before(p.ReadyAt):
			w.markReady(p)
		}
	}
	for _, a := range w.Apps {
		w.reconcile(a)
	}
}

// preemptions schedules the market's notices of the step that starts now
// and ends at elapsed time next, each at its own time within the step (the
// trace's tick, or a time drawn for a synthetic rate), not at the step's end:
// a 30 s notice is then 30 s long wherever in the step it falls. The victims
// of a trace's drop are chosen when it comes, among the zone's spot nodes
// then. A trace read as a hazard is a synthetic rate (market.Zone.PreRate).
func (w *World) preemptions(next time.Duration) {
	e := max(w.Elapsed(), w.preemptionsUntil)
	if next <= e {
		return // scheduled already
	}
	w.preemptionsUntil = next
	for _, z := range w.zones {
		switch {
		case z.HasDropTrace():
			for _, d := range z.Drops(e, next) {
				w.Clock.AfterFunc(d.At-w.Elapsed(), func() { w.preemptDrop(z, d) })
			}
		case z.PreRate > 0:
			// Each node's chance to be taken back within the step, at a
			// time drawn uniformly within it.
			step := next - e
			p := 1 - math.Exp(-z.PreRate*step.Hours())
			for _, n := range w.preemptible(z) {
				if w.rng.Float64() < p {
					at := e - w.Elapsed() + time.Duration(w.rng.Int64N(int64(step)))
					w.Clock.AfterFunc(at, func() {
						if Alive(w, n) && !n.Noticed() {
							w.notice(n, z)
						}
					})
				}
			}
		}
	}
}

// preemptible are the zone's spot nodes a preemption may take now: running
// or provisioning, not noticed yet.
func (w *World) preemptible(z *market.Zone) []*Node {
	var out []*Node
	for _, n := range w.nodes {
		if n.Group.Spot && n.Group.zone == z && (n.Ready() || n.state == provisioning) && !n.Noticed() {
			out = append(out, n)
		}
	}
	return out
}

// preemptDrop takes back as many of the zone's nodes as a trace's drop lost.
func (w *World) preemptDrop(z *market.Zone, d market.Drop) {
	victims := w.preemptible(z)
	if len(victims) == 0 {
		// Draw nothing: the random sequence then depends only on what
		// happens to the nodes, not on idle zones.
		return
	}
	perm := w.rng.Perm(len(victims))
	for _, i := range perm[:min(d.Lost, len(victims))] {
		w.notice(victims[i], z)
	}
}

// notice gives a node its preemption notice; the node terminates when the
// notice ends, on the clock, not at the next step. A node still provisioning
// is taken back before it registers: no handler hears of it.
func (w *World) notice(n *Node, z *market.Zone) {
	n.NoticeAt = w.Now()
	n.TerminateAt = w.Now().Add(z.Notice)
	w.m.preempted(n)
	w.changed()
	w.Clock.AfterFunc(z.Notice, func() {
		if Alive(w, n) {
			w.terminate(n)
		}
	})
	if w.OnNotice != nil && n.Ready() {
		w.OnNotice(n)
	}
}

// DesiredReplicas follows the daily cycle: Low at the trough, Peak at the
// peak hour, a cosine in between.
func (w *World) DesiredReplicas(a *App) int {
	if a.Peak == a.Low {
		return int(a.Low)
	}
	t := w.Now().UTC()
	hour := float64(t.Hour()) + float64(t.Minute())/60
	phase := 2 * math.Pi * (hour - float64(w.sc.Load.PeakHour)) / 24
	return int(a.Low) + int(math.Round(float64(a.Peak-a.Low)*(1+math.Cos(phase))/2))
}

// reconcile is the workload controller: a ReplicaSet creates a replacement as
// soon as a pod is terminating; a StatefulSet (Parallel pod management)
// recreates an ordinal only when its pod is gone.
func (w *World) reconcile(a *App) {
	a.desired = w.DesiredReplicas(a)
	if a.Kind == scenario.StatefulSet {
		have := map[int]bool{}
		for _, p := range a.pods {
			have[p.ordinal] = true
			if p.ordinal >= a.desired && !p.Terminating {
				w.startTermination(p)
			}
		}
		for i := range a.desired {
			if !have[i] {
				w.createPod(a, i)
			}
		}
		return
	}
	var active []*Pod
	for _, p := range a.pods {
		if !p.Terminating {
			active = append(active, p)
		}
	}
	for range a.desired - len(active) {
		w.createPod(a, 0)
	}
	if extra := len(active) - a.desired; extra > 0 {
		// The ReplicaSet's order: unbound pods first, then not Ready, then
		// the newest.
		now := w.Now()
		sort.SliceStable(active, func(i, j int) bool {
			pi, pj := active[i], active[j]
			if pi.Bound() != pj.Bound() {
				return !pi.Bound()
			}
			if ri, rj := pi.Healthy(now), pj.Healthy(now); ri != rj {
				return !ri
			}
			return pi.Created.After(pj.Created)
		})
		for _, p := range active[:extra] {
			w.startTermination(p)
		}
	}
}
