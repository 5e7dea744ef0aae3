package interrupt

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"spotter.dev/spotter/internal/agent/notice"
	"spotter.dev/spotter/internal/drain"
	"spotter.dev/spotter/internal/testenv"
	tu "spotter.dev/spotter/internal/testutil"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// newTestHandler is an agent's handler for node on a real apiserver, as
// app.runWatch builds it (no recorder, no acknowledger).
func newTestHandler(client kubernetes.Interface, node string) *Handler {
	clk := clock.RealClock{}
	drainer := drain.New(client, clk, nil, drain.Options{Component: Component, PollInterval: 50 * time.Millisecond})
	return New(client, drainer, clk, nil, nil, Options{Node: node, DeadlineMargin: 5 * time.Second,
		RebalanceAction: v1alpha1.ActionTaint, MaintenanceAction: v1alpha1.ActionDrain})
}

// createNode creates a node whose kubelet reports bootID.
func createNode(ctx context.Context, t *testing.T, client kubernetes.Interface, node *corev1.Node, bootID string) {
	t.Helper()
	created, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	setBootID(ctx, t, client, created.Name, bootID)
}

// setBootID reports a boot of node, as its kubelet does after a reboot.
func setBootID(ctx context.Context, t *testing.T, client kubernetes.Interface, name, bootID string) {
	t.Helper()
	n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Status.NodeInfo.BootID = bootID
	if _, err := client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// marks describes what the agent and the drain engine left on a node.
type marks struct {
	taint, cordoned, record, drainMark bool
	bootID                             string
}

func marksOf(ctx context.Context, t *testing.T, client kubernetes.Interface, name string) marks {
	t.Helper()
	n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var m marks
	for _, taint := range n.Spec.Taints {
		m.taint = m.taint || taint.Key == TaintKey
		m.drainMark = m.drainMark || taint.Key == drain.DrainingTaintKey
	}
	_, drainAnnotation := n.Annotations[drain.DrainingAnnotation]
	m.drainMark = m.drainMark || drainAnnotation
	m.cordoned = n.Spec.Unschedulable
	_, m.record = n.Annotations[Annotation]
	s, err := stateOf(n)
	if err != nil {
		t.Fatal(err)
	}
	m.bootID = s.BootID
	return m
}

// An AWS spot stop or hibernate that resumes: the instance survives its
// notice, reboots, and the agent starts again on the same node. Its record
// from the earlier boot is cleared as an ended event clears it: the taint and
// the drain marks go, the cordon is lifted if the agent put it there.
func TestRecordFromAnEarlierBootIsCleared(t *testing.T) {
	env := testenv.StartAPIServer(t)
	ctx := testenv.Context(t, 2*time.Minute)
	client := env.Client

	for _, tc := range []struct {
		name         string
		node         *corev1.Node
		wantCordoned bool // after the reboot
	}{
		{name: "cordoned by the agent", node: tu.Node("spot-1")},
		{name: "cordoned by someone else before the notice", node: tu.Node("spot-2", tu.Cordoned()), wantCordoned: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := tc.node.Name
			createNode(ctx, t, client, tc.node, "boot-1")

			// The notice: tainted, cordoned, drained, recorded with the boot.
			h := newTestHandler(client, name)
			if err := h.Handle(ctx, notice.Notice{Cloud: notice.CloudAWS, Kind: notice.Termination, ID: "spot/instance-action",
				Action: "stop", Deadline: time.Now().Add(2 * time.Minute)}); err != nil {
				t.Fatal(err)
			}
			h.jobs.Wait()
			if m := marksOf(ctx, t, client, name); !m.taint || !m.cordoned || !m.record || !m.drainMark || m.bootID != "boot-1" {
				t.Fatalf("after the notice: %+v, want tainted, cordoned, drain-marked and recorded with boot-1", m)
			}

			// The agent restarts without a reboot: the record stands.
			if err := newTestHandler(client, name).ClearEarlierBoot(ctx); err != nil {
				t.Fatal(err)
			}
			if m := marksOf(ctx, t, client, name); !m.taint || !m.cordoned || !m.record || !m.drainMark {
				t.Fatalf("after a restart in the same boot: %+v, want every mark kept", m)
			}

			// The instance resumes: a new boot, and the agent starts again.
			setBootID(ctx, t, client, name, "boot-2")
			rctx, cancel := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() { newTestHandler(client, name).Run(rctx, make(chan notice.Notice)); close(done) }()
			defer func() { cancel(); <-done }()
			want := marks{cordoned: tc.wantCordoned}
			waitFor(t, fmt.Sprintf("the marks of boot-1 to be cleared, leaving %+v", want), func() bool {
				return marksOf(ctx, t, client, name) == want
			})
		})
	}
}

// A record that names no boot (written by an agent before boot IDs were
// recorded) cannot be dated: it is kept.
func TestRecordWithoutBootIDIsKept(t *testing.T) {
	env := testenv.StartAPIServer(t)
	ctx := testenv.Context(t, time.Minute)
	record := `{"notices":{"aws/spot/instance-action":{"kind":"termination","action":"stop","level":"Drain"}},"cordoned":true}`
	node := tu.Node("spot-1", tu.Cordoned(), tu.Taint(TaintKey, "termination", corev1.TaintEffectNoSchedule),
		func(n *corev1.Node) { n.Annotations[Annotation] = record })
	createNode(ctx, t, env.Client, node, "boot-2")
	if err := newTestHandler(env.Client, "spot-1").ClearEarlierBoot(ctx); err != nil {
		t.Fatal(err)
	}
	if m := marksOf(ctx, t, env.Client, "spot-1"); !m.taint || !m.cordoned || !m.record {
		t.Errorf("marks %+v, want the undated record and its marks kept", m)
	}

	// A notice recorded on a node with a record of an earlier boot (one the
	// agent could not clear at its start: its kubelet had not yet reported
	// the new boot) drops the earlier boot's notices: they are over.
	stale := `{"notices":{"aws/spot/instance-action":{"kind":"termination","action":"stop","level":"Drain"}},"cordoned":true,"bootID":"boot-1"}`
	node = tu.Node("spot-2", tu.Cordoned(), tu.Taint(TaintKey, "termination", corev1.TaintEffectNoSchedule),
		func(n *corev1.Node) { n.Annotations[Annotation] = stale })
	createNode(ctx, t, env.Client, node, "boot-2")
	if err := newTestHandler(env.Client, "spot-2").Handle(ctx, notice.Notice{Cloud: notice.CloudAWS, Kind: notice.Rebalance, ID: "rebalance", Action: "rebalance"}); err != nil {
		t.Fatal(err)
	}
	n, err := env.Client.CoreV1().Nodes().Get(ctx, "spot-2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := stateOf(n)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Notices["aws/rebalance"]; !ok || len(s.Notices) != 1 || s.BootID != "boot-2" || n.Spec.Unschedulable {
		t.Errorf("record %+v, unschedulable %v; want the rebalance alone, in boot-2, and the agent's cordon lifted", s, n.Spec.Unschedulable)
	}
}

// waitFor polls cond until it holds; the bound is a safety net, not a timing
// assertion.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
