// Package gcpmetadata emulates the parts of the Compute Engine metadata server
// that spotter-agent reads: instance/preempted and instance/maintenance-event,
// with ETags and wait_for_change long-polls. It is strict like the real server:
// a request without Metadata-Flavor: Google is refused, and every answer
// carries Metadata-Flavor: Google.
//
// Tests set values with the Set methods; a separate process can do the same
// through the control API under /_emulator/ (see ServeHTTP).
package gcpmetadata

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"spotter.dev/spotter/internal/emulator/internal/emulatorkit"
)

// Paths the emulator serves, and the keys of Set.
const (
	Prefix               = "/computeMetadata/v1/"
	PreemptedPath        = Prefix + "instance/preempted"
	MaintenanceEventPath = Prefix + "instance/maintenance-event"
	IDPath               = Prefix + "instance/id"
	NamePath             = Prefix + "instance/name"
)

// DefaultWaitTimeout is how long a wait_for_change request without
// timeout_sec waits for a change.
const DefaultWaitTimeout = 5 * time.Minute

// Options configure a Server.
type Options struct {
	// Clock times the long-polls' timeout_sec; nil means the real clock.
	Clock clock.Clock
	// WaitTimeout replaces DefaultWaitTimeout.
	WaitTimeout time.Duration
}

// Server is the emulated metadata server; an http.Handler. It is safe for
// concurrent use.
type Server struct {
	clock       clock.Clock
	waitTimeout time.Duration
	refusal     emulatorkit.Refusal

	mu       sync.Mutex
	values   map[string]string // path -> value
	changed  chan struct{}     // closed and replaced on every change
	closed   chan struct{}
	requests map[string]int
	waiting  map[string]int
}

// New returns a metadata server of a running, not preempted VM without
// maintenance.
func New(opts Options) *Server {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.WaitTimeout <= 0 {
		opts.WaitTimeout = DefaultWaitTimeout
	}
	return &Server{
		clock:       opts.Clock,
		waitTimeout: opts.WaitTimeout,
		values: map[string]string{
			PreemptedPath:        "FALSE",
			MaintenanceEventPath: "NONE",
			IDPath:               "5963414896000000000",
			NamePath:             "spot-node-1",
		},
		changed:  make(chan struct{}),
		closed:   make(chan struct{}),
		requests: map[string]int{},
		waiting:  map[string]int{},
	}
}

// SetPreempted sets instance/preempted to TRUE or FALSE.
func (s *Server) SetPreempted(preempted bool) {
	v := "FALSE"
	if preempted {
		v = "TRUE"
	}
	s.Set(PreemptedPath, v)
}

// SetMaintenanceEvent sets instance/maintenance-event (NONE,
// MIGRATE_ON_HOST_MAINTENANCE, TERMINATE_ON_HOST_MAINTENANCE).
func (s *Server) SetMaintenanceEvent(value string) { s.Set(MaintenanceEventPath, value) }

// Set sets the value at path (a full path under /computeMetadata/v1/) and
// wakes the long-polls if it changed.
func (s *Server) Set(path, value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.values[path]; ok && old == value {
		return
	}
	s.values[path] = value
	close(s.changed)
	s.changed = make(chan struct{})
}

// RefuseReads makes the server refuse every request from now on (true), by
// closing its connection without an answer, waiting long polls included, or
// answer again (false); see emulatorkit.Refusal.
func (s *Server) RefuseReads(refuse bool) { s.refusal.Set(refuse) }

// Refused returns how many requests were refused (RefuseReads).
func (s *Server) Refused() int { return s.refusal.Refused() }

// Requests returns how many requests reached path.
func (s *Server) Requests(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[path]
}

// Waiting returns how many long-polls on path are waiting for a change.
func (s *Server) Waiting(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waiting[path]
}

// Close answers every waiting long-poll at once (so that an
// httptest.Server can close). Later long-polls answer at once too.
func (s *Server) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.closed:
	default:
		close(s.closed)
	}
}

// ETag returns the ETag of value: like the real server's, a hash of the
// content, so the same value always has the same ETag.
func ETag(value string) string {
	sum := sha256.Sum256([]byte(value))
	return hex.EncodeToString(sum[:8])
}

// ServeHTTP answers like the metadata server:
//
//   - every answer carries Metadata-Flavor: Google;
//   - a request without Metadata-Flavor: Google, or with X-Forwarded-For, is
//     403; a method other than GET is 405; an unknown path 404;
//   - a value is text with its ETag header;
//   - wait_for_change=true waits until the value's ETag differs from
//     last_etag (at once if it already does; without last_etag, until the next
//     change) or timeout_sec (a positive integer, else 400) passes, then
//     answers the current value.
//
// The control API (no Metadata-Flavor needed): POST
// /_emulator/computeMetadata/v1/<key> with the value as body sets a value;
// POST (DELETE) /_emulator/refuse-reads turns RefuseReads on (off).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if rest, ok := strings.CutPrefix(r.URL.Path, "/_emulator/"); ok {
		w.Header().Set("Metadata-Flavor", "Google")
		s.control(w, r, "/"+rest)
		return
	}
	s.mu.Lock()
	s.requests[r.URL.Path]++
	s.mu.Unlock()
	if s.refusal.Refuse(w) {
		return
	}
	w.Header().Set("Metadata-Flavor", "Google")
	if r.Header.Get("Metadata-Flavor") != "Google" || r.Header.Get("X-Forwarded-For") != "" {
		w.Header().Set("Content-Type", "text/html; charset=UTF-8")
		w.WriteHeader(http.StatusForbidden)
		_, _ = io.WriteString(w, "<!DOCTYPE html><title>Error 403 (Forbidden)</title><p>Your client does not have permission to get URL <code>"+
			escape(r.URL.Path)+"</code> from this server. Missing Metadata-Flavor:Google header.</p>\n")
		return
	}
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	q := r.URL.Query()
	wait := false
	switch v := q.Get("wait_for_change"); v {
	case "", "false":
	case "true":
		wait = true
	default:
		http.Error(w, "invalid wait_for_change: "+v, http.StatusBadRequest)
		return
	}
	timeout := s.waitTimeout
	if v := q.Get("timeout_sec"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			http.Error(w, "invalid timeout_sec: "+v, http.StatusBadRequest)
			return
		}
		timeout = time.Duration(n) * time.Second
	}
	value, ok := s.value(r.URL.Path)
	if !ok {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	if wait {
		var cut bool
		if value, cut = s.wait(r, q.Get("last_etag"), timeout); cut {
			s.refusal.Refuse(w)
			return
		}
	}
	w.Header().Set("Content-Type", "application/text")
	w.Header().Set("ETag", ETag(value))
	_, _ = io.WriteString(w, value)
}

func (s *Server) value(path string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.values[path]
	return v, ok
}

// wait blocks until the value at r's path has an ETag other than lastETag
// (any change when lastETag is empty), timeout passes, the client goes away
// or the server closes; it returns the value then. It returns cut true, and
// no value, when the server starts refusing reads meanwhile (RefuseReads).
func (s *Server) wait(r *http.Request, lastETag string, timeout time.Duration) (value string, cut bool) {
	path := r.URL.Path
	timer := s.clock.NewTimer(timeout)
	defer timer.Stop()
	refused := s.refusal.Cut()
	s.mu.Lock()
	first := s.values[path]
	s.waiting[path]++
	defer func() {
		s.mu.Lock()
		s.waiting[path]--
		s.mu.Unlock()
	}()
	for {
		v := s.values[path]
		if (lastETag != "" && ETag(v) != lastETag) || (lastETag == "" && v != first) {
			s.mu.Unlock()
			return v, false
		}
		changed := s.changed
		s.mu.Unlock()
		select {
		case <-changed:
			s.mu.Lock()
			continue
		case <-refused:
			return "", true
		case <-timer.C():
		case <-r.Context().Done():
		case <-s.closed:
		}
		v, _ = s.value(path)
		return v, false
	}
}

func (s *Server) control(w http.ResponseWriter, r *http.Request, path string) {
	if path == "/refuse-reads" && (r.Method == http.MethodPost || r.Method == http.MethodDelete) {
		s.RefuseReads(r.Method == http.MethodPost)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if !strings.HasPrefix(path, Prefix) {
		http.Error(w, "want /_emulator"+Prefix+"<key>", http.StatusNotFound)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.Set(path, strings.TrimSpace(string(body)))
	w.WriteHeader(http.StatusNoContent)
}

func escape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}
