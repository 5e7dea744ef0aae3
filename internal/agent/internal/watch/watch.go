// Package watch holds what the agent's notice sources share: the wait between
// polls on an injected clock, their backoff (internal/backoff), de-duplication
// of notices, and bounded metadata requests.
package watch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"spotter.dev/spotter/internal/agent/notice"
	"spotter.dev/spotter/internal/backoff"
)

// Defaults of the sources' configuration, the same as the agent's
// configuration defaults (agent.pollInterval, agent.requestTimeout).
const (
	DefaultPollInterval   = time.Second
	DefaultRequestTimeout = 2 * time.Second
	// DefaultMaxBackoff caps the wait after repeated errors. Short against the
	// 30 s notices of GCP and Azure: a metadata service that comes back must be
	// read again quickly.
	DefaultMaxBackoff = 10 * time.Second
)

// MaxBody bounds a metadata response the sources read; the documents they
// read are a few kilobytes at most.
const MaxBody = 1 << 20

// Sleep waits d on clk. It returns false if ctx ended first.
func Sleep(ctx context.Context, clk clock.Clock, d time.Duration) bool {
	t := clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

// NewBackoff returns the backoff of a source's retries: from the poll interval
// up to maxBackoff. It has no jitter: each agent talks to its own node's
// link-local metadata service, so there is no crowd of clients to spread, and
// the waits stay exact for the tests that step a fake clock through them.
func NewBackoff(interval, maxBackoff time.Duration) *backoff.Backoff {
	return &backoff.Backoff{Initial: interval, Max: maxBackoff}
}

// Send sends n on out unless ctx ends first; it reports whether it sent.
func Send(ctx context.Context, out chan<- notice.Notice, n notice.Notice) bool {
	select {
	case out <- n:
		return true
	case <-ctx.Done():
		return false
	}
}

// Tracker remembers the last notice sent per ID so that a source sends only
// what is new or changed. It is not safe for concurrent use.
type Tracker struct {
	last map[string]notice.Notice
}

// Changed records n and reports whether it differs from the last notice
// recorded with its ID (or is the first one).
func (t *Tracker) Changed(n notice.Notice) bool {
	if t.last == nil {
		t.last = map[string]notice.Notice{}
	}
	prev, ok := t.last[n.ID]
	t.last[n.ID] = n
	return !ok || !prev.Deadline.Equal(n.Deadline) || prev.Kind != n.Kind || prev.Action != n.Action ||
		prev.Ended != n.Ended || prev.Detail != n.Detail || prev.Cloud != n.Cloud
}

// Last returns the last notice recorded with id.
func (t *Tracker) Last(id string) (notice.Notice, bool) {
	n, ok := t.last[id]
	return n, ok
}

// Open returns the IDs of recorded notices that have not ended.
func (t *Tracker) Open() []string {
	var ids []string
	for id, n := range t.last {
		if !n.Ended {
			ids = append(ids, id)
		}
	}
	return ids
}

// ErrCredentials is returned (wrapped) for an endpoint that holds user
// information (user:password@). Metadata services take no credentials, and
// the agent logs its endpoint; the error never shows the URL.
var ErrCredentials = errors.New("credentials (user:password@) are not allowed in the metadata endpoint, nor is any '@'; the metadata services take none")

// Endpoint checks a configured base URL and returns it without a trailing
// slash; empty means notice.DefaultEndpoint. A URL with an '@' anywhere is
// refused with ErrCredentials, before it is parsed: however malformed, it may
// hold a password, and the error must not show it.
func Endpoint(s string) (string, error) {
	if s == "" {
		return notice.DefaultEndpoint, nil
	}
	if strings.Contains(s, "@") {
		return "", ErrCredentials
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("endpoint %q: %w", s, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("endpoint %q: want a base URL such as http://169.254.169.254", s)
	}
	return u.Scheme + "://" + u.Host + trimSlash(u.Path), nil
}

func trimSlash(p string) string {
	for len(p) > 0 && p[len(p)-1] == '/' {
		p = p[:len(p)-1]
	}
	return p
}

// Durations checks and defaults a source's poll interval and request timeout.
func Durations(poll, timeout *time.Duration) error {
	if *poll < 0 || *timeout < 0 {
		return errors.New("PollInterval and RequestTimeout must not be negative")
	}
	if *poll == 0 {
		*poll = DefaultPollInterval
	}
	if *timeout == 0 {
		*timeout = DefaultRequestTimeout
	}
	return nil
}

// Complete checks and defaults what every source's Config shares, and returns
// the endpoint's base URL: the poll interval and request timeout (Durations),
// MaxBackoff (DefaultMaxBackoff when 0, never below the poll interval), the
// HTTP client (notice.NewHTTPClient) and the clock (the real one).
func Complete(endpoint string, poll, timeout, maxBackoff *time.Duration, client **http.Client, clk *clock.Clock) (string, error) {
	base, err := Endpoint(endpoint)
	if err != nil {
		return "", err
	}
	if err := Durations(poll, timeout); err != nil {
		return "", err
	}
	if *maxBackoff < 0 {
		return "", errors.New("MaxBackoff must not be negative")
	}
	if *maxBackoff == 0 {
		*maxBackoff = DefaultMaxBackoff
	}
	*maxBackoff = max(*maxBackoff, *poll)
	if *client == nil {
		*client = notice.NewHTTPClient()
	}
	if *clk == nil {
		*clk = clock.RealClock{}
	}
	return base, nil
}

// TerminationInterval checks and defaults a source's TerminationPollInterval
// *d: def when 0, never above poll, an error when negative.
func TerminationInterval(d *time.Duration, def, poll time.Duration) error {
	switch {
	case *d < 0:
		return fmt.Errorf("TerminationPollInterval %v: want a positive duration, or 0 for the default", *d)
	case *d == 0:
		*d = def
	}
	*d = min(*d, poll)
	return nil
}

// Poll calls poll every interval until ctx ends and sends the notices it
// returns. After an error it logs it (reading names what was read) and waits
// with exponential backoff, from interval up to maxBackoff, instead. It
// returns nil when ctx ends.
func Poll(ctx context.Context, clk clock.Clock, interval, maxBackoff time.Duration, out chan<- notice.Notice, reading string,
	poll func(context.Context) ([]notice.Notice, error)) error {
	log := klog.FromContext(ctx)
	retries := NewBackoff(interval, maxBackoff)
	for {
		notices, err := poll(ctx)
		for _, n := range notices {
			if !Send(ctx, out, n) {
				return nil
			}
		}
		wait := interval
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			wait = retries.Next()
			log.Error(err, "Reading "+reading+"; will retry", "retryIn", wait)
		} else {
			retries.Reset()
		}
		if !Sleep(ctx, clk, wait) {
			return nil
		}
	}
}

// Observe tells o, when not nil, the outcome of a read of path; a read that
// failed because ctx ended is not told (see notice.ReadObserver).
func Observe(ctx context.Context, o notice.ReadObserver, path string, err error) {
	if o == nil || (err != nil && ctx.Err() != nil) {
		return
	}
	o.ObserveRead(path, err)
}

// Reading names the URL u in the error of a read that failed, for Probe:
// "reading URL: err".
func Reading(u string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("reading %s: %w", u, err)
}

// Response is a metadata answer read in full.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Do sends req with at most timeout for the whole exchange, and reads the
// body (up to MaxBody; a longer body is an error).
func Do(ctx context.Context, client *http.Client, req *http.Request, timeout time.Duration) (*Response, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := client.Do(req.WithContext(ctx))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxBody+1))
	if err != nil {
		return nil, fmt.Errorf("%s %s: reading the response: %w", req.Method, req.URL.Redacted(), err)
	}
	if len(body) > MaxBody {
		return nil, fmt.Errorf("%s %s: response larger than %d bytes", req.Method, req.URL.Redacted(), MaxBody)
	}
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: body}, nil
}

// StatusError is a metadata answer with an unexpected HTTP status.
type StatusError struct {
	Method, URL string
	Status      int
	Body        string // the start of the body, for the log
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s %s: HTTP %d %s: %q", e.Method, e.URL, e.Status, http.StatusText(e.Status), e.Body)
}

// NewStatusError describes resp, the answer to a request.
func NewStatusError(method, url string, resp *Response) *StatusError {
	body := string(resp.Body)
	if len(body) > 200 {
		body = body[:200] + "..."
	}
	return &StatusError{Method: method, URL: url, Status: resp.Status, Body: body}
}

// IsStatus reports whether err is a StatusError with the given status.
func IsStatus(err error, status int) bool {
	var se *StatusError
	return errors.As(err, &se) && se.Status == status
}
