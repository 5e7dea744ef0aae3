package sim

import (
	"context"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"spotter.dev/spotter/internal/plan"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// reschedulerSeed is k8s-spot-rescheduler (pusher/k8s-spot-rescheduler) as its
// documentation describes it, with its default flags:
//
//   - on-demand nodes carry a PreferNoSchedule taint (its README asks for one);
//   - every housekeeping interval (10s: every step here), unless a drain ended
//     less than --node-drain-delay (10m) ago: on-demand nodes are taken least
//     requested CPU first, and for each, its pods are fitted one by one on the
//     spot nodes, the one with the most free CPU first, with the predicates
//     (here the planner's fit engine, the real filter plugins);
//   - the first node whose pods all fit is drained: ToBeDeleted taint, every
//     pod evicted through the Eviction API, each retried for
//     --pod-eviction-timeout (2m); if one cannot be evicted the drain is
//     abandoned and the taint removed: the pods already evicted stay evicted.
//
// PodDisruptionBudgets are not simulated in its plan; the Eviction API still
// enforces them, so a budget shows up as refused evictions and abandoned
// drains (wasted evictions), not as violations.
type reschedulerSeed struct {
	e           *plan.Engine
	lastDrain   time.Time
	lastVersion uint64
	drain       *seedDrain
}

type seedDrain struct {
	node    *Node
	pods    []*Pod
	evicted map[*Pod]bool
	until   time.Time
}

const (
	seedTaint          = "node-role.kubernetes.io/worker"
	seedDrainDelay     = 10 * time.Minute
	seedEvictionTimout = 2 * time.Minute
)

func (s *reschedulerSeed) setup(w *World, e *plan.Engine) error {
	s.e = e
	w.setOnDemandTaint(&corev1.Taint{Key: seedTaint, Value: "true", Effect: corev1.TaintEffectPreferNoSchedule})
	return nil
}

func (s *reschedulerSeed) step(ctx context.Context, w *World) error {
	now := w.Now()
	if d := s.drain; d != nil {
		if !alive(w, d.node) {
			s.drain, s.lastDrain = nil, now
			return nil
		}
		left := 0
		for _, p := range d.pods {
			if d.evicted[p] {
				continue
			}
			if err := w.Evict(p, StrategyRescheduler); err != nil {
				left++
				continue
			}
			d.evicted[p] = true
		}
		switch {
		case left == 0:
			w.SetDraining(d.node, "")
			s.drain, s.lastDrain = nil, now
		case !now.Before(d.until):
			w.m.wastedEvictions(len(d.evicted))
			w.SetDraining(d.node, "")
			s.drain, s.lastDrain = nil, now
		}
		return nil
	}
	if !s.lastDrain.IsZero() && now.Sub(s.lastDrain) < seedDrainDelay {
		return nil
	}
	if w.version == s.lastVersion {
		return nil // nothing changed since the last look found nothing
	}
	s.lastVersion = w.version
	ods := onDemandNodes(w)
	sort.SliceStable(ods, func(i, j int) bool { return requestedCPU(ods[i]) < requestedCPU(ods[j]) })
	isSpot := func(n *corev1.Node) bool {
		return n.Labels[NodeGroupLabel] != "" && w.groupOf(n.Name).Spot && !w.NodeByName(n.Name).Noticed()
	}
	nodes := nodeObjs(w.ReadyNodes())
	for _, od := range ods {
		pods := movable(od)
		if len(pods) == 0 {
			continue
		}
		var others []*corev1.Pod
		for _, p := range w.pods {
			if p.Node != nil && p.Node != od {
				others = append(others, p.Obj)
			}
		}
		pending := make([]*corev1.Pod, len(pods))
		for i, p := range pods {
			c := *p.Obj
			c.Spec.NodeName = ""
			pending[i] = &c
		}
		placed, err := s.e.Schedule(ctx, plan.ScheduleRequest{Nodes: nodes, Pods: others, Pending: pending, Eligible: isSpot, Pick: mostFreeCPU})
		if err != nil {
			return err
		}
		fits := true
		for _, pl := range placed {
			fits = fits && pl.Node != ""
		}
		if !fits {
			continue
		}
		w.SetDraining(od, "rescheduler")
		s.drain = &seedDrain{node: od, pods: pods, evicted: map[*Pod]bool{}, until: now.Add(seedEvictionTimout)}
		return s.step(ctx, w)
	}
	return nil
}

// mostFreeCPU picks the spot node with the most CPU left.
func mostFreeCPU(_ *corev1.Pod, feasible []fwk.NodeInfo) int {
	best, bestFree := 0, int64(-1)
	for i, ni := range feasible {
		if free := ni.GetAllocatable().GetMilliCPU() - ni.GetRequested().GetMilliCPU(); free > bestFree {
			best, bestFree = i, free
		}
	}
	return best
}

// groupOf returns the node group of a node of the world.
func (w *World) groupOf(node string) *Group {
	if n := w.NodeByName(node); n != nil {
		return n.Group
	}
	return &Group{}
}

// migratorSeed is cost-manager's spot-migrator (hsbc/cost-manager) as its
// documentation and code describe it:
//
//   - hourly, on the hour, a migration run starts;
//   - a run drains on-demand nodes one at a time: unschedulable ones first,
//     then the oldest; a drain cordons the node and evicts every pod through
//     the Eviction API (PodDisruptionBudgets respected, refusals retried), with
//     a 1h timeout, then deletes the instance; the evicted pods go Pending and
//     the autoscaler (price expander) adds the cheapest node group that fits:
//     spot when the market has capacity, on-demand otherwise;
//   - after each node, if any on-demand node appeared meanwhile, the run
//     assumes spot is unavailable and stops until the next hour; otherwise it
//     goes on until no on-demand node is left.
//
// It drains every on-demand node, including those whose pods must stay on
// on-demand: their pods then make the autoscaler add an on-demand node, which
// ends the run.
type migratorSeed struct {
	schedule interface{ Next(time.Time) time.Time }
	next     time.Time
	running  bool
	before   map[*Node]bool
	drain    *seedDrain
	started  time.Time
}

func (s *migratorSeed) setup(w *World, _ *plan.Engine) error {
	sched, err := v1alpha1.ParseSchedule("@hourly")
	if err != nil {
		return err
	}
	s.schedule = sched
	s.next = sched.Next(w.Now())
	return nil
}

func (s *migratorSeed) step(_ context.Context, w *World) error {
	now := w.Now()
	if !s.running {
		if now.Before(s.next) {
			return nil
		}
		s.running, s.next = true, s.schedule.Next(now)
	}
	if d := s.drain; d != nil {
		if !alive(w, d.node) {
			s.drain = nil
			return s.afterNode(w)
		}
		for _, p := range movable(d.node) {
			if err := w.Evict(p, StrategyMigrator); err == nil {
				d.evicted[p] = true
			}
		}
		if len(d.node.pods) == 0 {
			w.DeleteNode(d.node)
			s.drain = nil
			return s.afterNode(w)
		}
		if now.Sub(s.started) >= time.Hour {
			// kubectl drain timed out: the run fails; the node stays cordoned.
			s.drain, s.running = nil, false
		}
		return nil
	}
	ods := onDemandNodes(w)
	if len(ods) == 0 {
		s.running = false
		return nil
	}
	sort.SliceStable(ods, func(i, j int) bool {
		if ods[i].Cordoned != ods[j].Cordoned {
			return ods[i].Cordoned
		}
		return ods[i].Created.Before(ods[j].Created)
	})
	s.before = map[*Node]bool{}
	for _, n := range w.nodes {
		if !n.Group.Spot {
			s.before[n] = true
		}
	}
	target := ods[0]
	w.Cordon(target, true)
	s.drain = &seedDrain{node: target, evicted: map[*Pod]bool{}}
	s.started = now
	return s.step(context.Background(), w)
}

// afterNode ends the run if an on-demand node appeared during the last drain.
func (s *migratorSeed) afterNode(w *World) error {
	for _, n := range w.nodes {
		if !n.Group.Spot && !s.before[n] {
			s.running = false
			return nil
		}
	}
	return nil
}
