// Package controller assembles Spotter's controllers: this file is where a
// reader sees what `spotter controller` runs.
package controller

import (
	"fmt"
	"os"

	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	ctrl "sigs.k8s.io/controller-runtime"

	"spotter.dev/spotter/internal/classify"
	"spotter.dev/spotter/internal/controller/labeler"
	"spotter.dev/spotter/internal/controller/rescheduler"
	"spotter.dev/spotter/internal/disruption"
	"spotter.dev/spotter/internal/drain"
	"spotter.dev/spotter/internal/plan"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// Setup builds every enabled controller from the configuration, registers it
// with the manager and returns the names of those it started.
//
// Today those are the labeler and the rescheduler; the migrator joins here when
// it is built, sharing the disruption budget.
func Setup(mgr ctrl.Manager, cfg *v1alpha1.SpotterConfiguration) ([]string, error) {
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
	var started []string
	if *cfg.Rescheduler.Enabled {
		dryRun := cfg.DryRun || cfg.Rescheduler.DryRun
		recorder := mgr.GetEventRecorder("spotter-rescheduler")
		drainer := drain.New(kube, clock.RealClock{}, recorder, drain.Options{
			Component:              rescheduler.Component,
			Cordon:                 cfg.Drain.Cordon,
			Timeout:                cfg.Drain.Timeout.Duration,
			MaxGracePeriod:         cfg.Drain.MaxGracePeriod.Duration,
			MaxConcurrentEvictions: int(cfg.Drain.MaxConcurrentEvictions),
			Backoff:                cfg.Drain.EvictionBackoff.Duration,
			MaxBackoff:             cfg.Drain.MaxEvictionBackoff.Duration,
			DryRun:                 dryRun,
			OnEvictionRetry:        rescheduler.CountEvictionRetry,
		})
		planner := plan.New(plan.Options{
			Rules:      plan.Rules{AllowUnreplicated: cfg.Planner.AllowUnreplicatedPods, AllowLocalStorage: cfg.Planner.AllowLocalStorage},
			Classifier: classifier,
			Pricing:    cfg.Pricing,
		})
		r := rescheduler.New(mgr.GetCache(), planner, drainer, budget, clock.RealClock{}, recorder, rescheduler.Options{
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
	if *cfg.Labeler.Enabled {
		l := labeler.New(mgr.GetClient(), classifier, mgr.GetEventRecorder("spotter-labeler"), labeler.Options{
			InterruptibleLabel: *cfg.Labeler.InterruptibleLabel,
			PreferSpotTaint:    *cfg.Labeler.PreferSpotTaint,
			DryRun:             cfg.DryRun || cfg.Labeler.DryRun,
		})
		if err := l.Register(mgr); err != nil {
			return nil, fmt.Errorf("registering the %s: %w", l.Name(), err)
		}
		started = append(started, l.Name())
	}
	return started, nil
}
