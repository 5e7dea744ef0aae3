package strategy

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"spotter.dev/spotter/internal/agent/interrupt"
	"spotter.dev/spotter/internal/agent/notice"
	"spotter.dev/spotter/internal/cloud"
	"spotter.dev/spotter/internal/controller"
	"spotter.dev/spotter/internal/controller/labeler"
	"spotter.dev/spotter/internal/controller/migrator"
	"spotter.dev/spotter/internal/controller/rescheduler"
	"spotter.dev/spotter/internal/plan"
	"spotter.dev/spotter/internal/sim/world"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// Components of the spotter strategy, as they appear in the metrics: the
// evicted-by label of the drain engine's evictions, with this prefix.
const (
	ComponentRescheduler = "spotter-" + rescheduler.Component
	ComponentMigrator    = "spotter-" + migrator.Component
)

// NoticeCloud is the cloud the simulator's preemption notices name.
const NoticeCloud = "simulator"

// spotter is this project's strategy: the product itself, not a model of it.
// The migrator and the rescheduler are built by controller.Build, as
// `spotter controller` builds them from the same configuration, and the
// agent's handler by interrupt.FromConfig, as spotter-agent builds it; they
// run unchanged on the world's clock (a coop.Sim: their goroutines run one at
// a time between the world's steps, at the times they wait for), read the
// world through a cache (world.API), write to it through a clientset
// (evictions through the world's Eviction API, node marks on its nodes), and
// scale its node groups through a cloud provider (world.NewProvider). What runs is
// what v1alpha1.ComponentsOf says `spotter controller` and the agent run; a
// component in dry run changes nothing, and is not started.
//
// Two pieces stay the simulator's own: the labeler, whose only effect on the
// simulation (the PreferNoSchedule taint on on-demand nodes, with
// labeler.preferSpotTaint) the world puts on its nodes, and the notice source
// of the agent: the world's market hands each preempted node's notice to a
// handler of that node.
type spotter struct {
	cfg *v1alpha1.SpotterConfiguration
	run v1alpha1.Components

	w   *world.World
	api *world.API
	// nodeChanged, when set, hears of a node's object after the agent's
	// handler acted on it (the migrator's NodeChanged).
	nodeChanged func(old, node *corev1.Node)
	ctx         context.Context
	cancel      context.CancelFunc
}

func newSpotter(cfg *v1alpha1.SpotterConfiguration) (*spotter, error) {
	if cfg == nil {
		cfg = v1alpha1.NewDefaults()
	}
	return &spotter{cfg: cfg, run: v1alpha1.ComponentsOf(cfg)}, nil
}

func (s *spotter) Setup(w *world.World, _ *plan.Engine) error {
	s.w, s.api = w, world.NewAPI(w)
	if s.run.PreferSpotTaint {
		w.SetOnDemandTaint(&corev1.Taint{Key: labeler.OnDemandTaintKey, Value: "true", Effect: corev1.TaintEffectPreferNoSchedule})
	}
	// The controllers log as in a process; a simulation of a week would
	// print thousands of lines.
	s.ctx, s.cancel = context.WithCancel(klog.NewContext(context.Background(), logr.Discard()))
	built, err := controller.Build(WithScenarioPrices(s.cfg, w.Scenario()), controller.Deps{
		Reader:   s.api,
		Kube:     s.api.Kube,
		Clock:    w.Clock,
		Provider: func() (cloud.Provider, <-chan struct{}, error) { return world.NewProvider(w), nil, nil },
	})
	if err != nil {
		return fmt.Errorf("building the controllers: %w", err)
	}
	// As the informer's handlers in spotter controller: a node that
	// registers is news for the rescheduler and the migrator, and so is the
	// agent's taint on a node under notice for the migrator (nodeChanged).
	var onReady []func(*world.Node)
	if s.run.Migrator.Acts() {
		m := built.Migrator
		w.Clock.Go(func() { _ = m.Start(s.ctx) })
		onReady = append(onReady, func(n *world.Node) { m.NodeChanged(nil, n.Obj) })
		s.nodeChanged = m.NodeChanged
	}
	if s.run.Rescheduler.Acts() {
		r := built.Rescheduler
		w.Clock.Go(func() { _ = r.Start(s.ctx) })
		onReady = append(onReady, func(n *world.Node) { r.NodeChanged(nil, n.Obj) })
	}
	// As the informer's handlers feed the drains' re-checks (see
	// controller.feedResidents): every pod change, and anything else as a
	// whole.
	if residents := built.Residents(); len(residents) > 0 {
		residents.Fed()
		w.OnPod, w.OnOther = residents.PodChanged, residents.Invalidate
	}
	// spotFirst: the chart's admission policy gates every new pod (the
	// simulated cluster's namespaces are all selected), and a gated pod
	// wakes the controller, as the informer's handler does.
	if s.run.SpotFirst.Acts() {
		sf := built.SpotFirst
		w.SpotFirstGate = true
		w.Clock.Go(func() { _ = sf.Start(s.ctx) })
		feed := w.OnPod
		w.OnPod = func(old, pod *corev1.Pod) {
			if feed != nil {
				feed(old, pod)
			}
			sf.PodChanged(pod)
		}
	}
	if len(onReady) > 0 {
		w.OnReady = func(n *world.Node) {
			for _, f := range onReady {
				f(n)
			}
		}
	}
	if s.run.Agent.Acts() {
		w.OnNotice = s.notice
	}
	return nil
}

// notice hands a preempted node's notice to the agent's handler of that
// node, as the agent on the node would get it from its cloud's metadata
// service.
func (s *spotter) notice(n *world.Node) {
	h := interrupt.FromConfig(s.api.Kube, s.w.Clock, nil, nil, s.cfg, n.Name, false)
	nt := notice.Notice{Cloud: NoticeCloud, Kind: notice.Termination, ID: NoticeCloud + "/preempted", Action: "preempted",
		Deadline: n.TerminateAt, Detail: "spot capacity taken back by the market"}
	s.w.Clock.Go(func() {
		before := n.Obj
		_ = h.Handle(s.ctx, nt) // a record not written is logged; the drain runs all the same
		// The informer would deliver the agent's taint as an update of the
		// node; the handler has put it on (or not) by the time it returns.
		if s.nodeChanged != nil && n.Obj != before {
			s.nodeChanged(before, n.Obj)
		}
	})
}

// Step forgets the calls the fake clientset recorded (the controllers run on
// the world's clock, between the steps): every reply comes from the world,
// and a week of calls kept for nobody grows without bound.
func (s *spotter) Step(context.Context, *world.World) error {
	s.api.Kube.ClearActions()
	return nil
}

// API is the API the controllers were built on: the world's.
func (s *spotter) API() *world.API { return s.api }

// Stop ends the controllers: their context ends, and the clock runs until
// their goroutines have returned (drains in flight roll back, as at a
// shutdown), for at most an hour of simulated time.
func (s *spotter) Stop() {
	if s.cancel == nil {
		return
	}
	s.cancel()
	s.w.Clock.RunUntil(s.w.Now().Add(time.Hour))
}

// RecommendedConfig is the configuration the docs recommend for a cluster
// whose node groups Spotter can reach through a cloud provider, and what
// `spotter simulate` runs without --config: the defaults with the migrator
// on. `spotter controller` leaves the migrator off by default, as it needs a
// cloud provider; the simulated cluster has node groups. Spot-first is not
// part of it: it saves more and evicts less for many more pending pods
// (docs/spot-first.md), a trade each cluster makes for itself.
func RecommendedConfig() *v1alpha1.SpotterConfiguration {
	cfg := v1alpha1.NewDefaults()
	on := true
	cfg.Migrator.Enabled = &on
	return cfg
}
