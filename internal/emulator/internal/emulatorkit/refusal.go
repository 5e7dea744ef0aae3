package emulatorkit

import (
	"net/http"
	"sync"
)

// Refusal is the knob of a metadata emulator (awsimds, gcpmetadata,
// azureimds) that makes it refuse every read, as a metadata service out of
// a pod's reach looks to the pod: no answer at all. The cases it stands for
// are the ones operators meet: on AWS with an IMDSv2 PUT response hop limit of
// 1, the token's answer never reaches a pod's network namespace; on GKE with
// Workload Identity, the pod's metadata server does not serve
// instance/preempted. It is safe for concurrent use; the zero value answers.
type Refusal struct {
	mu      sync.Mutex
	on      bool
	refused int
	cut     chan struct{} // closed when refusal turns on; nil until needed
}

// Set turns refusal on or off.
func (r *Refusal) Set(on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if on == r.on {
		return
	}
	if on {
		close(r.channel()) // made open while off
	} else {
		r.cut = nil // the next Cut makes a fresh one
	}
	r.on = on
}

// channel returns the channel Cut returns; r.mu is held.
func (r *Refusal) channel() chan struct{} {
	if r.cut == nil {
		r.cut = make(chan struct{})
		if r.on {
			close(r.cut)
		}
	}
	return r.cut
}

// Refuse refuses the request w answers, when refusal is on: its connection is
// closed without an answer. It reports whether it did.
func (r *Refusal) Refuse(w http.ResponseWriter) bool {
	r.mu.Lock()
	on := r.on
	if on {
		r.refused++
	}
	r.mu.Unlock()
	if !on {
		return false
	}
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close()
			return true
		}
	}
	// No connection to close (HTTP/2, a recorder): answer what an
	// unreachable service would make a proxy answer.
	http.Error(w, "metadata service unreachable", http.StatusBadGateway)
	return true
}

// Cut returns a channel that is closed once refusal is on (at once if it
// is): a request that waits (a long poll) selects on it, and then calls
// Refuse.
func (r *Refusal) Cut() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.channel()
}

// Refused returns how many requests were refused.
func (r *Refusal) Refused() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.refused
}
