// Package drain empties a node through the Eviction API, safely: it marks the
// node before it evicts anything, honours PodDisruptionBudgets (a refusal is
// retried with jittered exponential backoff, never in a tight loop), waits until
// each evicted pod is gone (matched by UID: a recreated pod of the same name is
// another pod), and on failure or timeout rolls back what it added and reports
// which pods blocked and why.
//
// The rescheduler, the migrator and the node agent share it. The agent uses the
// deadline mode (Request.Deadline): pods in priority tiers, grace periods capped
// by the time left, delete as a last resort.
package drain

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"spotter.dev/spotter/internal/backoff"
	"spotter.dev/spotter/internal/coop"
)

// Options configure a Drainer.
type Options struct {
	// Component names the caller in marks and Events: rescheduler, migrator or
	// agent.
	Component string
	// Cordon marks the node unschedulable while it drains.
	Cordon bool
	// Timeout bounds a drain without a deadline. Default 10m.
	Timeout time.Duration
	// MaxGracePeriod caps each pod's termination grace period; 0 keeps them.
	MaxGracePeriod time.Duration
	// MaxConcurrentEvictions bounds evictions in flight on the node. Default 5.
	// Deadline mode ignores it: all pods of a tier go at once.
	MaxConcurrentEvictions int
	// Backoff is the first wait after a refused eviction; it doubles up to
	// MaxBackoff. Each wait is spread at random over its upper half
	// (backoff.Backoff with Jitter 0.5), so that drainers do not retry in
	// step, and never exceeds MaxBackoff. Defaults 1s and 30s.
	Backoff, MaxBackoff time.Duration
	// PollInterval is how often the drain checks that evicted pods are gone.
	// Default 1s.
	PollInterval time.Duration
	// DryRun logs and records what would be done and changes nothing.
	DryRun bool
	// OnEvictionRetry, when set, is called for each eviction a
	// PodDisruptionBudget refused (the controller counts them).
	OnEvictionRetry func()
	// OnEvictionHeld, when set, is called for each eviction
	// Request.BeforeEvict held (ErrNotNow; the controller counts them).
	OnEvictionHeld func()
}

// ErrNotNow holds an eviction when an error of Request.BeforeEvict wraps it
// (instead of stopping the drain): the drain asks again after a backoff.
var ErrNotNow = errors.New("eviction held")

// Request asks for one node to be drained.
type Request struct {
	Node   string
	Reason string
	// BeforeEvict, when set, is called before each attempt to evict a pod;
	// an error stops the drain, which is then rolled back, except an error
	// that wraps ErrNotNow: the drain then waits and asks again, as after a
	// PodDisruptionBudget's refusal, until its time runs out. The
	// rescheduler re-checks there that the pod still fits on spot, and holds
	// an eviction while a pod under the same budget is on a node under a
	// termination notice.
	BeforeEvict func(ctx context.Context, pod *corev1.Pod) error
	// Deadline, when set, switches to deadline mode: pods go in priority tiers
	// (ordinary, then system-cluster-critical and system-node-critical), each
	// pod's grace period is capped by the time left, and a pod whose eviction
	// is still refused when its tier's share of the time is spent is deleted.
	// A deadline-mode drain takes over a node another component is draining,
	// and is never rolled back: the node is going away.
	Deadline time.Time
	// KeepMarks leaves the taint, annotation and cordon on the node after a
	// successful drain (the migrator deletes the node next).
	KeepMarks bool
	// LeaveCordoned keeps the node cordoned after a successful drain even if the
	// drain cordoned it.
	LeaveCordoned bool
	// Waves, when set, drains in waves (see waves.go): the pods (namespace/name)
	// of wave 1 are evicted first; each later wave waits until the pods of the
	// waves before it are gone and every PodDisruptionBudget covering its pods
	// allows as many disruptions as the wave makes (the evicted pods'
	// replacements are Ready). Pods not listed go in the last wave. The plan
	// sets them (plan.PodPlan.Wave). Deadline mode ignores them: time wins.
	Waves map[string]int
	// Displaced are pods of other nodes (namespace/name to node) that the
	// drain evicts too, in their Waves, before the pods that need the room
	// they leave: a consolidation moves some pods of an on-demand node that
	// stays to spot, to make room there for pods of the drained node that
	// must stay on on-demand capacity (plan.NodePlan.Displaced). A pod no
	// longer on its node, or terminating, is left alone; their nodes are not
	// marked. Deadline mode ignores them.
	Displaced map[string]string
}

// Result reports a drain.
type Result struct {
	Node string
	// Evicted and Deleted list the pods removed, as namespace/name.
	Evicted, Deleted []string
	// Blocked lists the pods that kept the drain from finishing, and why.
	Blocked []Blocked
	// RolledBack is true when the drain failed and its marks were removed.
	RolledBack bool
	Duration   time.Duration
}

// Blocked is a pod that could not be removed.
type Blocked struct {
	Pod    string
	Reason string
}

// Drainer drains nodes.
type Drainer struct {
	client   kubernetes.Interface
	clock    clock.Clock
	recorder events.EventRecorder
	opts     Options
}

// New returns a Drainer. recorder may be nil.
func New(client kubernetes.Interface, clk clock.Clock, recorder events.EventRecorder, opts Options) *Drainer {
	if opts.Timeout == 0 {
		opts.Timeout = 10 * time.Minute
	}
	if opts.MaxConcurrentEvictions <= 0 {
		opts.MaxConcurrentEvictions = 5
	}
	if opts.Backoff == 0 {
		opts.Backoff = time.Second
	}
	if opts.MaxBackoff < opts.Backoff {
		opts.MaxBackoff = max(30*time.Second, opts.Backoff)
	}
	if opts.PollInterval == 0 {
		opts.PollInterval = time.Second
	}
	if opts.Component == "" {
		opts.Component = "spotter"
	}
	return &Drainer{client: client, clock: clk, recorder: recorder, opts: opts}
}

// Event reasons recorded on nodes and pods.
const (
	ReasonDrainStarted    = "SpotterDrainStarted"
	ReasonDrainWave       = "SpotterDrainWave"
	ReasonDrainSucceeded  = "SpotterDrainSucceeded"
	ReasonDrainFailed     = "SpotterDrainFailed"
	ReasonDrainRolledBack = "SpotterDrainRolledBack"
	ReasonEvicted         = "SpotterEvicted"
	ReasonDeleted         = "SpotterDeleted"
	ReasonWouldDrain      = "SpotterWouldDrain"
)

// Drain empties req.Node. It returns a Result in every case; the error says
// why a drain failed (it was then rolled back).
func (d *Drainer) Drain(ctx context.Context, req Request) (*Result, error) {
	start := d.clock.Now()
	logger := klog.FromContext(ctx).WithValues("node", req.Node, "component", d.opts.Component)
	res := &Result{Node: req.Node}
	defer func() { res.Duration = d.clock.Since(start) }()

	deadline := start.Add(d.opts.Timeout)
	if !req.Deadline.IsZero() {
		deadline = req.Deadline
	}
	// On the injected clock, as every wait of the drain.
	ctx, cancel := WithClockDeadline(ctx, d.clock, deadline)
	defer cancel()

	pods, err := d.podsOnNode(ctx, req.Node)
	if err != nil {
		return res, err
	}
	evict, wait := sortOut(pods)
	var others []*corev1.Pod
	if req.Deadline.IsZero() {
		if others, err = d.displaced(ctx, req.Displaced); err != nil {
			return res, err
		}
		evict = append(others, evict...)
	}
	node := &corev1.ObjectReference{Kind: "Node", Name: req.Node, UID: types.UID(req.Node)}
	if d.opts.DryRun {
		logger.Info("Dry run: would drain node", "reason", req.Reason, "pods", len(evict))
		d.event(node, corev1.EventTypeNormal, ReasonWouldDrain, "Drain", "dry run: would drain (%s): would evict %d pods", req.Reason, len(evict))
		return res, nil
	}

	if _, err := d.mark(ctx, req.Node, req.Reason, !req.Deadline.IsZero()); err != nil {
		return res, fmt.Errorf("marking node %s: %w", req.Node, err)
	}
	var waves [][]*corev1.Pod
	if req.Deadline.IsZero() {
		waves = inWaves(evict, req.Waves)
	}
	logger.Info("Draining node", "reason", req.Reason, "pods", len(evict), "waves", max(len(waves), 1))
	howMany := fmt.Sprintf("%d pods", len(evict))
	if len(others) > 0 {
		howMany += fmt.Sprintf(" (%d of other nodes, to make room there)", len(others))
	}
	if len(waves) > 1 {
		howMany += fmt.Sprintf(" in %d waves", len(waves))
	}
	d.event(node, corev1.EventTypeNormal, ReasonDrainStarted, "Drain", "draining (%s): evicting %s", req.Reason, howMany)

	var gone []*corev1.Pod
	switch {
	case !req.Deadline.IsZero():
		gone, err = d.evictByDeadline(ctx, req, evict, res)
	case len(waves) > 1:
		gone, err = d.evictWaves(ctx, req, node, waves, res)
	default:
		gone, err = d.evictAll(ctx, req, evict, res)
	}
	if err == nil {
		err = d.waitGone(ctx, append(gone, wait...), res)
	}
	if err != nil {
		if cause := context.Cause(ctx); errors.Is(cause, ErrShutdown) && !errors.Is(err, ErrShutdown) {
			err = fmt.Errorf("%w: %w", cause, err)
		}
		return res, d.fail(ctx, req, node, res, err)
	}

	if !req.KeepMarks {
		// A fresh context: the drain's own may be near its deadline.
		uctx, ucancel := WithClockTimeout(context.WithoutCancel(ctx), d.clock, unmarkTimeout)
		defer ucancel()
		if err := d.Unmark(uctx, req.Node, !req.LeaveCordoned); err != nil {
			return res, fmt.Errorf("drained node %s, but removing its marks: %w", req.Node, err)
		}
	}
	logger.Info("Drained node", "evicted", len(res.Evicted), "deleted", len(res.Deleted), "duration", d.clock.Since(start))
	d.event(node, corev1.EventTypeNormal, ReasonDrainSucceeded, "Drain", "drained: %d pods evicted, %d deleted", len(res.Evicted), len(res.Deleted))
	return res, nil
}

// Error is a failed drain: what went wrong, and the pods that blocked it.
type Error struct {
	Node    string
	Blocked []Blocked
	Cause   error
}

func (e *Error) Error() string {
	what := "failed: " + e.Cause.Error()
	if errors.Is(e.Cause, context.DeadlineExceeded) {
		what = "timed out"
	}
	if len(e.Blocked) == 0 {
		return fmt.Sprintf("draining node %s %s", e.Node, what)
	}
	blocked := make([]string, len(e.Blocked))
	for i, b := range e.Blocked {
		blocked[i] = b.Pod + " (" + b.Reason + ")"
	}
	return fmt.Sprintf("draining node %s %s; blocked by %s", e.Node, what, strings.Join(blocked, ", "))
}

func (e *Error) Unwrap() error { return e.Cause }

// fail rolls a failed drain back and reports the pods that blocked it. A
// deadline-mode drain keeps its marks: its node is going away, and new pods
// must not land there.
func (d *Drainer) fail(ctx context.Context, req Request, node *corev1.ObjectReference, res *Result, cause error) error {
	err := &Error{Node: req.Node, Blocked: res.Blocked, Cause: cause}
	d.event(node, corev1.EventTypeWarning, ReasonDrainFailed, "Drain", "%v", err)
	if !req.Deadline.IsZero() {
		return err
	}
	rctx, cancel := WithClockTimeout(context.WithoutCancel(ctx), d.clock, unmarkTimeout)
	defer cancel()
	if uerr := d.Unmark(rctx, req.Node, true); uerr != nil {
		return fmt.Errorf("%w; rolling back also failed: %w", err, uerr)
	}
	res.RolledBack = true
	d.event(node, corev1.EventTypeNormal, ReasonDrainRolledBack, "Rollback", "drain rolled back: taint, annotation and cordon removed")
	return err
}

// podsOnNode lists the pods bound to the node.
func (d *Drainer) podsOnNode(ctx context.Context, node string) ([]corev1.Pod, error) {
	list, err := d.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String()})
	if err != nil {
		return nil, fmt.Errorf("listing pods on node %s: %w", node, err)
	}
	return list.Items, nil
}

// displaced gets the pods of other nodes a drain evicts (Request.Displaced),
// in namespace/name order, leaving out those gone, moved, finished or
// terminating.
func (d *Drainer) displaced(ctx context.Context, pods map[string]string) ([]*corev1.Pod, error) {
	keys := make([]string, 0, len(pods))
	for k := range pods {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []*corev1.Pod
	for _, k := range keys {
		ns, name, ok := strings.Cut(k, "/")
		if !ok {
			return nil, fmt.Errorf("displaced pod %q: want namespace/name", k)
		}
		p, err := d.client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return nil, fmt.Errorf("getting displaced pod %s: %w", k, err)
		}
		if p.Spec.NodeName != pods[k] || p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		out = append(out, p)
	}
	return out, nil
}

// sortOut splits a node's pods into those to evict and those already
// terminating (waited for); DaemonSet, static and finished pods stay.
func sortOut(pods []corev1.Pod) (evict, wait []*corev1.Pod) {
	for i := range pods {
		p := &pods[i]
		switch {
		case NodeBound(p):
		case p.DeletionTimestamp != nil:
			wait = append(wait, p)
		default:
			evict = append(evict, p)
		}
	}
	sort.Slice(evict, func(i, j int) bool { return key(evict[i]) < key(evict[j]) })
	return evict, wait
}

// NodeBound reports whether a drain leaves p where it is: a finished pod, a
// static pod (its mirror) or a DaemonSet's.
func NodeBound(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed ||
		p.Annotations[corev1.MirrorPodAnnotationKey] != "" || isDaemonSetPod(p)
}

// PodsToMove counts the pods on node that a drain moves (all but the
// NodeBound ones), those already terminating included: zero means the node
// is empty as far as a drain goes. One List with a spec.nodeName field
// selector.
func PodsToMove(ctx context.Context, client kubernetes.Interface, node string) (int, error) {
	pods, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String()})
	if err != nil {
		return 0, fmt.Errorf("listing the pods of node %s: %w", node, err)
	}
	n := 0
	for i := range pods.Items {
		if !NodeBound(&pods.Items[i]) {
			n++
		}
	}
	return n, nil
}

func isDaemonSetPod(p *corev1.Pod) bool {
	owner := metav1.GetControllerOf(p)
	return owner != nil && owner.Kind == "DaemonSet"
}

// evictAll evicts pods with bounded concurrency, each retried on PDB refusals
// until the drain's deadline. It returns the pods evicted.
func (d *Drainer) evictAll(ctx context.Context, req Request, pods []*corev1.Pod, res *Result) ([]*corev1.Pod, error) {
	return d.evictConcurrently(ctx, req, pods, d.opts.MaxConcurrentEvictions, res, func(ctx context.Context, p *corev1.Pod) (bool, error) {
		return false, d.evictWithRetry(ctx, req, p, d.grace(p, time.Time{}), d.opts.Backoff, d.opts.MaxBackoff)
	})
}

// evictConcurrently runs remove on every pod, at most limit at a time, and
// records the outcome. remove reports whether it deleted (rather than evicted)
// the pod.
func (d *Drainer) evictConcurrently(ctx context.Context, req Request, pods []*corev1.Pod, limit int, res *Result, remove func(context.Context, *corev1.Pod) (bool, error)) ([]*corev1.Pod, error) {
	var (
		mu       sync.Mutex
		gone     []*corev1.Pod
		firstErr error
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g := coop.NewGroup(d.clock, limit)
	for _, p := range pods {
		if ctx.Err() != nil || g.Go(ctx, func() {
			deleted, err := remove(ctx, p)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				res.Blocked = append(res.Blocked, Blocked{Pod: key(p), Reason: err.Error()})
				if firstErr == nil {
					firstErr = err
					cancel()
				}
				return
			}
			gone = append(gone, p)
			if deleted {
				res.Deleted = append(res.Deleted, key(p))
			} else {
				res.Evicted = append(res.Evicted, key(p))
			}
		}) != nil {
			mu.Lock()
			res.Blocked = append(res.Blocked, Blocked{Pod: key(p), Reason: "not attempted: the drain stopped"})
			// A drain that ended before it tried every pod failed, also when
			// no eviction did.
			if firstErr == nil {
				firstErr = fmt.Errorf("the drain stopped before evicting %s: %w", key(p), context.Cause(ctx))
			}
			mu.Unlock()
		}
	}
	g.Wait()
	sort.Strings(res.Evicted)
	sort.Strings(res.Deleted)
	return gone, firstErr
}

// evictWithRetry evicts one pod, retrying refusals (HTTP 429, as a
// PodDisruptionBudget answers), server errors and holds (req.BeforeEvict's
// ErrNotNow) with jittered exponential backoff, on the injected clock, until
// ctx ends. req.BeforeEvict is asked before each attempt.
func (d *Drainer) evictWithRetry(ctx context.Context, req Request, p *corev1.Pod, grace *int64, initial, maxBackoff time.Duration) error {
	retry := backoff.Backoff{Initial: initial, Max: maxBackoff, Jitter: 0.5, Seed: seedOf(p.UID)}
	var refused error // the last refusal, reported if time runs out mid-request
	for {
		if req.BeforeEvict != nil {
			err := req.BeforeEvict(ctx, p)
			switch {
			case err != nil && ctx.Err() != nil && refused != nil:
				// Time ran out during the check: what kept the pod is the refusal.
				return fmt.Errorf("eviction still refused when time ran out: %w: %w", refused, context.Cause(ctx))
			case errors.Is(err, ErrNotNow):
				klog.FromContext(ctx).V(1).Info("Eviction held, asking again later", "pod", klog.KObj(p), "reason", err.Error())
				if d.opts.OnEvictionHeld != nil {
					d.opts.OnEvictionHeld()
				}
				if coop.Sleep(ctx, d.clock, retry.Next()) != nil {
					return fmt.Errorf("still held when time ran out: %w: %w", err, context.Cause(ctx))
				}
				continue
			case err != nil:
				return fmt.Errorf("not evicted: %w", err)
			}
		}
		err := d.client.CoreV1().Pods(p.Namespace).EvictV1(ctx, &policyv1.Eviction{
			ObjectMeta:    metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, Labels: map[string]string{EvictedByLabel: d.opts.Component}},
			DeleteOptions: &metav1.DeleteOptions{GracePeriodSeconds: grace, Preconditions: &metav1.Preconditions{UID: &p.UID}},
		})
		switch {
		case err == nil:
			if p.Spec.NodeName == req.Node {
				d.event(podRef(p), corev1.EventTypeNormal, ReasonEvicted, "Evict", "evicted by spotter %s to drain node %s", d.opts.Component, p.Spec.NodeName)
			} else {
				d.event(podRef(p), corev1.EventTypeNormal, ReasonEvicted, "Evict", "evicted by spotter %s to make room on node %s for the pods of node %s", d.opts.Component, p.Spec.NodeName, req.Node)
			}
			return nil
		case apierrors.IsNotFound(err), apierrors.IsConflict(err):
			// Gone already, or replaced by another pod of the same name.
			return nil
		case apierrors.IsTooManyRequests(err), apierrors.IsInternalError(err), apierrors.IsServerTimeout(err), apierrors.IsServiceUnavailable(err):
			klog.FromContext(ctx).V(1).Info("Eviction refused, retrying", "pod", klog.KObj(p), "failures", retry.Failures()+1, "err", err.Error())
			if d.opts.OnEvictionRetry != nil && apierrors.IsTooManyRequests(err) {
				d.opts.OnEvictionRetry()
			}
			refused = err
		case ctx.Err() != nil && refused != nil:
			// Time ran out during a retry: what kept the pod is the refusal.
			return fmt.Errorf("eviction still refused when time ran out: %w: %w", refused, context.Cause(ctx))
		default:
			return fmt.Errorf("evicting: %w", err)
		}
		if coop.Sleep(ctx, d.clock, retry.Next()) != nil {
			return fmt.Errorf("eviction still refused when time ran out: %w: %w", err, context.Cause(ctx))
		}
	}
}

// seedOf seeds a pod's retry jitter from its UID (never 0, which would mean
// the process's random source).
func seedOf(uid types.UID) uint64 {
	h := fnv.New64a()
	h.Write([]byte(uid))
	return h.Sum64() | 1
}

// grace returns the grace period to request for p: its own, capped by
// MaxGracePeriod and, in deadline mode, by the time left. nil keeps the pod's.
func (d *Drainer) grace(p *corev1.Pod, deadline time.Time) *int64 {
	own := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if p.Spec.TerminationGracePeriodSeconds != nil {
		own = *p.Spec.TerminationGracePeriodSeconds
	}
	limit := own
	if d.opts.MaxGracePeriod > 0 {
		limit = min(limit, int64(d.opts.MaxGracePeriod/time.Second))
	}
	if !deadline.IsZero() {
		// Never 0: a grace period of 0 is a forced delete, which removes the
		// Pod object while its containers may still run.
		limit = min(limit, max(int64(deadline.Sub(d.clock.Now())/time.Second), 1))
	}
	if limit == own {
		return nil
	}
	return &limit
}

// waitGone waits until every pod is gone: deleted, or replaced by a pod with
// another UID. All must go, so a round of reads stops at the first pod still
// there and the next round starts with it: one read a PollInterval while a
// pod terminates, not one per pod, and the same round ends the wait. When
// time runs out, the pods left are read once more (briefly, past ctx) so
// that the result names only those still there.
func (d *Drainer) waitGone(ctx context.Context, pods []*corev1.Pod, res *Result) error {
	pending := slices.Clone(pods)
	for {
		if pending = d.stillThere(ctx, pending, true); len(pending) == 0 {
			return nil
		}
		if coop.Sleep(ctx, d.clock, d.opts.PollInterval) != nil {
			last, cancel := context.WithTimeout(context.WithoutCancel(ctx), lastReadTimeout)
			pending = d.stillThere(last, pending, false)
			cancel()
			if len(pending) == 0 {
				return nil
			}
			keys := make([]string, 0, len(pending))
			for _, p := range pending {
				keys = append(keys, key(p))
			}
			sort.Strings(keys)
			for _, k := range keys {
				res.Blocked = append(res.Blocked, Blocked{Pod: k, Reason: "still terminating when time ran out"})
			}
			return fmt.Errorf("waiting for %d pods to terminate: %w", len(pending), context.Cause(ctx))
		}
	}
}

// lastReadTimeout bounds the reads of waitGone after its time ran out.
const lastReadTimeout = 5 * time.Second

// stillThere reads pods in order and returns those not gone (a pod that
// cannot be read counts as there); with first, it stops at the first pod
// still there and returns it with every pod after it, unread.
func (d *Drainer) stillThere(ctx context.Context, pods []*corev1.Pod, first bool) []*corev1.Pod {
	var left []*corev1.Pod
	for i, p := range pods {
		cur, err := d.client.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || err == nil && cur.UID != p.UID {
			continue
		}
		if err != nil && ctx.Err() == nil {
			klog.FromContext(ctx).V(1).Info("Checking an evicted pod", "pod", klog.KObj(p), "err", err.Error())
		}
		if first {
			return append(left, pods[i:]...)
		}
		left = append(left, p)
	}
	return left
}

func (d *Drainer) event(obj *corev1.ObjectReference, typ, reason, action, note string, args ...any) {
	if d.recorder != nil {
		d.recorder.Eventf(obj, nil, typ, reason, action, note, args...)
	}
}

func podRef(p *corev1.Pod) *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID, APIVersion: "v1"}
}

func key(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }
