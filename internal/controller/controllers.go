// Package controller assembles Spotter's controllers: this file is where a
// reader sees what `spotter controller` runs.
package controller

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/robfig/cron/v3"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"

	ctrl "sigs.k8s.io/controller-runtime"

	"spotter.dev/spotter/internal/classify"
	"spotter.dev/spotter/internal/cloud"
	awsprovider "spotter.dev/spotter/internal/cloud/aws"
	azureprovider "spotter.dev/spotter/internal/cloud/azure"
	"spotter.dev/spotter/internal/cloud/clusterapi"
	gcpprovider "spotter.dev/spotter/internal/cloud/gcp"
	kubeprovider "spotter.dev/spotter/internal/cloud/kubernetes"
	"spotter.dev/spotter/internal/cloud/kwok"
	cloudmetrics "spotter.dev/spotter/internal/cloud/metrics"
	"spotter.dev/spotter/internal/controller/labeler"
	"spotter.dev/spotter/internal/controller/migrator"
	"spotter.dev/spotter/internal/controller/rescheduler"
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
// provider), the rescheduler and the labeler; the migrator and the rescheduler
// share one disruption budget.
func Setup(ctx context.Context, mgr ctrl.Manager, cfg *v1alpha1.SpotterConfiguration) ([]string, error) {
	// The one clock of every controller, the drains and the kwok provider:
	// none reads the time any other way.
	clk := clock.RealClock{}
	classifier, err := classify.New(cfg.Classification, nil)
	if err != nil {
		return nil, err
	}
	budget, err := disruption.New(cfg.Disruption)
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(mgr.GetConfig())
	if err != nil {
		return nil, err
	}
	for _, w := range v1alpha1.Warnings(cfg) {
		mgr.GetLogger().Info("WARNING: " + w)
	}
	// What runs, and what only reports, is read in one place, which the
	// simulator's spotter strategy reads too.
	run := v1alpha1.ComponentsOf(cfg)
	var started []string
	if run.Migrator.Enabled {
		provider, synced, err := newProvider(ctx, mgr, kube, clk, cfg)
		if err != nil {
			return nil, err
		}
		schedule, err := v1alpha1.ParseSchedule(cfg.Migrator.Schedule)
		if err != nil {
			return nil, fmt.Errorf("migrator.schedule: %w", err)
		}
		loc, err := time.LoadLocation(cfg.Migrator.TimeZone)
		if err != nil {
			return nil, fmt.Errorf("migrator.timeZone: %w", err)
		}
		dryRun := run.Migrator.DryRun
		recorder := mgr.GetEventRecorder("spotter-migrator")
		m := migrator.New(mgr.GetCache(), kube, provider, newPlanner(cfg, classifier), newDrainer(kube, clk, recorder, cfg, migrator.Component, dryRun, nil),
			budget, clk, recorder, migrator.Options{
				Schedule:               inZone{schedule, loc},
				Mode:                   cfg.Migrator.Mode,
				NodeReadyTimeout:       cfg.Migrator.NodeReadyTimeout.Duration,
				MaxNodesPerRun:         int(cfg.Migrator.MaxNodesPerRun),
				SpotUnavailableBackoff: cfg.Migrator.SpotUnavailableBackoff.Duration,
				MaxSpotUnavailable:     cfg.Migrator.MaxSpotUnavailableBackoff.Duration,
				ShutdownGracePeriod:    cfg.Drain.ShutdownGracePeriod.Duration,
				ProviderSynced:         synced,
				OwnNode:                os.Getenv("NODE_NAME"),
				DryRun:                 dryRun,
			})
		if err := m.Register(mgr); err != nil {
			return nil, fmt.Errorf("registering the %s: %w", m.Name(), err)
		}
		started = append(started, m.Name())
	}
	if run.Rescheduler.Enabled {
		dryRun := run.Rescheduler.DryRun
		recorder := mgr.GetEventRecorder("spotter-rescheduler")
		drainer := newDrainer(kube, clk, recorder, cfg, rescheduler.Component, dryRun, rescheduler.CountEvictionRetry)
		r := rescheduler.New(mgr.GetCache(), newPlanner(cfg, classifier), drainer, budget, clk, recorder, rescheduler.Options{
			Interval:            cfg.Rescheduler.Interval.Duration,
			DrainDelay:          cfg.Rescheduler.DrainDelay.Duration,
			ReplacementTimeout:  cfg.Rescheduler.ReplacementTimeout.Duration,
			CordonAfterDrain:    cfg.Rescheduler.CordonAfterDrain,
			FailureBackoff:      cfg.Rescheduler.FailureBackoff.Duration,
			MaxFailureBackoff:   cfg.Rescheduler.MaxFailureBackoff.Duration,
			OnRestart:           drain.RecoverPolicy(cfg.Drain.OnRestart),
			ShutdownGracePeriod: cfg.Drain.ShutdownGracePeriod.Duration,
			OwnNode:             os.Getenv("NODE_NAME"),
			DryRun:              dryRun,
		})
		if err := r.Register(mgr); err != nil {
			return nil, fmt.Errorf("registering the %s: %w", r.Name(), err)
		}
		started = append(started, r.Name())
	}
	if run.Labeler.Enabled {
		l := labeler.New(mgr.GetClient(), classifier, mgr.GetEventRecorder("spotter-labeler"), labeler.Options{
			InterruptibleLabel: *cfg.Labeler.InterruptibleLabel,
			PreferSpotTaint:    *cfg.Labeler.PreferSpotTaint,
			DryRun:             run.Labeler.DryRun,
		})
		if err := l.Register(mgr); err != nil {
			return nil, fmt.Errorf("registering the %s: %w", l.Name(), err)
		}
		started = append(started, l.Name())
	}
	return started, nil
}

func newPlanner(cfg *v1alpha1.SpotterConfiguration, classifier *classify.Classifier) *plan.Planner {
	return plan.New(plan.Options{
		Rules:      plan.Rules{AllowUnreplicated: cfg.Planner.AllowUnreplicatedPods, AllowLocalStorage: cfg.Planner.AllowLocalStorage},
		Classifier: classifier,
		Pricing:    cfg.Pricing,
	})
}

func newDrainer(kube kubernetes.Interface, clk clock.Clock, recorder events.EventRecorder, cfg *v1alpha1.SpotterConfiguration, component string, dryRun bool, onRetry func()) *drain.Drainer {
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
	})
}

// newProvider builds the configured cloud provider, with its metrics, and a
// channel closed once it knows its instances (nil when it needs no start). The
// kwok provider runs as a Runnable of the manager, on the leader only.
func newProvider(ctx context.Context, mgr ctrl.Manager, kube kubernetes.Interface, clk clock.Clock, cfg *v1alpha1.SpotterConfiguration) (cloud.Provider, <-chan struct{}, error) {
	switch cfg.Cloud.Provider {
	case v1alpha1.ProviderAWS:
		p, err := awsprovider.FromConfig(ctx, kube, clk, cfg.Cloud.AWS, cfg.Pricing)
		if err != nil {
			return nil, nil, err
		}
		return cloudmetrics.Decorate(p), nil, nil
	case v1alpha1.ProviderGCP:
		p, err := gcpprovider.FromConfig(ctx, kube, clk, cfg.Cloud.GCP, cfg.Pricing)
		if err != nil {
			return nil, nil, err
		}
		return cloudmetrics.Decorate(p), nil, nil
	case v1alpha1.ProviderAzure:
		p, err := azureprovider.FromConfig(ctx, kube, clk, cfg.Cloud.Azure, cfg.Pricing)
		if err != nil {
			return nil, nil, err
		}
		// Its sweep of evicted, deallocated spot VMs runs on the leader.
		if err := mgr.Add(p); err != nil {
			return nil, nil, err
		}
		return cloudmetrics.Decorate(p), nil, nil
	case v1alpha1.ProviderClusterAPI:
		p, err := clusterapi.FromConfig(mgr.GetConfig(), kube, clk, cfg.Cloud.ClusterAPI, cfg.Pricing)
		if err != nil {
			return nil, nil, err
		}
		// Events about KubeadmControlPlanes go where they are: the
		// management cluster.
		if err := p.RecordEvents(ctx, "spotter-migrator"); err != nil {
			return nil, nil, err
		}
		return cloudmetrics.Decorate(p), nil, nil
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

// inZone reads a cron schedule in a time zone.
type inZone struct {
	cron.Schedule
	loc *time.Location
}

// Next returns the next activation after t, in the schedule's zone.
func (s inZone) Next(t time.Time) time.Time { return s.Schedule.Next(t.In(s.loc)) }
