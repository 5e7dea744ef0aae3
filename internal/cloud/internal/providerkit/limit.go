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

// Transport returns next with every request paced by l.
func (l *Limiter) Transport(next http.RoundTripper) http.RoundTripper {
	return pacedTransport{next: next, l: l}
}

// Doer sends a request: an SDK's HTTP client (aws.HTTPClient,
// policy.Transporter).
type Doer interface {
	Do(*http.Request) (*http.Response, error)
}

// Doer returns next with every request paced by l.
func (l *Limiter) Doer(next Doer) Doer { return pacedDoer{next: next, l: l} }

type pacedDoer struct {
	next Doer
	l    *Limiter
}

func (d pacedDoer) Do(r *http.Request) (*http.Response, error) {
	if err := d.l.Wait(r.Context()); err != nil {
		return nil, err
	}
	return d.next.Do(r)
}

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
