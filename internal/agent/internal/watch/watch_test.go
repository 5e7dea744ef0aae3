package watch

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"spotter.dev/spotter/internal/agent/notice"
)

// The sources' waits after errors are exact (no jitter): tests step a fake
// clock through them.
func TestNewBackoff(t *testing.T) {
	b := NewBackoff(time.Second, 5*time.Second)
	var got []time.Duration
	for range 5 {
		got = append(got, b.Next())
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("waits %v, want %v", got, want)
		}
	}
	b.Reset()
	if d := b.Next(); d != time.Second {
		t.Errorf("after Reset: %v", d)
	}
}

func TestTracker(t *testing.T) {
	var tr Tracker
	n := notice.Notice{Cloud: "aws", ID: "a", Action: "stop", Deadline: time.Unix(100, 0)}
	if !tr.Changed(n) {
		t.Error("first sighting not a change")
	}
	if tr.Changed(n) {
		t.Error("same notice is a change")
	}
	same := n
	same.Deadline = time.Unix(100, 0).In(time.FixedZone("x", 3600)) // same instant
	if tr.Changed(same) {
		t.Error("same deadline in another zone is a change")
	}
	n.Ended = true
	if !tr.Changed(n) {
		t.Error("Ended is not a change")
	}
	if len(tr.Open()) != 0 {
		t.Errorf("open: %v", tr.Open())
	}
}

func TestEndpoint(t *testing.T) {
	for in, want := range map[string]string{
		"":                       notice.DefaultEndpoint,
		"http://127.0.0.1:8080/": "http://127.0.0.1:8080",
		"https://proxy/base//":   "https://proxy/base",
		"http://169.254.169.254": "http://169.254.169.254",
	} {
		if got, err := Endpoint(in); err != nil || got != want {
			t.Errorf("Endpoint(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"169.254.169.254", "ftp://x", "http://x/?q=1", "http://"} {
		if _, err := Endpoint(in); err == nil {
			t.Errorf("Endpoint(%q) accepted", in)
		}
	}
}

// An endpoint with user information is refused, and the error does not show
// it, however malformed the URL.
func TestEndpointRefusesCredentials(t *testing.T) {
	for _, in := range []string{
		"http://admin:s3cret@169.254.169.254", "http://admin@169.254.169.254/", "https://admin:s3cret@proxy/base",
		"http://admin:s3cret@host:port", "admin:s3cret@169.254.169.254", "http://admin:s3/cret@host",
	} {
		_, err := Endpoint(in)
		if !errors.Is(err, ErrCredentials) {
			t.Errorf("Endpoint(%q) = %v, want ErrCredentials", in, err)
			continue
		}
		if strings.Contains(err.Error(), "s3") || strings.Contains(err.Error(), "admin") {
			t.Errorf("Endpoint(%q): the error shows the credentials: %v", in, err)
		}
	}
}

// recorder is a notice.ReadObserver that records what it is told.
type recorder []string

func (r *recorder) ObserveRead(path string, err error) {
	*r = append(*r, path+" "+map[bool]string{true: "ok", false: "failed"}[err == nil])
}

// A read that failed because the watch ends is not told: the agent is not
// blind for stopping. Other reads are, and a nil observer is allowed.
func TestObserve(t *testing.T) {
	var r recorder
	ctx, cancel := context.WithCancel(context.Background())
	Observe(ctx, &r, "/a", nil)
	Observe(ctx, &r, "/b", errors.New("refused"))
	Observe(ctx, nil, "/c", nil)
	cancel()
	Observe(ctx, &r, "/d", context.Canceled)
	Observe(ctx, &r, "/e", nil)
	if got, want := strings.Join(r, ", "), "/a ok, /b failed, /e ok"; got != want {
		t.Errorf("observed %q, want %q", got, want)
	}
}
