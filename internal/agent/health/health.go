// Package health tells whether spotter-agent can read its interruption
// notices, so that an agent that cannot is seen before the first notice is
// missed: it counts the failed reads of the metadata service and dates the
// last good one (metrics), and it serves /readyz, which fails while some path
// of the metadata service has failed a number of reads in a row, and /healthz.
//
// A blind agent (on GKE with Workload Identity, instance/preempted is not
// served to pods; on AWS with a PUT response hop limit of 1 and no host
// network, IMDS does not answer a pod) keeps running and retrying: a restart
// would not make the metadata service answer. So /healthz, the liveness
// probe, says only that the process serves; /readyz, the readiness probe,
// says whether it sees its notices.
package health

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	"spotter.dev/spotter/internal/agent/notice"
)

// Monitor follows the reads of one source (a notice.ReadObserver) and says
// whether the agent is ready: when every notice path has been read well at
// least once, and no path, the others included, has failed Threshold reads
// in a row. A good read of a path makes it count as readable again at once.
// It is safe for concurrent use.
type Monitor struct {
	cloud     string
	threshold int
	clock     clock.PassiveClock
	metrics   *Metrics
	log       logr.Logger

	mu      sync.Mutex
	paths   map[string]*path
	ready   bool // as last logged
	failing bool // as last logged: some path reached the threshold
}

// path is what the Monitor knows of one path.
type path struct {
	notice   bool  // a notice path, not one of the others
	read     bool  // read well at least once
	failures int   // failed reads since the last good one
	last     error // the last failure
}

var _ notice.ReadObserver = (*Monitor)(nil)

// NewMonitor returns the Monitor of a source of cloud. threshold (at least
// 1) is how many failed reads in a row of one path make it not ready. It
// records into m (NewMetrics), and logs when readiness changes. Give it the
// source's paths (Expect) before the source reads.
func NewMonitor(cloud string, threshold int, clk clock.PassiveClock, m *Metrics, log logr.Logger) *Monitor {
	return &Monitor{cloud: cloud, threshold: max(threshold, 1), clock: clk, metrics: m, log: log, paths: map[string]*path{}}
}

// Expect makes the Monitor expect paths: it is not ready until each notice
// path has been read well, and the metrics of every path start at 0 (the
// gauge at 0: never read), so that a path never read well shows.
func (m *Monitor) Expect(paths notice.Paths) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range paths.Notices {
		m.path(p).notice = true
		m.metrics.lastSuccess.WithLabelValues(m.cloud, p)
	}
	for _, p := range paths.Others {
		m.path(p)
	}
}

// path returns the state of p, made on first use, and makes its error
// counter; m.mu is held.
func (m *Monitor) path(p string) *path {
	st := m.paths[p]
	if st == nil {
		st = &path{}
		m.paths[p] = st
		m.metrics.errors.WithLabelValues(m.cloud, p)
	}
	return st
}

// ObserveRead records a read of p: a good one (err nil) dates the path's
// last success (notice paths only: the others are read every few hours by
// design) and clears its failures; a failed one is counted.
func (m *Monitor) ObserveRead(p string, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.path(p) // a path not expected counts as one of the others
	if err != nil {
		st.failures++
		st.last = err
		m.metrics.errors.WithLabelValues(m.cloud, p).Inc()
	} else {
		st.read, st.failures, st.last = true, 0, nil
		if st.notice {
			m.metrics.lastSuccess.WithLabelValues(m.cloud, p).Set(float64(m.clock.Now().UnixNano()) / 1e9)
		}
	}
	m.logChange()
}

// logChange logs when the agent became ready, and when some path reached the
// threshold; m.mu is held.
func (m *Monitor) logChange() {
	why := m.unready()
	ready, failing := why == "", false
	for _, st := range m.paths {
		failing = failing || st.failures >= m.threshold
	}
	if ready && !m.ready {
		m.log.Info("Reading the metadata service: ready", "cloud", m.cloud)
	}
	if failing && !m.failing {
		m.log.Info("Not reading the metadata service: not ready until a read succeeds; interruption notices may be missed", "cloud", m.cloud, "reason", why)
	}
	m.ready, m.failing = ready, failing
}

// Ready returns nil when the agent reads its notices, else an error that
// names each path in the way and why.
func (m *Monitor) Ready() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if why := m.unready(); why != "" {
		return fmt.Errorf("not reading the %s metadata service: %s", m.cloud, why)
	}
	return nil
}

// unready says why the agent is not ready, path by path in order, or "";
// m.mu is held.
func (m *Monitor) unready() string {
	names := make([]string, 0, len(m.paths))
	for p := range m.paths {
		names = append(names, p)
	}
	slices.Sort(names)
	var why []string
	for _, p := range names {
		st := m.paths[p]
		switch {
		case st.failures >= m.threshold:
			why = append(why, fmt.Sprintf("%s: %d reads in a row failed (threshold %d), the last: %v", p, st.failures, m.threshold, st.last))
		case st.notice && !st.read && st.failures > 0:
			why = append(why, fmt.Sprintf("%s: not read yet, %d reads failed, the last: %v", p, st.failures, st.last))
		case st.notice && !st.read:
			why = append(why, p+": not read yet")
		}
	}
	return strings.Join(why, "; ")
}
