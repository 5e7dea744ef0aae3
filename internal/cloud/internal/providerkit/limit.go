package providerkit

import (
	"context"
	"net/http"

	"golang.org/x/time/rate"
)

// Limiter paces a provider's requests to its cloud's API: at most a number
// a second, in bursts of up to twice that, on the wall clock (the clouds'
// own limits are token buckets on it). Every request of the provider's SDK
// clients waits for it, so that a loop that asks a lot, or many nodes
// changing at once, is smoothed before the cloud throttles it; a request
// whose context ends while it waits fails with that context's error.
type Limiter struct{ l *rate.Limiter }

// NewLimiter returns a Limiter of perSecond requests a second (at least 1).
func NewLimiter(perSecond int32) *Limiter {
	perSecond = max(perSecond, 1)
	return &Limiter{l: rate.NewLimiter(rate.Limit(perSecond), 2*int(perSecond))}
}

// Wait blocks until a request may go, or ctx ends.
func (l *Limiter) Wait(ctx context.Context) error { return l.l.Wait(ctx) }

// Transport returns next (nil: a clone of http.DefaultTransport) with every
// request paced by l.
func (l *Limiter) Transport(next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport.(*http.Transport).Clone()
	}
	return pacedTransport{next: next, l: l}
}

// Client returns an *http.Client whose requests l paces (an SDK's
// Transporter or HTTPClient).
func (l *Limiter) Client() *http.Client { return &http.Client{Transport: l.Transport(nil)} }

type pacedTransport struct {
	next http.RoundTripper
	l    *Limiter
}

func (t pacedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if err := t.l.Wait(r.Context()); err != nil {
		return nil, err
	}
	return t.next.RoundTrip(r)
}
