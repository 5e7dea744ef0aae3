package preemptible

import (
	"cmp"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Where a run's start is read from.
const (
	// FromRegistration: the Node's creationTimestamp, when the kubelet of the
	// VM registered it. The VM started a little earlier (its boot and the
	// kubelet's start, usually a minute or two), so the run's end read from
	// it is as much late: drainBefore covers it.
	FromRegistration = "registered"
	// FromReady: the last transition of the Node's Ready condition to True,
	// for a Node object older than a run that became Ready again well after
	// it registered (FirstReadyWithin): the VM behind it was replaced while
	// the Node object stayed (GKE replaces the object with the VM; other
	// setups may keep it), and the replacement became Ready then. A node that
	// went NotReady and Ready again since (a lost heartbeat) is read as
	// younger than it is.
	FromReady = "last became Ready"
)

// FirstReadyWithin is how soon after its registration a node's first Ready
// comes: a later Ready transition is another one, not the first.
const FirstReadyWithin = 10 * time.Minute

// Run is the current run of a node's VM, as read from the Node.
type Run struct {
	Start, End time.Time
	// From says what Start was read from: FromRegistration or FromReady.
	From string
}

// RunOf reads the current run of node's VM at now: from its registration,
// or, when the Node object is older than a run can be, from the last time it
// became Ready, if that is more than FirstReadyWithin after the registration
// and within a run of now. Otherwise the run read from the registration has
// ended: the node is not a preemptible VM, or its VM was replaced in a way
// the Node does not show.
func RunOf(node *corev1.Node, maxRunTime time.Duration, now time.Time) Run {
	start := node.CreationTimestamp.Time
	if now.Sub(start) >= maxRunTime {
		if ready := readySince(node); ready.Sub(start) > FirstReadyWithin && now.Sub(ready) < maxRunTime {
			return Run{Start: ready, End: ready.Add(maxRunTime), From: FromReady}
		}
	}
	return Run{Start: start, End: start.Add(maxRunTime), From: FromRegistration}
}

// readySince is when node's Ready condition last became True; zero when it
// is not True or does not say.
func readySince(node *corev1.Node) time.Time {
	if c := readyCondition(node); c != nil && c.Status == corev1.ConditionTrue {
		return c.LastTransitionTime.Time
	}
	return time.Time{}
}

// ready reports whether node's Ready condition is True.
func ready(node *corev1.Node) bool {
	c := readyCondition(node)
	return c != nil && c.Status == corev1.ConditionTrue
}

func readyCondition(node *corev1.Node) *corev1.NodeCondition {
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == corev1.NodeReady {
			return &node.Status.Conditions[i]
		}
	}
	return nil
}

// State is where a preemptible node is in its run.
type State string

// States of a preemptible node.
const (
	// Running: its drain time has not come.
	Running State = "running"
	// Due: its drain time has come and its run has not ended: it is to be
	// drained now.
	Due State = "due"
	// Drained: drained in this run; it stays cordoned.
	Drained State = "drained"
	// Ended: its run ended before it was drained.
	Ended State = "ended"
	// Replaced: drained in an earlier boot; the VM behind the Node object was
	// replaced since, and its cordon and record are to be lifted.
	Replaced State = "replaced"
)

// States lists the states, for metrics.
var States = []State{Running, Due, Drained, Ended, Replaced}

// Timing is what the controller's schedule depends on.
type Timing struct {
	// MaxRunTime is how long a preemptible VM runs; DrainBefore how long
	// before its end its node is drained.
	MaxRunTime, DrainBefore time.Duration
}

// Assessment is a preemptible node's run and state at one moment.
type Assessment struct {
	Node  *corev1.Node
	Run   Run
	State State
	// DrainAt is when the node is due: DrainBefore before the end of its run.
	DrainAt time.Time
	// Record is the controller's record of a drain in this or an earlier
	// boot; nil for none.
	Record *Record
}

// Assess places node in its run at now. record is the controller's record of
// a drain on the node (nil for none): a record of the node's current boot
// makes it Drained, one of an earlier boot Replaced (a record or a node
// without a boot ID is taken as of the current boot).
func (t Timing) Assess(node *corev1.Node, record *Record, now time.Time) Assessment {
	run := RunOf(node, t.MaxRunTime, now)
	a := Assessment{Node: node, Run: run, DrainAt: run.End.Add(-t.DrainBefore), Record: record}
	boot := node.Status.NodeInfo.BootID
	switch {
	case record != nil && record.BootID != "" && boot != "" && record.BootID != boot:
		a.State = Replaced
	case record != nil:
		a.State = Drained
	case !now.Before(run.End):
		a.State = Ended
	case !now.Before(a.DrainAt):
		a.State = Due
	default:
		a.State = Running
	}
	return a
}

// Order sorts due nodes in the order they are drained: the run that ends
// first goes first (ties by name), and ownNode, the node Spotter runs on,
// last.
func Order(due []Assessment, ownNode string) {
	slices.SortStableFunc(due, func(a, b Assessment) int {
		if own := cmp.Compare(boolInt(a.Node.Name == ownNode), boolInt(b.Node.Name == ownNode)); own != 0 {
			return own
		}
		if c := a.Run.End.Compare(b.Run.End); c != 0 {
			return c
		}
		return cmp.Compare(a.Node.Name, b.Node.Name)
	})
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// NextDrainAt returns the earliest drain time after now among running
// nodes; zero when there is none.
func NextDrainAt(nodes []Assessment, now time.Time) time.Time {
	var next time.Time
	for _, a := range nodes {
		if a.State == Running && a.DrainAt.After(now) && (next.IsZero() || a.DrainAt.Before(next)) {
			next = a.DrainAt
		}
	}
	return next
}
