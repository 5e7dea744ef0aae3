// Package controller assembles Spotter's controllers: this file is where a
// reader sees what `spotter controller` runs.
package controller

import (
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"

	"spotter.dev/spotter/internal/classify"
	"spotter.dev/spotter/internal/controller/labeler"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// Setup builds every enabled controller from the configuration, registers it
// with the manager and returns the names of those it started.
//
// Today that is the labeler; the rescheduler and the migrator join here as they
// are built.
func Setup(mgr ctrl.Manager, cfg *v1alpha1.SpotterConfiguration) ([]string, error) {
	classifier, err := classify.New(cfg.Classification, nil)
	if err != nil {
		return nil, err
	}
	var started []string
	if *cfg.Labeler.Enabled {
		l := labeler.New(mgr.GetClient(), classifier, mgr.GetEventRecorder("spotter-labeler"), labeler.Options{
			InterruptibleLabel: *cfg.Labeler.InterruptibleLabel,
			PreferSpotTaint:    cfg.Labeler.PreferSpotTaint,
			DryRun:             cfg.DryRun || cfg.Labeler.DryRun,
		})
		if err := l.Register(mgr); err != nil {
			return nil, fmt.Errorf("registering the %s: %w", l.Name(), err)
		}
		started = append(started, l.Name())
	}
	return started, nil
}
