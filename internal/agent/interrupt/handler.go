// Package interrupt acts on the interruption notices of the node the agent runs
// on. A notice's level (from its kind and the configuration) decides what
// happens: Taint puts spotter.dev/interruption=<kind>:PreferNoSchedule on the
// node; Cordon makes that taint NoSchedule and cordons the node; Drain also
// empties the node through the drain engine's deadline mode, ordinary pods
// first, critical ones last, deleting what a PodDisruptionBudget still keeps
// when time runs short. Termination notices always drain.
//
// The taint and cordon go on in one update as soon as the notice arrives,
// before any eviction. What the agent did is recorded on the node (Annotation),
// so that the end of an event (maintenance canceled or completed) undoes it,
// and only it, also after the agent restarted. A repeated notice changes
// nothing. The record names the node's boot: when the agent starts on a node
// that booted again since (its instance survived the notice), the record is
// over and its marks are lifted.
package interrupt

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"spotter.dev/spotter/internal/agent/notice"
	"spotter.dev/spotter/internal/backoff"
	"spotter.dev/spotter/internal/coop"
	"spotter.dev/spotter/internal/drain"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// Component is the agent's name on drain marks and Events.
const Component = "agent"

// Event reasons recorded on the node.
const (
	ReasonNotice       = "SpotterInterruptionNotice"
	ReasonEnded        = "SpotterInterruptionEnded"
	ReasonAcknowledged = "SpotterInterruptionAcknowledged"
	ReasonWouldAct     = "SpotterWouldHandleInterruption"
)

// Options configure a Handler.
type Options struct {
	// Node is the node the agent runs on.
	Node string
	// Component is who handles the notices: Component (the agent, the
	// default) or the controller's interruption queue. It names the drain's
	// marks and the notices' entries in the node's record: a notice already
	// recorded by another component is left to it, so that a node the agent
	// and the queue both hear of is drained once.
	Component string
	// DeadlineMargin is kept free before a notice's deadline.
	DeadlineMargin time.Duration
	// RebalanceAction and MaintenanceAction are the levels of advisory notices.
	RebalanceAction, MaintenanceAction v1alpha1.NoticeAction
	// Acknowledge approves an event (Azure) once the node is drained.
	Acknowledge bool
	// DrainLead is how long before a maintenance event's deadline its drain
	// starts; an event further ahead only taints and cordons until then.
	// Default 10m.
	DrainLead time.Duration
	// DryRun logs and records Events of what would be done, and changes nothing.
	DryRun bool
}

// Handler acts on notices for one node.
type Handler struct {
	client   kubernetes.Interface
	drainer  *drain.Drainer
	clock    clock.Clock
	recorder events.EventRecorder
	ack      notice.Acknowledger
	opts     Options

	mu   sync.Mutex
	seen map[string]notice.Notice // by key: the last notice handled
	job  *job                     // the drain running or scheduled, if any
	jobs sync.WaitGroup
}

// job is a drain for one notice.
type job struct {
	key         string
	termination bool
	deadline    time.Time // zero: none
	cancel      context.CancelFunc
	done        chan struct{}
}

// New returns a Handler. drainer must be built for Component, without
// cordoning (the Handler cordons itself). ack, when not nil, acknowledges
// events once the node is drained; recorder may be nil.
func New(client kubernetes.Interface, drainer *drain.Drainer, clk clock.Clock, recorder events.EventRecorder, ack notice.Acknowledger, opts Options) *Handler {
	if opts.DrainLead <= 0 {
		opts.DrainLead = 10 * time.Minute
	}
	if opts.Component == "" {
		opts.Component = Component
	}
	return &Handler{client: client, drainer: drainer, clock: clk, recorder: recorder, ack: ack, opts: opts, seen: map[string]notice.Notice{}}
}

// Run clears the record of an earlier boot (ClearEarlierBoot), then handles
// the notices from in until ctx ends, then waits for a termination drain in
// flight: it is bounded by its deadline, and leaving it would leave pods to be
// killed with the node.
func (h *Handler) Run(ctx context.Context, in <-chan notice.Notice) {
	if err := h.ClearEarlierBoot(ctx); err != nil {
		klog.FromContext(ctx).Error(err, "Clearing the record of an earlier boot", "node", h.opts.Node)
	}
	for {
		select {
		case <-ctx.Done():
			h.jobs.Wait()
			return
		case n := <-in:
			_ = h.Handle(ctx, n) // logged; the drain runs all the same
		}
	}
}

// Wait waits for the drains Handle started (a termination drain is bounded
// by its deadline).
func (h *Handler) Wait() { h.jobs.Wait() }

// Handle acts on one notice. It returns once the node is tainted (and cordoned
// if the level calls for it); a drain goes on in the background. A notice of
// a kind another component already handles on the node (the node's record
// says so) is left to it. The error says that the node's record could not be
// written (the drain runs all the same); the notice is then forgotten, so
// that the same notice sent again is handled again.
func (h *Handler) Handle(ctx context.Context, n notice.Notice) error {
	received := h.clock.Now()
	key := n.Cloud + "/" + n.ID
	h.mu.Lock()
	// Detail may change while the event does not (an Azure event going from
	// Scheduled to Started after our acknowledgement): that is no new notice.
	if prev, ok := h.seen[key]; ok && same(prev, n) {
		h.mu.Unlock()
		return nil
	}
	h.seen[key] = n
	h.mu.Unlock()

	level := h.level(n)
	logger := klog.FromContext(ctx).WithValues("node", h.opts.Node, "cloud", n.Cloud, "kind", n.Kind, "id", n.ID, "action", n.Action)
	ctx = klog.NewContext(ctx, logger)
	if n.Ended {
		h.end(ctx, key, n)
		return nil
	}
	noticesTotal.WithLabelValues(n.Cloud, string(n.Kind)).Inc()
	deadline := "none"
	if !n.Deadline.IsZero() {
		deadline = n.Deadline.UTC().Format(time.RFC3339)
	}
	logger.Info("Interruption notice", "deadline", deadline, "level", level, "detail", n.Detail)
	if h.opts.DryRun {
		h.event(corev1.EventTypeWarning, ReasonWouldAct, "dry run: %s notice from %s (%s, deadline %s): would %s", n.Kind, n.Cloud, n.Action, deadline, words(level))
		return nil
	}
	if level == v1alpha1.ActionNone {
		h.event(corev1.EventTypeNormal, ReasonNotice, "%s notice from %s (%s, deadline %s): no action configured", n.Kind, n.Cloud, n.Action, deadline)
		return nil
	}
	other := ""
	err := h.update(ctx, func(s *State) {
		other = handledByOther(*s, key, n.Kind, h.opts.Component)
		if other == "" {
			s.Notices[key] = Entry{Kind: n.Kind, Action: n.Action, Level: level, By: h.opts.Component}
		}
	})
	switch {
	case err != nil:
		logger.Error(err, "Marking the node")
		h.mu.Lock()
		delete(h.seen, key)
		h.mu.Unlock()
	case other != "":
		logger.Info("Notice already handled by another component", "by", other)
		h.event(corev1.EventTypeNormal, ReasonNotice, "%s notice from %s (%s, deadline %s): handled by the %s, which saw it first", n.Kind, n.Cloud, n.Action, deadline, other)
		return nil
	case rank[level] >= rank[v1alpha1.ActionCordon]:
		cordonSeconds.Observe(h.clock.Since(received).Seconds())
	}
	h.event(corev1.EventTypeWarning, ReasonNotice, "%s notice from %s (%s, deadline %s): action: %s", n.Kind, n.Cloud, n.Action, deadline, words(level))
	if level == v1alpha1.ActionDrain {
		h.startDrain(ctx, key, n)
	}
	if err != nil {
		return fmt.Errorf("recording the notice on node %s: %w", h.opts.Node, err)
	}
	return nil
}

// handledByOther returns the component other than self that handles, in
// record s, the notice key or another notice of the same kind (the agent's
// scheduled event and the queue's AWS Health event for one maintenance, the
// agent's spot notice and the queue's "stopping"), or "" when none does.
func handledByOther(s State, key string, kind notice.Kind, self string) string {
	if e, ok := s.Notices[key]; ok {
		if e.handler() != self {
			return e.handler()
		}
		return ""
	}
	for _, k := range slices.Sorted(maps.Keys(s.Notices)) {
		if e := s.Notices[k]; e.Kind == kind && e.handler() != self {
			return e.handler()
		}
	}
	return ""
}

// level is what a notice calls for under the handler's options.
func (h *Handler) level(n notice.Notice) v1alpha1.NoticeAction {
	return Level(n, h.opts.RebalanceAction, h.opts.MaintenanceAction)
}

// Level is what notice n calls for: a termination always drains; a rebalance
// recommendation takes rebalance, a maintenance event maintenance, except a GCP
// live migration, which gets at most a taint. The simulator calls it too.
func Level(n notice.Notice, rebalance, maintenance v1alpha1.NoticeAction) v1alpha1.NoticeAction {
	switch n.Kind {
	case notice.Termination:
		return v1alpha1.ActionDrain
	case notice.Rebalance:
		return rebalance
	case notice.Maintenance:
		// GCP migrates the instance live: pods keep running; at most a taint.
		if n.Action == "MIGRATE_ON_HOST_MAINTENANCE" && rank[maintenance] > rank[v1alpha1.ActionTaint] {
			return v1alpha1.ActionTaint
		}
		return maintenance
	}
	return v1alpha1.ActionNone
}

// DrainDeadline is when the node must be empty for notice n, seen at now: the
// notice's deadline less margin, and never less than a second from now, so
// that a notice that comes late still gives its pods a moment. Zero when the
// notice has no deadline (a rebalance recommendation). The simulator calls it
// too.
func DrainDeadline(n notice.Notice, margin time.Duration, now time.Time) time.Time {
	if n.Deadline.IsZero() {
		return time.Time{}
	}
	return maxTime(n.Deadline.Add(-margin), now.Add(time.Second))
}

// end undoes what a notice did, once its event is over: its drain stops (a
// termination's never does), and the taint and cordon go unless another notice
// still calls for them.
func (h *Handler) end(ctx context.Context, key string, n notice.Notice) {
	logger := klog.FromContext(ctx)
	h.mu.Lock()
	j := h.job
	h.mu.Unlock()
	if j != nil && j.key == key {
		// The event is over (a withdrawn termination too): its drain stops.
		j.cancel()
		<-j.done
	}
	if h.opts.DryRun {
		h.event(corev1.EventTypeNormal, ReasonWouldAct, "dry run: %s event %s ended: would lift its taint and cordon", n.Kind, n.ID)
		return
	}
	var drainStill bool
	removed := false
	err := h.update(ctx, func(s *State) {
		removed = false
		if e, ok := s.Notices[key]; ok && e.handler() == h.opts.Component {
			delete(s.Notices, key)
			removed = true
		}
		_, level := s.strongest()
		drainStill = level == v1alpha1.ActionDrain
	})
	if err != nil {
		logger.Error(err, "Lifting the marks of an ended notice")
		return
	}
	if !removed {
		return
	}
	if !drainStill {
		if err := h.drainer.Unmark(ctx, h.opts.Node, false); err != nil && !errors.Is(err, drain.ErrDrainedByOther) {
			logger.Error(err, "Removing the drain marks of an ended notice")
		}
	}
	logger.Info("Interruption event ended; marks lifted")
	h.event(corev1.EventTypeNormal, ReasonEnded, "%s event %s (%s) ended: its taint and cordon are lifted", n.Kind, n.ID, n.Action)
	if drainStill {
		// Another notice still calls for a drain: the soonest one drains now.
		if next, nextKey, ok := h.soonestDrain(key); ok {
			h.startDrain(ctx, nextKey, next)
		}
	}
}

// soonestDrain returns the notice in effect, other than except, that calls
// for a drain and has the earliest deadline (no deadline last).
func (h *Handler) soonestDrain(except string) (notice.Notice, string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var best notice.Notice
	bestKey, found := "", false
	for k, n := range h.seen {
		if k == except || n.Ended || h.level(n) != v1alpha1.ActionDrain {
			continue
		}
		if !found || earlier(n.Deadline, best.Deadline) || (n.Deadline.Equal(best.Deadline) && k < bestKey) {
			best, bestKey, found = n, k, true
		}
	}
	return best, bestKey, found
}

// earlier orders deadlines, a zero deadline (none) last.
func earlier(a, b time.Time) bool {
	switch {
	case a.IsZero():
		return false
	case b.IsZero():
		return true
	}
	return a.Before(b)
}

// startDrain drains the node for n in the background. One drain runs at a
// time: a termination stops an advisory drain and takes its place; while a
// termination drains, other notices add nothing.
func (h *Handler) startDrain(ctx context.Context, key string, n notice.Notice) {
	termination := n.Kind == notice.Termination
	deadline := DrainDeadline(n, h.opts.DeadlineMargin, h.clock.Now())
	h.mu.Lock()
	prev := h.job
	// One drain at a time. A termination wins over an advisory drain; an
	// advisory drain gives way to a sooner one, or to a new deadline of its own
	// event; a running termination drain covers everything.
	if prev != nil && (prev.termination || (!termination && prev.key != key && !earlier(deadline, prev.deadline))) {
		h.mu.Unlock()
		return
	}
	var jctx context.Context
	var cancel context.CancelFunc
	if termination {
		// Not tied to the agent's own life: the node goes at the deadline,
		// whatever happens to the agent; the deadline bounds the drain.
		jctx, cancel = context.WithCancel(context.WithoutCancel(ctx))
	} else {
		jctx, cancel = context.WithCancel(ctx)
	}
	j := &job{key: key, termination: termination, deadline: deadline, cancel: cancel, done: make(chan struct{})}
	h.job = j
	h.jobs.Add(1)
	h.mu.Unlock()
	if prev != nil {
		prev.cancel()
		_ = coop.WaitClosed(context.WithoutCancel(ctx), h.clock, prev.done)
	}
	coop.Go(h.clock, func() {
		defer h.jobs.Done()
		defer close(j.done)
		defer cancel()
		h.drain(jctx, n)
		h.mu.Lock()
		if h.job == j {
			h.job = nil
		}
		h.mu.Unlock()
	})
}

// drain empties the node before n's deadline less the margin, and acknowledges
// the event when it is done.
func (h *Handler) drain(ctx context.Context, n notice.Notice) {
	logger := klog.FromContext(ctx)
	deadline := DrainDeadline(n, h.opts.DeadlineMargin, h.clock.Now())
	if wait := deadline.Sub(h.clock.Now()) - h.opts.DrainLead; !deadline.IsZero() && n.Kind != notice.Termination && wait > 0 {
		logger.Info("Drain scheduled before the maintenance event", "at", h.clock.Now().Add(wait))
		if coop.Sleep(ctx, h.clock, wait) != nil {
			return
		}
		deadline = DrainDeadline(n, h.opts.DeadlineMargin, h.clock.Now())
	}
	start := h.clock.Now()
	res, err := h.drainer.Drain(ctx, drain.Request{
		Node:      h.opts.Node,
		Reason:    fmt.Sprintf("%s notice from %s (%s)", n.Kind, n.Cloud, n.Action),
		Deadline:  deadline,
		KeepMarks: true,
	})
	elapsed := h.clock.Since(start)
	drainSeconds.WithLabelValues(string(n.Kind)).Observe(elapsed.Seconds())
	podsEvicted.Add(float64(len(res.Evicted)))
	podsDeleted.Add(float64(len(res.Deleted)))
	if ctx.Err() != nil && n.Kind != notice.Termination {
		logger.Info("Drain stopped: the event ended")
		return
	}
	if err != nil || (!deadline.IsZero() && h.clock.Now().After(deadline)) {
		deadlineMisses.Inc()
		logger.Error(err, "Drain did not finish before the deadline", "deadline", deadline, "evicted", len(res.Evicted), "deleted", len(res.Deleted), "blocked", res.Blocked)
		return
	}
	logger.Info("Node drained", "evicted", len(res.Evicted), "deleted", len(res.Deleted), "duration", elapsed)
	if h.ack != nil && h.opts.Acknowledge {
		if err := h.ack.Acknowledge(ctx, n); err != nil {
			logger.Error(err, "Acknowledging the event")
			return
		}
		logger.Info("Event acknowledged")
		h.event(corev1.EventTypeNormal, ReasonAcknowledged, "node drained; %s event %s acknowledged so that the platform can go ahead", n.Cloud, n.ID)
	}
}

// ClearEarlierBoot clears the agent's record on its node when it was made in
// an earlier boot than the node's current one (node.status.nodeInfo.bootID):
// the instance survived its notices (an AWS spot stop or hibernate that
// resumed, a maintenance reboot), so they are over. Their marks are lifted as
// when an event ends: the taint goes, the cordon is lifted if the agent put
// it there, the drain marks go, and an Event says so. A notice still in
// effect after the reboot is sent again by the source and handled anew. A
// record that names no boot (from an agent that did not record it), or a
// node whose kubelet reports none, is left as it is. Run calls it first.
func (h *Handler) ClearEarlierBoot(ctx context.Context) error {
	node, err := h.client.CoreV1().Nodes().Get(ctx, h.opts.Node, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading node %s: %w", h.opts.Node, err)
	}
	s, err := stateOf(node)
	if err != nil {
		return nil // replaced by the next notice's update, see updateOnce
	}
	boot := node.Status.NodeInfo.BootID
	if !staleBoot(s, boot) {
		return nil
	}
	logger := klog.FromContext(ctx).WithValues("node", h.opts.Node, "recordedBootID", s.BootID, "bootID", boot)
	if h.opts.DryRun {
		h.event(corev1.EventTypeNormal, ReasonWouldAct, "dry run: %d notice(s) recorded in boot %s are over, the node booted again (%s): would lift their taint and cordon",
			len(s.Notices), s.BootID, boot)
		return nil
	}
	// updateOnce drops the notices of an earlier boot, whatever change says.
	if err := h.update(ctx, func(*State) {}); err != nil {
		return fmt.Errorf("lifting the marks of boot %s: %w", s.BootID, err)
	}
	if err := h.drainer.Unmark(ctx, h.opts.Node, false); err != nil && !errors.Is(err, drain.ErrDrainedByOther) {
		return fmt.Errorf("removing the drain marks of boot %s: %w", s.BootID, err)
	}
	logger.Info("The node booted again since its notices; their marks are lifted", "notices", len(s.Notices))
	h.event(corev1.EventTypeNormal, ReasonEnded, "%d notice(s) recorded in boot %s are over, the node booted again (%s): their taint and cordon are lifted",
		len(s.Notices), s.BootID, boot)
	return nil
}

// staleBoot reports whether record s was made in an earlier boot than boot.
func staleBoot(s State, boot string) bool {
	return len(s.Notices) > 0 && s.BootID != "" && boot != "" && s.BootID != boot
}

// updateAttempts bounds the tries of a node update; between two, the handler
// waits on its clock 100 ms, doubling (backoff.Backoff, capped at 5 s): 6.3 s
// of waits in all, well within the shortest notice (30 s).
const updateAttempts = 7

// update changes the agent's State on the node and applies it, retrying
// conflicts at once and other errors (timeouts, 5xx) with backoff: a notice is
// not sent twice, so a lost update would not come back.
func (h *Handler) update(ctx context.Context, change func(*State)) error {
	retries := backoff.Backoff{Initial: 100 * time.Millisecond, Max: 5 * time.Second}
	for {
		err := h.updateOnce(ctx, change)
		if err == nil || apierrors.IsNotFound(err) || ctx.Err() != nil || retries.Failures() >= updateAttempts-1 {
			return err
		}
		if coop.Sleep(ctx, h.clock, retries.Next()) != nil {
			return err
		}
	}
}

func (h *Handler) updateOnce(ctx context.Context, change func(*State)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := h.client.CoreV1().Nodes().Get(ctx, h.opts.Node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		s, err := stateOf(node)
		if err != nil {
			// An unreadable record is replaced: the notices resend what is in effect.
			klog.FromContext(ctx).Error(err, "Resetting the agent's record on the node")
		}
		boot := node.Status.NodeInfo.BootID
		if staleBoot(s, boot) {
			// Notices of an earlier boot are over (see ClearEarlierBoot); the
			// record of the cordon stays, so that it is lifted if ours.
			s.Notices = map[string]Entry{}
		}
		change(&s)
		s.BootID = boot
		out, changed, err := apply(node, s)
		if err != nil || !changed {
			return err
		}
		_, err = h.client.CoreV1().Nodes().Update(ctx, out, metav1.UpdateOptions{})
		return err
	})
}

func (h *Handler) event(typ, reason, note string, args ...any) {
	if h.recorder != nil {
		ref := &corev1.ObjectReference{Kind: "Node", Name: h.opts.Node, UID: types.UID(h.opts.Node)}
		h.recorder.Eventf(ref, nil, typ, reason, "Interruption", note, args...)
	}
}

// words says what a level does, for Events.
func words(level v1alpha1.NoticeAction) string {
	switch level {
	case v1alpha1.ActionTaint:
		return "taint PreferNoSchedule"
	case v1alpha1.ActionCordon:
		return "taint NoSchedule and cordon"
	case v1alpha1.ActionDrain:
		return "taint NoSchedule, cordon and drain"
	}
	return "do nothing"
}

// same reports whether two sightings of one event call for the same handling.
func same(a, b notice.Notice) bool {
	return a.Kind == b.Kind && a.Action == b.Action && a.Deadline.Equal(b.Deadline) && a.Ended == b.Ended
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
