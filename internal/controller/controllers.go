// Package controller assembles Spotter's controllers: this file is where a
// reader sees what `spotter controller` runs.
package controller

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/robfig/cron/v3"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"spotter.dev/spotter/internal/classify"
	"spotter.dev/spotter/internal/cloud"
	awsprovider "spotter.dev/spotter/internal/cloud/aws"
	azureprovider "spotter.dev/spotter/internal/cloud/azure"
	"spotter.dev/spotter/internal/cloud/clusterapi"
	kubeprovider "spotter.dev/spotter/internal/cloud/kubernetes"
	"spotter.dev/spotter/internal/cloud/kwok"
	cloudmetrics "spotter.dev/spotter/internal/cloud/metrics"
	"spotter.dev/spotter/internal/cloud/providers"
	"spotter.dev/spotter/internal/controller/labeler"
	"spotter.dev/spotter/internal/controller/migrator"
	"spotter.dev/spotter/internal/controller/preemptible"
	"spotter.dev/spotter/internal/controller/queue"
	"spotter.dev/spotter/internal/controller/replacer"
	"spotter.dev/spotter/internal/controller/rescheduler"
	"spotter.dev/spotter/internal/controller/spotfirst"
	"spotter.dev/spotter/internal/disruption"
	"spotter.dev/spotter/internal/drain"
	"spotter.dev/spotter/internal/plan"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// Setup builds every enabled controller from the configuration (ctx bounds
// what building them asks of a cloud, such as the AWS region), registers it
// with the manager and returns the names of those it started.
//
// They are the migrator (off by default: it needs node groups from a cloud
// provider), the rescheduler, the preemptible controller (off by default), the
// spot-first controller (off by default: it takes off the scheduling gate the
// chart's admission policy puts on new pods) and the labeler; the migrator,
// the rescheduler and the preemptible controller share one disruption budget.
func Setup(ctx context.Context, mgr ctrl.Manager, cfg *v1alpha1.SpotterConfiguration) ([]string, error) {
	// The one clock of every controller, the drains and the kwok provider:
	// none reads the time any other way.
	clk := clock.RealClock{}
	kube, err := kubernetes.NewForConfig(mgr.GetConfig())
	if err != nil {
		return nil, err
	}
	for _, w := range v1alpha1.Warnings(cfg) {
		mgr.GetLogger().Info("WARNING: " + w)
	}
	b, err := Build(cfg, Deps{
		Reader:   mgr.GetCache(),
		Kube:     kube,
		Clock:    clk,
		Recorder: func(name string) events.EventRecorder { return mgr.GetEventRecorder(name) },
		Provider: func() (cloud.Provider, <-chan struct{}, error) { return newProvider(ctx, mgr, kube, clk, cfg) },
		OwnNode:  os.Getenv("NODE_NAME"),
		Self:     self(cfg.Manager.LeaderElection),
	})
	if err != nil {
		return nil, err
	}
	var started []string
	register := func(name string, c interface{ Register(ctrl.Manager) error }) error {
		if err := c.Register(mgr); err != nil {
			return fmt.Errorf("registering the %s: %w", name, err)
		}
		started = append(started, name)
		return nil
	}
	if b.Migrator != nil {
		if err := register(b.Migrator.Name(), b.Migrator); err != nil {
			return nil, err
		}
		// The migrator hears of spot nodes: capacity returning starts a run
		// and ends a group's pause; interruptions weigh the group choice
		// (see migrator.NodeChanged). Nodes of the informer's first list are
		// recorded without starting a run: they are no news.
		m := b.Migrator
		if err := watchNodes(ctx, mgr, m.Name(), toolscache.ResourceEventHandlerDetailedFuncs{
			AddFunc: func(obj any, initial bool) {
				if n, ok := obj.(*corev1.Node); ok {
					if initial {
						m.NodeChanged(n, n)
					} else {
						m.NodeChanged(nil, n)
					}
				}
			},
			UpdateFunc: func(oldObj, newObj any) {
				o, _ := oldObj.(*corev1.Node)
				if n, ok := newObj.(*corev1.Node); ok && o != nil {
					m.NodeChanged(o, n)
				}
			},
			DeleteFunc: func(obj any) {
				if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
					obj = tomb.Obj
				}
				if n, ok := obj.(*corev1.Node); ok {
					m.NodeDeleted(n)
				}
			},
		}); err != nil {
			return nil, err
		}
	}
	// An interrupted node's machine is replaced once it is drained (Cluster
	// API: its Machine deleted, its MachineSet makes another).
	if r, ok := b.Provider.(cloud.Replacer); ok && cfg.Cloud.Provider == v1alpha1.ProviderClusterAPI && ptr.Deref(cfg.Cloud.ClusterAPI.ReplaceInterruptedMachines, true) {
		rc := replacer.New(mgr.GetCache(), kube, r, mgr.GetEventRecorder("spotter-replacer"), v1alpha1.ComponentsOf(cfg).Migrator.DryRun)
		if err := register(rc.Name(), rc); err != nil {
			return nil, err
		}
	}
	if b.Rescheduler != nil {
		if err := register(b.Rescheduler.Name(), b.Rescheduler); err != nil {
			return nil, err
		}
		// New spot capacity wakes the rescheduler (see NodeChanged).
		r := b.Rescheduler
		if err := watchNodes(ctx, mgr, r.Name(), toolscache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) {
				if n, ok := obj.(*corev1.Node); ok {
					r.NodeChanged(nil, n)
				}
			},
			UpdateFunc: func(oldObj, newObj any) {
				o, _ := oldObj.(*corev1.Node)
				if n, ok := newObj.(*corev1.Node); ok && o != nil {
					r.NodeChanged(o, n)
				}
			},
		}); err != nil {
			return nil, err
		}
	}
	if err := feedResidents(ctx, mgr, b.Residents()); err != nil {
		return nil, err
	}
	if b.Preemptible != nil {
		if err := register(b.Preemptible.Name(), b.Preemptible); err != nil {
			return nil, err
		}
	}
	if b.SpotFirst != nil {
		if err := register(b.SpotFirst.Name(), b.SpotFirst); err != nil {
			return nil, err
		}
		// A gated pod wakes the spot-first controller.
		sf := b.SpotFirst
		inf, err := informerFor(ctx, mgr, clock.RealClock{}, &corev1.Pod{}, setupRetryFor)
		if err != nil {
			return nil, fmt.Errorf("watching pods for the %s: %w", sf.Name(), err)
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { pod, _ := obj.(*corev1.Pod); sf.PodChanged(pod) },
			UpdateFunc: func(_, obj any) { pod, _ := obj.(*corev1.Pod); sf.PodChanged(pod) },
		}); err != nil {
			return nil, fmt.Errorf("watching pods for the %s: %w", sf.Name(), err)
		}
	}
	run := v1alpha1.ComponentsOf(cfg)
	if run.Labeler.Enabled {
		l := labeler.New(mgr.GetClient(), b.Classifier, mgr.GetEventRecorder("spotter-labeler"), labeler.Options{
			InterruptibleLabel: *cfg.Labeler.InterruptibleLabel,
			PreferSpotTaint:    *cfg.Labeler.PreferSpotTaint,
			DryRun:             run.Labeler.DryRun,
		})
		if err := l.Register(mgr); err != nil {
			return nil, fmt.Errorf("registering the %s: %w", l.Name(), err)
		}
		started = append(started, l.Name())
	}
	if url := cfg.Cloud.AWS.InterruptionQueueURL; url != "" {
		sdk, err := awsprovider.SDKConfig(ctx, cfg.Cloud.AWS, cfg.Cloud.RequestsPerSecond)
		if err != nil {
			return nil, fmt.Errorf("cloud.aws.interruptionQueueURL: %w", err)
		}
		q := queue.New(queue.Options{
			QueueURL: url, SQS: sqs.NewFromConfig(sdk), AutoScaling: autoscaling.NewFromConfig(sdk),
			Kube: kube, Nodes: mgr.GetCache(), Clock: clk, Recorder: mgr.GetEventRecorder("spotter-queue"),
			Config: cfg, DryRun: cfg.DryRun,
		})
		if err := mgr.Add(q); err != nil {
			return nil, fmt.Errorf("registering the %s: %w", q.Name(), err)
		}
		started = append(started, q.Name())
	}
	return started, nil
}

// watchNodes adds h to the manager's Node informer for the named controller.
func watchNodes(ctx context.Context, mgr ctrl.Manager, name string, h toolscache.ResourceEventHandler) error {
	inf, err := informerFor(ctx, mgr, clock.RealClock{}, &corev1.Node{}, setupRetryFor)
	if err != nil {
		return fmt.Errorf("watching nodes for the %s: %w", name, err)
	}
	if _, err := inf.AddEventHandler(h); err != nil {
		return fmt.Errorf("watching nodes for the %s: %w", name, err)
	}
	return nil
}

// feedResidents keeps the snapshots the residents answer the drains'
// re-checks from current with the cache (see plan.Resident): every pod
// change, and for the rest a rebuild when a node changes in a way that can
// change a fit, a namespace or anything of volumes changes, or a
// PodDisruptionBudget is added, deleted or given another spec (the hold for
// nodes under notice reads which pods they cover; their status changes no
// answer). Services and workloads change no fit: the scheduler spreads by
// their selectors only when it scores.
func feedResidents(ctx context.Context, mgr ctrl.Manager, residents plan.Residents) error {
	if len(residents) == 0 {
		return nil
	}
	tombstone := func(obj any) any {
		if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			return t.Obj
		}
		return obj
	}
	type watch struct {
		obj client.Object
		h   toolscache.ResourceEventHandler
	}
	handlers := []watch{
		{&corev1.Pod{}, toolscache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) {
				if p, ok := obj.(*corev1.Pod); ok {
					residents.PodChanged(nil, p)
				}
			},
			UpdateFunc: func(oldObj, newObj any) {
				o, _ := oldObj.(*corev1.Pod)
				if p, ok := newObj.(*corev1.Pod); ok {
					residents.PodChanged(o, p)
				}
			},
			DeleteFunc: func(obj any) {
				if p, ok := tombstone(obj).(*corev1.Pod); ok {
					residents.PodChanged(p, nil)
				}
			},
		}},
		{&corev1.Node{}, toolscache.ResourceEventHandlerFuncs{
			AddFunc: func(any) { residents.Invalidate() },
			UpdateFunc: func(oldObj, newObj any) {
				o, _ := oldObj.(*corev1.Node)
				n, _ := newObj.(*corev1.Node)
				if o == nil || n == nil || plan.NodeChangeMatters(o, n) {
					residents.Invalidate()
				}
			},
			DeleteFunc: func(any) { residents.Invalidate() },
		}},
	}
	handlers = append(handlers, watch{&policyv1.PodDisruptionBudget{}, toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { residents.Invalidate() },
		UpdateFunc: func(oldObj, newObj any) {
			o, _ := oldObj.(*policyv1.PodDisruptionBudget)
			n, _ := newObj.(*policyv1.PodDisruptionBudget)
			if o == nil || n == nil || !equality.Semantic.DeepEqual(o.Spec, n.Spec) {
				residents.Invalidate()
			}
		},
		DeleteFunc: func(any) { residents.Invalidate() },
	}})
	anyChange := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { residents.Invalidate() },
		UpdateFunc: func(any, any) { residents.Invalidate() },
		DeleteFunc: func(any) { residents.Invalidate() },
	}
	for _, obj := range []client.Object{&corev1.Namespace{}, &corev1.PersistentVolume{}, &corev1.PersistentVolumeClaim{}, &storagev1.StorageClass{}, &storagev1.CSINode{}} {
		handlers = append(handlers, watch{obj, anyChange})
	}
	for _, h := range handlers {
		inf, err := informerFor(ctx, mgr, clock.RealClock{}, h.obj, setupRetryFor)
		if err == nil {
			_, err = inf.AddEventHandler(h.h)
		}
		if err != nil {
			return fmt.Errorf("watching %T for the drains' re-checks: %w", h.obj, err)
		}
	}
	residents.Fed()
	return nil
}

// Deps are what Build builds the controllers on.
type Deps struct {
	// Reader reads the cluster (the manager's cache); Kube writes to it.
	Reader client.Reader
	Kube   kubernetes.Interface
	// Clock is the one clock of the controllers and their drains.
	Clock clock.Clock
	// Recorder returns the Event recorder of a component (nil: no Events).
	Recorder func(component string) events.EventRecorder
	// Provider builds the cloud provider, and a channel closed once it knows
	// its instances (nil when it needs no start). Build calls it only when the
	// migrator runs.
	Provider func() (cloud.Provider, <-chan struct{}, error)
	// OwnNode is the node Spotter runs on (NODE_NAME): drained last, never
	// replaced.
	OwnNode string
	// Self is the object Events about a controller itself rather than a
	// node go to (the leader Lease); nil: none.
	Self *corev1.ObjectReference
}

// LeaseNamespace is the namespace of the leader Lease: the configuration's,
// else the controller's own (POD_NAMESPACE), else kube-system.
func LeaseNamespace(le v1alpha1.LeaderElectionConfig) string {
	return cmp.Or(le.LeaseNamespace, os.Getenv("POD_NAMESPACE"), "kube-system")
}

// self is the leader Lease, where Events about a controller itself go (in
// its namespace, whether or not leader election is on: an Event may name an
// object that does not exist, and kubectl get events -n <namespace> lists
// it all the same).
func self(le v1alpha1.LeaderElectionConfig) *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: "coordination.k8s.io/v1", Kind: "Lease", Namespace: LeaseNamespace(le), Name: le.LeaseName}
}

// Built are the controllers of a configuration, built and not started.
type Built struct {
	// Migrator, Rescheduler and Preemptible are nil when the configuration
	// does not run them.
	Migrator    *migrator.Controller
	Rescheduler *rescheduler.Controller
	Preemptible *preemptible.Controller
	// SpotFirst is nil when the configuration does not run it.
	SpotFirst *spotfirst.Controller
	// Provider is the migrator's cloud provider; nil without the migrator.
	Provider cloud.Provider
	// Budget is the disruption budget the migrator, the rescheduler and the
	// preemptible controller share.
	Budget     *disruption.Budget
	Classifier *classify.Classifier
}

// Residents are what answer the re-checks of the migrator's and the
// rescheduler's drains, to be fed the cluster's changes (plan.Resident).
func (b *Built) Residents() plan.Residents {
	var rs plan.Residents
	if b.Migrator != nil {
		rs = append(rs, b.Migrator.Resident())
	}
	if b.Rescheduler != nil {
		rs = append(rs, b.Rescheduler.Resident())
	}
	return rs
}

// Build builds the migrator, the rescheduler, the preemptible controller and
// the spot-first controller the configuration runs (what runs, and what only
// reports, is read by v1alpha1.ComponentsOf), with every option they take
// from it. `spotter controller` (Setup) and `spotter simulate` both build
// them here: the simulator runs the product's controllers, not a model of
// them.
func Build(cfg *v1alpha1.SpotterConfiguration, d Deps) (*Built, error) {
	classifier, err := classify.New(cfg.Classification, nil)
	if err != nil {
		return nil, err
	}
	budget, err := disruption.New(cfg.Disruption)
	if err != nil {
		return nil, err
	}
	recorder := func(name string) events.EventRecorder {
		if d.Recorder == nil {
			return nil
		}
		return d.Recorder(name)
	}
	b := &Built{Budget: budget, Classifier: classifier}
	run := v1alpha1.ComponentsOf(cfg)
	if run.Migrator.Enabled {
		provider, synced, err := d.Provider()
		if err != nil {
			return nil, err
		}
		b.Provider = provider
		schedule, err := v1alpha1.ParseSchedule(cfg.Migrator.Schedule)
		if err != nil {
			return nil, fmt.Errorf("migrator.schedule: %w", err)
		}
		loc, err := time.LoadLocation(cfg.Migrator.TimeZone)
		if err != nil {
			return nil, fmt.Errorf("migrator.timeZone: %w", err)
		}
		dryRun := run.Migrator.DryRun
		rec := recorder("spotter-migrator")
		b.Migrator = migrator.New(d.Reader, d.Kube, provider, newPlanner(cfg, classifier), newDrainer(d.Kube, d.Clock, rec, cfg, migrator.Component, dryRun, migrator.CountEvictionRetry, migrator.CountEvictionHeld),
			budget, d.Clock, rec, migrator.Options{
				Schedule:               inZone{schedule, loc},
				Mode:                   cfg.Migrator.Mode,
				NodeReadyTimeout:       cfg.Migrator.NodeReadyTimeout.Duration,
				MaxNodesPerRun:         int(cfg.Migrator.MaxNodesPerRun),
				SpotUnavailableBackoff: cfg.Migrator.SpotUnavailableBackoff.Duration,
				MaxSpotUnavailable:     cfg.Migrator.MaxSpotUnavailableBackoff.Duration,
				SpotReadyDelay:         durationOr(cfg.Migrator.SpotReadyDelay),
				InterruptionCost:       durationOr(cfg.Migrator.InterruptionCost),
				InterruptionWindow:     cfg.Migrator.InterruptionWindow.Duration,
				MaxSpotSharePercent:    int(cfg.Migrator.MaxSpotSharePercent),
				ShutdownGracePeriod:    cfg.Drain.ShutdownGracePeriod.Duration,
				ProviderSynced:         synced,
				OwnNode:                d.OwnNode,
				Self:                   d.Self,
				DryRun:                 dryRun,
			})
	}
	if run.Rescheduler.Enabled {
		dryRun := run.Rescheduler.DryRun
		rec := recorder("spotter-rescheduler")
		drainer := newDrainer(d.Kube, d.Clock, rec, cfg, rescheduler.Component, dryRun, rescheduler.CountEvictionRetry, rescheduler.CountEvictionHeld)
		b.Rescheduler = rescheduler.New(d.Reader, newPlanner(cfg, classifier), drainer, budget, d.Clock, rec, rescheduler.Options{
			Interval:            cfg.Rescheduler.Interval.Duration,
			DrainDelay:          cfg.Rescheduler.DrainDelay.Duration,
			ReplacementTimeout:  cfg.Rescheduler.ReplacementTimeout.Duration,
			CordonAfterDrain:    cfg.Rescheduler.CordonAfterDrain,
			FailureBackoff:      cfg.Rescheduler.FailureBackoff.Duration,
			MaxFailureBackoff:   cfg.Rescheduler.MaxFailureBackoff.Duration,
			OnRestart:           drain.RecoverPolicy(cfg.Drain.OnRestart),
			ShutdownGracePeriod: cfg.Drain.ShutdownGracePeriod.Duration,
			OwnNode:             d.OwnNode,
			DryRun:              dryRun,
		})
	}
	if run.Preemptible.Enabled {
		p, err := newPreemptible(cfg, d, classifier, budget, run.Preemptible.DryRun, recorder("spotter-preemptible"))
		if err != nil {
			return nil, err
		}
		b.Preemptible = p
	}
	if run.SpotFirst.Enabled {
		b.SpotFirst = spotfirst.New(d.Reader, d.Kube, classifier, d.Clock, recorder("spotter-spot-first"), spotfirst.Options{
			FallbackAfter: cfg.SpotFirst.FallbackAfter.Duration,
			DryRun:        run.SpotFirst.DryRun,
		})
	}
	return b, nil
}

// newPreemptible builds the preemptible controller of cfg.
func newPreemptible(cfg *v1alpha1.SpotterConfiguration, d Deps, classifier *classify.Classifier, budget *disruption.Budget, dryRun bool,
	rec events.EventRecorder) (*preemptible.Controller, error) {
	pc := cfg.Preemptible
	var selectors []labels.Selector
	for i, s := range pc.NodeSelectors {
		sel, err := v1alpha1.ParseSelector(s)
		if err != nil {
			return nil, fmt.Errorf("preemptible.nodeSelectors[%d] %q: %w", i, s, err)
		}
		selectors = append(selectors, sel)
	}
	// Its drains always cordon, whatever drain.cordon says: a node drained
	// before the end of its run must stay empty until its VM goes.
	drainCfg := *cfg
	drainCfg.Drain.Cordon = true
	drainer := newDrainer(d.Kube, d.Clock, rec, &drainCfg, preemptible.Component, dryRun, preemptible.CountEvictionRetry, nil)
	return preemptible.New(d.Reader, d.Kube, classifier, drainer, budget, d.Clock, rec, preemptible.Options{
		Selectors:           selectors,
		Timing:              preemptible.Timing{MaxRunTime: pc.MaxRunTime.Duration, DrainBefore: pc.DrainBefore.Duration},
		ReplacementTimeout:  pc.ReplacementTimeout.Duration,
		OnRestart:           drain.RecoverPolicy(cfg.Drain.OnRestart),
		ShutdownGracePeriod: cfg.Drain.ShutdownGracePeriod.Duration,
		OwnNode:             d.OwnNode,
		DryRun:              dryRun,
	}), nil
}

func newPlanner(cfg *v1alpha1.SpotterConfiguration, classifier *classify.Classifier) *plan.Planner {
	return plan.New(plan.ConfigOptions(cfg, classifier))
}

// newDrainer builds a controller's drain engine; onRetry and onHeld count its
// refused and held evictions (nil: not counted).
func newDrainer(kube kubernetes.Interface, clk clock.Clock, recorder events.EventRecorder, cfg *v1alpha1.SpotterConfiguration, component string, dryRun bool, onRetry, onHeld func()) *drain.Drainer {
	return drain.New(kube, clk, recorder, drain.Options{
		Component:              component,
		Cordon:                 cfg.Drain.Cordon,
		Timeout:                cfg.Drain.Timeout.Duration,
		MaxGracePeriod:         cfg.Drain.MaxGracePeriod.Duration,
		MaxConcurrentEvictions: int(cfg.Drain.MaxConcurrentEvictions),
		Backoff:                cfg.Drain.EvictionBackoff.Duration,
		MaxBackoff:             cfg.Drain.MaxEvictionBackoff.Duration,
		DryRun:                 dryRun,
		OnEvictionRetry:        onRetry,
		OnEvictionHeld:         onHeld,
	})
}

// newProvider builds the configured cloud provider, with its metrics, and a
// channel closed once it knows its instances (nil when it needs no start). The
// kwok provider runs as a Runnable of the manager, on the leader only.
func newProvider(ctx context.Context, mgr ctrl.Manager, kube kubernetes.Interface, clk clock.Clock, cfg *v1alpha1.SpotterConfiguration) (cloud.Provider, <-chan struct{}, error) {
	p, isCloud, err := providers.Cloud(ctx, cfg, mgr.GetConfig(), kube, clk)
	switch {
	case err != nil:
		return nil, nil, err
	case isCloud:
		switch p := p.(type) {
		case *azureprovider.Provider:
			// Its sweep of evicted, deallocated spot VMs runs on the leader.
			if err := mgr.Add(p); err != nil {
				return nil, nil, err
			}
		case *clusterapi.Provider:
			// Events about KubeadmControlPlanes go where they are: the
			// management cluster.
			if err := p.RecordEvents(ctx, "spotter-migrator"); err != nil {
				return nil, nil, err
			}
		}
		return cloudmetrics.Decorate(p), nil, nil
	}
	switch cfg.Cloud.Provider {
	case v1alpha1.ProviderKwok:
		kc, err := kwok.LoadConfig(cfg.Cloud.KwokConfigFile)
		if err != nil {
			return nil, nil, fmt.Errorf("cloud.kwokConfigFile: %w", err)
		}
		p, err := kwok.New(kube, clk, *kc)
		if err != nil {
			return nil, nil, fmt.Errorf("cloud.kwokConfigFile %s: %w", cfg.Cloud.KwokConfigFile, err)
		}
		if err := mgr.Add(p); err != nil {
			return nil, nil, err
		}
		return cloudmetrics.Decorate(p), p.Synced(), nil
	default:
		p, err := kubeprovider.New(kube, cfg.Classification, cfg.Pricing)
		if err != nil {
			return nil, nil, err
		}
		return cloudmetrics.Decorate(p), nil, nil
	}
}

// durationOr reads a defaulted optional duration (nil: 0).
func durationOr(d *metav1.Duration) time.Duration {
	if d == nil {
		return 0
	}
	return d.Duration
}

// inZone reads a cron schedule in a time zone.
type inZone struct {
	cron.Schedule
	loc *time.Location
}

// Next returns the next activation after t, in the schedule's zone.
func (s inZone) Next(t time.Time) time.Time { return s.Schedule.Next(t.In(s.loc)) }
