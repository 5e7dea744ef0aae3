package providerkit

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"spotter.dev/spotter/internal/cloud"
)

func TestChecks(t *testing.T) {
	const g = "scale set rg/ss"
	for _, tc := range []struct {
		name    string
		err     error
		want    error // nil: no error
		message string
	}{
		{"increase of 1", CheckIncrease(1), nil, ""},
		{"increase of 0", CheckIncrease(0), cloud.ErrInvalidDelta, "increase of 0: "},
		{"decrease of 2", CheckDecrease(2), nil, ""},
		{"decrease of -1", CheckDecrease(-1), cloud.ErrInvalidDelta, "decrease of -1: "},
		{"at the maximum", CheckMax(g, 2, 5, 5), nil, ""},
		{"above the maximum", CheckMax(g, 2, 6, 5), cloud.ErrAboveMaxSize, "scale set rg/ss: 2 more would make 6, above its maximum 5: "},
		{"cancel what is pending", CheckCancel(g, 2, 2, "request(s) not yet fulfilled", 4, 2), nil, ""},
		{"cancel more than pending", CheckCancel(g, 3, 2, "request(s) not yet fulfilled", 4, 0), cloud.ErrNotUnfulfilled,
			"scale set rg/ss has 2 request(s) not yet fulfilled, asked to cancel 3: "},
		// Both wrong: the pending requests are checked first.
		{"cancel more than pending, below the minimum", CheckCancel(g, 3, 2, "x", 3, 3), cloud.ErrNotUnfulfilled, "scale set rg/ss has 2 x, asked to cancel 3: "},
		{"cancel below the minimum", CheckCancel(g, 2, 2, "x", 4, 3), cloud.ErrBelowMinSize, "scale set rg/ss: 2 fewer would make 2, below its minimum 3: "},
		{"delete down to the minimum", CheckDelete(g, 2, 5, 3), nil, ""},
		{"delete below the minimum", CheckDelete(g, 3, 5, 3), cloud.ErrBelowMinSize, "scale set rg/ss: deleting 3 node(s) would leave 2, below its minimum 3: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.want == nil {
				if tc.err != nil {
					t.Fatalf("error %v", tc.err)
				}
				return
			}
			if !errors.Is(tc.err, tc.want) {
				t.Fatalf("error %v, want %v", tc.err, tc.want)
			}
			if want := tc.message + tc.want.Error(); tc.err.Error() != want {
				t.Errorf("message %q, want %q", tc.err.Error(), want)
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	for v, want := range map[string]time.Duration{
		"": 0, "7": 7 * time.Second, "0": 0, "-3": 0, "1.5": 0, "Wed, 21 Oct 2026 07:28:00 GMT": 0,
	} {
		h := http.Header{}
		if v != "" {
			h.Set("Retry-After", v)
		}
		if got := RetryAfter(h); got != want {
			t.Errorf("Retry-After %q: %s, want %s", v, got, want)
		}
	}
	if got := RetryAfter(nil); got != 0 {
		t.Errorf("no header: %s", got)
	}
}
