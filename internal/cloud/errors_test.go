package cloud_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"spotter.dev/spotter/internal/cloud"
)

func TestErrorHelpers(t *testing.T) {
	base := errors.New("boom")
	for _, tc := range []struct {
		name                                   string
		err                                    error
		notFound, throttled, capacity, control bool
	}{
		{name: "nil", err: nil},
		{name: "plain", err: base},
		{name: "not found", err: cloud.NewNotFoundError(base), notFound: true},
		{name: "wrapped not found", err: fmt.Errorf("deleting node n1: %w", cloud.NewNotFoundError(base)), notFound: true},
		{name: "throttled", err: cloud.NewThrottledError(base, time.Second), throttled: true},
		{name: "capacity", err: fmt.Errorf("x: %w", cloud.NewCapacityUnavailableError("spot-a", base)), capacity: true},
		{name: "control plane", err: &cloud.ControlPlaneError{Kind: "node", Name: "cp", Reason: "r"}, control: true},
		{name: "joined", err: errors.Join(base, cloud.NewNotFoundError(base)), notFound: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := cloud.IsNotFound(tc.err); got != tc.notFound {
				t.Errorf("IsNotFound = %v", got)
			}
			if got := cloud.IsThrottled(tc.err); got != tc.throttled {
				t.Errorf("IsThrottled = %v", got)
			}
			if got := cloud.IsCapacityUnavailable(tc.err); got != tc.capacity {
				t.Errorf("IsCapacityUnavailable = %v", got)
			}
			if got := cloud.IsControlPlane(tc.err); got != tc.control {
				t.Errorf("IsControlPlane = %v", got)
			}
			ignored := cloud.IgnoreNotFound(tc.err)
			if tc.notFound && ignored != nil {
				t.Errorf("IgnoreNotFound = %v, want nil", ignored)
			}
			if !tc.notFound && !errors.Is(ignored, tc.err) {
				t.Errorf("IgnoreNotFound = %v, want the error back", ignored)
			}
			if tc.err != nil && !errors.Is(tc.err, base) && !tc.control {
				t.Errorf("%v does not unwrap to its cause", tc.err)
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	err := fmt.Errorf("listing: %w", cloud.NewThrottledError(errors.New("429"), 3*time.Second))
	if d, ok := cloud.RetryAfter(err); !ok || d != 3*time.Second {
		t.Errorf("RetryAfter = %v, %v; want 3s, true", d, ok)
	}
	if _, ok := cloud.RetryAfter(errors.New("x")); ok {
		t.Error("RetryAfter of a plain error reports a throttle")
	}
	if got := err.Error(); got != "listing: throttled (retry after 3s): 429" {
		t.Errorf("message %q", got)
	}
}
