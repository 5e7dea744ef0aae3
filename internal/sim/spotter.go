package sim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"spotter.dev/spotter/internal/agent/interrupt"
	"spotter.dev/spotter/internal/agent/notice"
	"spotter.dev/spotter/internal/backoff"
	"spotter.dev/spotter/internal/classify"
	"spotter.dev/spotter/internal/controller/labeler"
	"spotter.dev/spotter/internal/controller/migrator"
	"spotter.dev/spotter/internal/controller/rescheduler"
	"spotter.dev/spotter/internal/disruption"
	"spotter.dev/spotter/internal/plan"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// Components of the spotter strategy, as they appear in the metrics.
const (
	componentRescheduler = "spotter-rescheduler"
	componentMigrator    = "spotter-migrator"
	componentAgent       = "spotter-agent"
)

// spotter is this project's strategy. It runs what `spotter controller` and
// spotter-agent would run with the same configuration, read by the same
// function (v1alpha1.ComponentsOf): the migrator only when migrator.enabled
// (off by default), the rescheduler only when rescheduler.enabled, the
// labeler's PreferNoSchedule taint only with the labeler and
// labeler.preferSpotTaint; a component in dry run changes nothing and is not
// run. What is real package code and what is a model (to be replaced as the
// packages land) is listed in docs/simulate.md:
//
//   - real: plan.Planner.Plan (what is drainable, PodDisruptionBudgets counted
//     across the plan), rescheduler.Choose (which node), plan.FitsOnSpot (the
//     per-eviction re-check), disruption.Budget (shared drain slots and
//     windows), classify (node classes), the labeler's PreferNoSchedule taint
//     key, the configuration and its defaults (v1alpha1), the migrator's cron
//     parser;
//   - modelled: the rescheduler's cycle around those calls (a model of
//     rescheduler.Controller.Cycle: skip while Pending pods need spot, drain,
//     wait for replacements, drain delay, cooldowns, misplaced pause), the
//     drain engine (evictions through the simulated Eviction API with the
//     configured timeout), the migrator (make-before-break, migratorModel) and
//     the agent (deadline drain on a notice, agentModel).
type spotter struct {
	cfg *v1alpha1.SpotterConfiguration
	// run is what the configuration runs, as `spotter controller` and the
	// agent read it: a component that is off, or in dry run (it changes
	// nothing, and takes no drain slot), is not stepped.
	run     v1alpha1.Components
	planner *plan.Planner
	budget  *disruption.Budget
	e       *plan.Engine

	planVersion uint64
	planAt      time.Time
	lastPlan    *plan.Plan

	// rescheduler
	next      time.Time
	failures  map[string]backoff.Cooldown
	misplaced backoff.Cooldown
	drain     *spotterDrain
	wait      *replacementWait

	mig   *migratorModel
	agent *agentModel
}

func newSpotter(cfg *v1alpha1.SpotterConfiguration) (*spotter, error) {
	if cfg == nil {
		cfg = v1alpha1.NewDefaults()
	}
	classifier, err := classify.New(cfg.Classification, nil)
	if err != nil {
		return nil, err
	}
	budget, err := disruption.New(cfg.Disruption)
	if err != nil {
		return nil, err
	}
	s := &spotter{cfg: cfg, run: v1alpha1.ComponentsOf(cfg), budget: budget, failures: map[string]backoff.Cooldown{},
		planner: plan.New(plan.Options{Classifier: classifier, Pricing: cfg.Pricing,
			Rules: plan.Rules{AllowUnreplicated: cfg.Planner.AllowUnreplicatedPods, AllowLocalStorage: cfg.Planner.AllowLocalStorage}})}
	return s, nil
}

func (s *spotter) setup(w *World, e *plan.Engine) error {
	s.e = e
	if s.run.PreferSpotTaint {
		w.setOnDemandTaint(&corev1.Taint{Key: labeler.OnDemandTaintKey, Value: "true", Effect: corev1.TaintEffectPreferNoSchedule})
	}
	if s.run.Migrator.Acts() {
		sched, err := v1alpha1.ParseSchedule(s.cfg.Migrator.Schedule)
		if err != nil {
			return fmt.Errorf("migrator.schedule: %w", err)
		}
		s.mig = &migratorModel{s: s, schedule: sched, next: nextRun(sched, w.Now()), backoff: map[*Group]backoff.Cooldown{}}
	}
	if s.run.Agent.Acts() {
		s.agent = &agentModel{margin: ptr.Deref(s.cfg.Agent.DeadlineMargin, *v1alpha1.NewDefaults().Agent.DeadlineMargin).Duration,
			rebalance: s.cfg.Agent.RebalanceAction, maintenance: s.cfg.Agent.MaintenanceAction}
		w.onNotice = s.agent.notice
	}
	return nil
}

func (s *spotter) step(ctx context.Context, w *World) error {
	if s.agent != nil {
		s.agent.step(w)
	}
	if s.run.Rescheduler.Acts() {
		if err := s.reschedule(ctx, w); err != nil {
			return err
		}
	}
	if s.mig != nil {
		return s.mig.step(ctx, w)
	}
	return nil
}

// plan is Planner.Plan on the world now. A plan is a pure function of the
// snapshot, so an unchanged world reuses the last one.
func (s *spotter) plan(ctx context.Context, w *World) (*plan.Plan, error) {
	if s.lastPlan != nil && s.planVersion == w.version {
		return s.lastPlan, nil
	}
	p, err := s.planner.Plan(ctx, w.Snapshot())
	if err != nil {
		return nil, err
	}
	s.lastPlan, s.planVersion, s.planAt = p, w.version, w.Now()
	return p, nil
}

// reschedule is one step of the rescheduler model.
func (s *spotter) reschedule(ctx context.Context, w *World) error {
	now := w.Now()
	rc := s.cfg.Rescheduler
	if d := s.drain; d != nil {
		done, err := s.drainStep(ctx, w, d)
		if err != nil {
			return err
		}
		if !done {
			return nil
		}
		s.budget.Release(d.node.Name)
		s.drain = nil
		if d.failed != "" {
			f := s.failures[d.node.Name]
			f.Fail(now, rc.FailureBackoff.Duration, rc.MaxFailureBackoff.Duration)
			s.failures[d.node.Name] = f
			s.next = now.Add(rc.Interval.Duration)
			return nil
		}
		delete(s.failures, d.node.Name)
		s.wait = newReplacementWait(d, now.Add(rc.ReplacementTimeout.Duration))
		return nil
	}
	if wt := s.wait; wt != nil {
		misplaced, over := wt.check(w)
		if !over {
			return nil
		}
		s.wait = nil
		if misplaced > 0 {
			s.misplaced.Fail(now, rc.FailureBackoff.Duration, rc.MaxFailureBackoff.Duration)
		} else {
			s.misplaced = backoff.Cooldown{}
		}
		s.next = now.Add(max(ptr.Deref(rc.DrainDelay, *v1alpha1.NewDefaults().Rescheduler.DrainDelay).Duration, time.Second))
		return nil
	}
	if now.Before(s.next) || s.misplaced.Active(now) {
		return nil
	}
	s.next = now.Add(rc.Interval.Duration)
	if open, _ := s.budget.Open(now); !open {
		return nil
	}
	p, err := s.plan(ctx, w)
	if err != nil {
		return err
	}
	if p.Summary.PendingReserved > 0 {
		return nil
	}
	target := rescheduler.Choose(p, func(node string) bool {
		return s.failures[node].Active(now)
	}, "")
	if target == nil {
		return nil
	}
	if err := s.budget.Acquire(target.Name, rescheduler.Component); err != nil {
		return nil
	}
	d := s.startDrain(w, target, componentRescheduler)
	if d == nil {
		s.budget.Release(target.Name)
		return nil
	}
	s.drain = d
	return nil
}

// spotterDrain models the drain engine on one node: the node is tainted (and
// cordoned when drain.cordon is set), each pod is re-checked against the
// cluster as it is (Planner.FitsOnSpot) and evicted through the Eviction API;
// a PodDisruptionBudget's refusal is retried on the next step; the drain fails
// and is rolled back when a pod no longer fits or drain.timeout passes.
type spotterDrain struct {
	node      *Node
	component string
	pods      []*Pod
	evicted   map[*Pod]bool
	started   time.Time
	// planned is when the plan that placed all the node's pods together was
	// made: re-checks in that same instant would repeat its answer.
	planned time.Time
	failed  string
}

// startDrain begins draining the world's node of a drainable plan node.
func (s *spotter) startDrain(w *World, np *plan.NodePlan, component string) *spotterDrain {
	n := w.NodeByName(np.Name)
	if n == nil {
		return nil
	}
	d := &spotterDrain{node: n, component: component, evicted: map[*Pod]bool{}, started: w.Now(), planned: s.planAt}
	for _, pp := range np.Pods {
		if pp.Action != "move" {
			continue
		}
		if p := w.PodByName(pp.Namespace, pp.Name); p != nil && p.Node == n {
			d.pods = append(d.pods, p)
		}
	}
	w.SetDraining(n, component)
	if s.cfg.Drain.Cordon {
		w.Cordon(n, true)
	}
	return d
}

// drainStep advances a drain; done reports that it ended (d.failed says why
// when it failed).
func (s *spotter) drainStep(ctx context.Context, w *World, d *spotterDrain) (done bool, err error) {
	now := w.Now()
	if !alive(w, d.node) {
		return true, nil
	}
	rollback := func(why string) (bool, error) {
		d.failed = why
		w.SetDraining(d.node, "")
		w.Cordon(d.node, false)
		return true, nil
	}
	if now.Sub(d.started) >= s.cfg.Drain.Timeout.Duration {
		return rollback("drain timeout")
	}
	left := 0
	for _, p := range d.pods {
		if d.evicted[p] || p.Terminating || p.Node != d.node {
			d.evicted[p] = true
			continue
		}
		if !now.Equal(d.planned) {
			dest, reason, err := s.planner.FitsOnSpot(ctx, w.Snapshot(), p.Obj)
			if err != nil {
				return false, err
			}
			if dest == "" {
				return rollback("no longer fits on spot: " + reason)
			}
		}
		if err := w.Evict(p, d.component); err != nil {
			if errors.Is(err, ErrPDB) {
				left++
				continue
			}
			return false, err
		}
		d.evicted[p] = true
	}
	if left > 0 {
		return false, nil
	}
	if !s.cfg.Rescheduler.CordonAfterDrain {
		w.Cordon(d.node, false)
	}
	w.SetDraining(d.node, "")
	return true, nil
}

// replacementWait waits until the drained workloads run again, or a timeout,
// and counts the replacements that landed on nodes that are not spot.
type replacementWait struct {
	owners   map[*App]bool
	existing map[*Pod]bool
	until    time.Time
}

func newReplacementWait(d *spotterDrain, until time.Time) *replacementWait {
	wt := &replacementWait{owners: map[*App]bool{}, existing: map[*Pod]bool{}, until: until}
	for _, p := range d.pods {
		wt.owners[p.App] = true
	}
	for a := range wt.owners {
		for _, p := range a.pods {
			wt.existing[p] = true
		}
	}
	return wt
}

func (wt *replacementWait) check(w *World) (misplaced int, over bool) {
	now := w.Now()
	for a := range wt.owners {
		for _, p := range a.pods {
			if !p.Healthy(now) {
				return 0, !now.Before(wt.until)
			}
		}
	}
	for a := range wt.owners {
		for _, p := range a.pods {
			if !wt.existing[p] && !p.Node.Group.Spot {
				misplaced++
			}
		}
	}
	return misplaced, true
}

// migratorModel is the migrator, make-before-break, until internal/migrator
// lands: on the configured schedule (hourly by default), it takes the
// on-demand nodes the plan cannot drain only for want of spot room (no pod
// blocks them), up to maxNodesPerRun; for each, it asks the cheapest spot
// group that can hold the node's pods (node templates and the real filter
// plugins) for the nodes needed, waits until they are Ready (nodeReadyTimeout),
// then drains the on-demand node (a shared-budget drain, as the rescheduler's)
// and deletes its instance. A group without capacity fails the request, is
// backed off (spotUnavailableBackoff, doubling to maxSpotUnavailableBackoff)
// and nothing is drained.
type migratorModel struct {
	s        *spotter
	schedule interface{ Next(time.Time) time.Time }
	next     time.Time
	queue    []string
	backoff  map[*Group]backoff.Cooldown
	cur      *migration
}

// nextRun is the schedule's next run after now, as the migrator's loop takes
// it: a schedule with none (the cron library's zero time) is asked again a day
// later, never run at every step.
func nextRun(schedule interface{ Next(time.Time) time.Time }, now time.Time) time.Time {
	if next := schedule.Next(now); next.After(now) {
		return next
	}
	return now.Add(24 * time.Hour)
}

type migration struct {
	od        *Node
	spot      []*Node
	requested time.Time
	drain     *spotterDrain
}

func (m *migratorModel) step(ctx context.Context, w *World) error {
	s, now, mc := m.s, w.Now(), m.s.cfg.Migrator
	if !now.Before(m.next) {
		m.next = nextRun(m.schedule, now)
		if m.cur == nil && len(m.queue) == 0 {
			p, err := s.plan(ctx, w)
			if err != nil {
				return err
			}
			// The migrator's own order: selected, unschedulable, tainted by
			// the cluster autoscaler, oldest.
			byName := map[string]*corev1.Node{}
			for _, n := range w.Snapshot().Nodes {
				byName[n.Name] = n
			}
			var candidates []*corev1.Node
			for _, n := range p.Nodes {
				if migratable(&n) && byName[n.Name] != nil {
					candidates = append(candidates, byName[n.Name])
				}
			}
			slices.SortStableFunc(candidates, migrator.CompareCandidates)
			for _, n := range candidates[:min(len(candidates), int(mc.MaxNodesPerRun))] {
				m.queue = append(m.queue, n.Name)
			}
		}
	}
	if m.cur == nil {
		for len(m.queue) > 0 && m.cur == nil {
			name := m.queue[0]
			m.queue = m.queue[1:]
			if od := w.NodeByName(name); od != nil && od.Ready() && len(movable(od)) > 0 {
				if err := m.request(ctx, w, od); err != nil {
					return err
				}
			}
		}
		return nil
	}
	c := m.cur
	if !alive(w, c.od) {
		m.cur = nil
		return nil
	}
	if c.drain == nil {
		readyAll := true
		for _, n := range c.spot {
			if !alive(w, n) {
				m.cancel(w, "a requested spot node is gone")
				return nil
			}
			readyAll = readyAll && n.Ready()
		}
		if !readyAll {
			if now.Sub(c.requested) >= mc.NodeReadyTimeout.Duration {
				m.cancel(w, "spot nodes not Ready in time")
			}
			return nil
		}
		if err := s.budget.Acquire(c.od.Name, "migrator"); err != nil {
			return nil // the rescheduler drains; try again next step
		}
		p, err := s.plan(ctx, w)
		if err != nil {
			return err
		}
		for i := range p.Nodes {
			if p.Nodes[i].Name == c.od.Name {
				c.drain = s.startDrain(w, &p.Nodes[i], componentMigrator)
				if !p.Nodes[i].Drainable {
					c.drain.planned = time.Time{}
				}
			}
		}
		if c.drain == nil {
			s.budget.Release(c.od.Name)
			m.cur = nil
			return nil
		}
	}
	done, err := s.drainStep(ctx, w, c.drain)
	if err != nil || !done {
		return err
	}
	s.budget.Release(c.od.Name)
	if c.drain.failed == "" {
		w.DeleteNode(c.od)
	}
	m.cur = nil
	return nil
}

// migratable: an on-demand node the plan cannot drain, with pods to move and
// none that blocks it (only spot room is missing).
func migratable(n *plan.NodePlan) bool {
	if n.Class != classify.OnDemand || n.Drainable {
		return false
	}
	moves := 0
	for _, p := range n.Pods {
		switch p.Action {
		case "block":
			return false
		case "move":
			moves++
		}
	}
	return moves > 0
}

// request asks the cheapest fitting spot group for the nodes od's pods need.
func (m *migratorModel) request(ctx context.Context, w *World, od *Node) error {
	now := w.Now()
	pods := movable(od)
	pending := make([]*corev1.Pod, len(pods))
	for i, p := range pods {
		c := *p.Obj
		c.Spec.NodeName = ""
		pending[i] = &c
	}
	var others []*corev1.Pod
	for _, p := range w.pods {
		if p.Node != nil && p.Node != od {
			others = append(others, p.Obj)
		}
	}
	var best *Group
	bestNodes := 0
	for _, g := range w.Groups {
		if !g.Spot || g.count >= int(g.Max) || m.backoff[g].Active(now) {
			continue
		}
		k := min(int(g.Max)-g.count, len(pods))
		nodes := nodeObjs(w.ReadyNodes())
		isTemplate := map[string]bool{}
		for i := range k {
			t := w.template(g, i)
			isTemplate[t.Name] = true
			nodes = append(nodes, t)
		}
		placed, err := m.s.e.Schedule(ctx, plan.ScheduleRequest{Nodes: nodes, Pods: others, Pending: pending,
			Eligible: func(n *corev1.Node) bool { return isTemplate[n.Name] }})
		if err != nil {
			return err
		}
		used := map[string]bool{}
		all := true
		for _, pl := range placed {
			all = all && pl.Node != ""
			used[pl.Node] = true
		}
		if !all {
			continue
		}
		if best == nil || w.PricePerHour(g)*float64(len(used)) < w.PricePerHour(best)*float64(bestNodes) {
			best, bestNodes = g, len(used)
		}
	}
	if best == nil {
		return nil
	}
	var launched []*Node
	for range bestNodes {
		n, err := w.Launch(best)
		if err != nil {
			for _, l := range launched {
				w.DeleteNode(l)
			}
			f := m.backoff[best]
			mc := m.s.cfg.Migrator
			f.Fail(now, mc.SpotUnavailableBackoff.Duration, mc.MaxSpotUnavailableBackoff.Duration)
			m.backoff[best] = f
			return nil
		}
		launched = append(launched, n)
	}
	delete(m.backoff, best)
	m.cur = &migration{od: od, spot: launched, requested: now}
	return nil
}

// cancel gives the requested spot nodes back; nothing was drained.
func (m *migratorModel) cancel(w *World, _ string) {
	for _, n := range m.cur.spot {
		if alive(w, n) && len(n.pods) == 0 {
			w.DeleteNode(n)
		}
	}
	m.cur = nil
}

// agentModel is spotter-agent's interruption handling at the simulator's
// step: the agent's own decisions (interrupt.Level: a termination notice
// drains; interrupt.DrainDeadline: the notice's end less
// agent.deadlineMargin) decide what happens; the drain itself is modelled: the
// node is tainted and cordoned, its pods are evicted through the simulated
// Eviction API at once (PodDisruptionBudgets respected, refusals retried each
// step), and pods still there when the deadline falls within the next step are
// deleted, as the drain engine's deadline mode does as its last resort.
// Evicted pods are replaced before the node goes, instead of after the node
// loss is detected.
type agentModel struct {
	margin                 time.Duration
	rebalance, maintenance v1alpha1.NoticeAction
	noticed                []*Node
}

func (a *agentModel) notice(n *Node) { a.noticed = append(a.noticed, n) }

func (a *agentModel) step(w *World) {
	now := w.Now()
	step := w.sc.Step.Duration
	kept := a.noticed[:0]
	for _, n := range a.noticed {
		if !alive(w, n) {
			continue
		}
		kept = append(kept, n)
		nt := notice.Notice{Kind: notice.Termination, Deadline: n.TerminateAt}
		if interrupt.Level(nt, a.rebalance, a.maintenance) != v1alpha1.ActionDrain {
			continue
		}
		w.TaintNotice(n)
		last := !now.Add(step).Before(interrupt.DrainDeadline(nt, a.margin, now))
		for _, p := range movable(n) {
			if err := w.Evict(p, componentAgent); err != nil && last {
				w.DeletePod(p)
			}
		}
	}
	a.noticed = kept
}
