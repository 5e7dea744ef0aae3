package preemptible

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"spotter.dev/spotter/internal/backoff"
	tu "spotter.dev/spotter/internal/testutil"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// node is a node registered at created, Ready since ready (zero: not
// Ready) in boot boot.
func node(name string, created, ready time.Time, boot string) *corev1.Node {
	n := tu.Node(name)
	n.CreationTimestamp = metav1.NewTime(created)
	n.Status.NodeInfo.BootID = boot
	if !ready.IsZero() {
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(ready)}}
	} else {
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(created)}}
	}
	return n
}

func TestRunOf(t *testing.T) {
	const day = 24 * time.Hour
	for _, tc := range []struct {
		name          string
		created, from time.Time // from: when the node last became Ready
		now           time.Time
		wantStart     time.Time
		wantFrom      string
	}{
		{"a node younger than a run: from its registration", t0, t0.Add(time.Minute), t0.Add(20 * time.Hour), t0, FromRegistration},
		{"its Ready transition does not count while the object is younger than a run", t0, t0.Add(5 * time.Hour), t0.Add(20 * time.Hour), t0, FromRegistration},
		{"an object older than a run, Ready again since: from the Ready transition", t0, t0.Add(25 * time.Hour), t0.Add(30 * time.Hour), t0.Add(25 * time.Hour), FromReady},
		{"an object older than a run, Ready for longer than a run: its registration, long ended", t0, t0.Add(time.Hour), t0.Add(3 * day), t0, FromRegistration},
		{"an object older than a run, not Ready: its registration", t0, time.Time{}, t0.Add(2 * day), t0, FromRegistration},
		{"exactly one run old: the Ready transition", t0, t0.Add(day - time.Minute), t0.Add(day), t0.Add(day - time.Minute), FromReady},
		{"an object older than a run, Ready since its first minutes: its registration", t0, t0.Add(FirstReadyWithin), t0.Add(day + time.Minute), t0, FromRegistration},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := RunOf(node("n", tc.created, tc.from, ""), day, tc.now)
			if !got.Start.Equal(tc.wantStart) || !got.End.Equal(tc.wantStart.Add(day)) || got.From != tc.wantFrom {
				t.Errorf("RunOf = %+v, want start %s (%s), end a day later", got, tc.wantStart, tc.wantFrom)
			}
		})
	}
}

func TestAssess(t *testing.T) {
	timing := Timing{MaxRunTime: 24 * time.Hour, DrainBefore: time.Hour}
	created := t0
	drainAt := t0.Add(23 * time.Hour)
	for _, tc := range []struct {
		name   string
		now    time.Time
		boot   string
		record *Record
		want   State
	}{
		{"before its drain time", drainAt.Add(-time.Second), "b1", nil, Running},
		{"at its drain time", drainAt, "b1", nil, Due},
		{"within the margin", drainAt.Add(59 * time.Minute), "b1", nil, Due},
		{"at the end of its run", t0.Add(24 * time.Hour), "b1", nil, Ended},
		{"drained in this boot", drainAt.Add(time.Minute), "b1", &Record{BootID: "b1"}, Drained},
		{"drained, past its end, same boot", t0.Add(25 * time.Hour), "b1", &Record{BootID: "b1"}, Drained},
		{"drained in an earlier boot", drainAt.Add(time.Minute), "b2", &Record{BootID: "b1"}, Replaced},
		{"a record without a boot: this boot", drainAt.Add(time.Minute), "b2", &Record{}, Drained},
		{"a node without a boot: this boot", drainAt.Add(time.Minute), "", &Record{BootID: "b1"}, Drained},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := timing.Assess(node("n", created, created.Add(time.Minute), tc.boot), tc.record, tc.now)
			if a.State != tc.want {
				t.Errorf("state %s, want %s", a.State, tc.want)
			}
			if !a.DrainAt.Equal(drainAt) {
				t.Errorf("drain at %s, want %s", a.DrainAt, drainAt)
			}
		})
	}
}

// Due nodes go in the order their runs end, ties by name, and the node
// Spotter runs on last.
func TestOrder(t *testing.T) {
	timing := Timing{MaxRunTime: 24 * time.Hour, DrainBefore: 2 * time.Hour}
	now := t0.Add(23 * time.Hour)
	var due []Assessment
	for _, n := range []struct {
		name string
		age  time.Duration
	}{{"c", 23 * time.Hour}, {"own", 23*time.Hour + 30*time.Minute}, {"a", 22*time.Hour + 10*time.Minute}, {"b", 23 * time.Hour}, {"d", 22*time.Hour + 30*time.Minute}} {
		due = append(due, timing.Assess(node(n.name, now.Add(-n.age), now.Add(-n.age), ""), nil, now))
	}
	Order(due, "own")
	if got := strings.Join(names(due), ","); got != "b,c,d,a,own" {
		t.Errorf("order %s, want b,c,d,a,own (oldest run first, ties by name, own node last)", got)
	}
}

// The loop wakes at the next drain time of a running node, not for nodes
// already due, drained or ended.
func TestNextDrainAt(t *testing.T) {
	timing := Timing{MaxRunTime: 24 * time.Hour, DrainBefore: time.Hour}
	now := t0.Add(30 * time.Hour)
	all := []Assessment{
		timing.Assess(node("due", now.Add(-23*time.Hour-time.Minute), now, ""), nil, now),
		timing.Assess(node("young", now.Add(-time.Hour), now, ""), nil, now),
		timing.Assess(node("younger", now.Add(-10*time.Minute), now, ""), nil, now),
		timing.Assess(node("drained", now.Add(-23*time.Hour-time.Minute), now, ""), &Record{}, now),
	}
	if got, want := NextDrainAt(all, now), now.Add(22*time.Hour); !got.Equal(want) {
		t.Errorf("next drain at %s, want %s (the young node's)", got, want)
	}
	if got := NextDrainAt(all[:1], now); !got.IsZero() {
		t.Errorf("only a due node: next drain at %s, want none", got)
	}
}

// What the controller remembers of a node goes with the node.
func TestForgetGone(t *testing.T) {
	c := New(nil, nil, nil, nil, nil, nil, nil, Options{Timing: timing})
	for _, n := range []string{"kept", "gone"} {
		c.failed[n], c.blocked[n], c.ended[n], c.wouldDrain[n] = "x", "y", t0, t0
		c.failures[n] = backoff.Cooldown{Failures: 1}
	}
	c.forgetGone([]Assessment{timing.Assess(node("kept", t0, t0, ""), nil, t0)})
	for name, m := range map[string]int{"failed": len(c.failed), "blocked": len(c.blocked), "ended": len(c.ended), "wouldDrain": len(c.wouldDrain), "failures": len(c.failures)} {
		if m != 1 {
			t.Errorf("%s holds %d nodes, want only the one still there", name, m)
		}
	}
	if _, ok := c.blocked["kept"]; !ok {
		t.Error("forgot the node still there")
	}
}
