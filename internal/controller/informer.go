package controller

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"spotter.dev/spotter/internal/backoff"
	"spotter.dev/spotter/internal/coop"
)

// setupRetryFor bounds the retries of a failing informer lookup at start.
const setupRetryFor = time.Minute

// informerFor returns the manager's informer of obj's kind. Getting it asks
// the apiserver's discovery for the kind, once; an apiserver that is
// restarting or overloaded (5xx, 429, a timeout, a refused connection) is
// asked again with backoff for up to retryFor, instead of ending the process
// at start. An answer that waiting cannot change (the kind is unknown, the
// credentials are refused or lack the permission) is returned at once.
func informerFor(ctx context.Context, mgr ctrl.Manager, clk clock.Clock, obj client.Object, retryFor time.Duration) (cache.Informer, error) {
	deadline := clk.Now().Add(retryFor)
	b := backoff.Backoff{Initial: time.Second, Max: 10 * time.Second, Jitter: 0.2}
	for {
		inf, err := mgr.GetCache().GetInformer(ctx, obj)
		if err == nil || !transient(err) || !clk.Now().Before(deadline) {
			return inf, err
		}
		wait := b.Next()
		klog.FromContext(ctx).Info("Asking the apiserver again", "object", fmt.Sprintf("%T", obj), "in", wait, "error", err.Error())
		if err := coop.Sleep(ctx, clk, wait); err != nil {
			return nil, err
		}
	}
}

// transient reports whether err may go away by itself: anything but an
// answer about the request itself (forbidden, unauthorized, not found, bad
// or invalid).
func transient(err error) bool {
	switch {
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err), apierrors.IsNotFound(err),
		apierrors.IsBadRequest(err), apierrors.IsInvalid(err), apierrors.IsMethodNotSupported(err):
		return false
	}
	return true
}
