package testenv

import (
	"context"
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"spotter.dev/spotter/internal/snapshot"
)

// StartCache starts a controller-runtime manager on the apiserver, with the
// cache `spotter controller` runs (snapshot.Transform) and no metrics or
// health endpoints, once register (when not nil) has added what must see
// every event from the start (informer handlers), and waits until its cache
// has synced. The manager stops when ctx ends.
func (e *Env) StartCache(ctx context.Context, t testing.TB, register func(ctrl.Manager) error) ctrl.Manager {
	t.Helper()
	mgr, err := ctrl.NewManager(e.Config, ctrl.Options{
		Cache:                  cache.Options{DefaultTransform: snapshot.Transform},
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		t.Fatal(err)
	}
	if register != nil {
		if err := register(mgr); err != nil {
			t.Fatal(err)
		}
	}
	go func() { _ = mgr.Start(ctx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		t.Fatal("the manager's cache did not sync")
	}
	return mgr
}
