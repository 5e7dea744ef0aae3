package interrupt

import (
	"context"
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

// drainScheduled reports whether h has a drain running or scheduled.
func drainScheduled(h *Handler) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.job != nil
}

// recordOf reads node name and the handlers' record on it.
func recordOf(ctx context.Context, t *testing.T, client kubernetes.Interface, name string) (*corev1.Node, State) {
	t.Helper()
	node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := stateOf(node)
	if err != nil {
		t.Fatal(err)
	}
	return node, s
}

// handlerOf is newTestHandler for another component.
func handlerOf(client kubernetes.Interface, component, node string) *Handler {
	clk := clock.RealClock{}
	drainer := drain.New(client, clk, nil, drain.Options{Component: component, PollInterval: 50 * time.Millisecond})
	return New(client, drainer, clk, nil, nil, Options{Node: node, Component: component, DeadlineMargin: 5 * time.Second,
		RebalanceAction: v1alpha1.ActionTaint, MaintenanceAction: v1alpha1.ActionDrain})
}

// The agent and the controller's queue both hear of one spot interruption:
// the one that records it first handles it, the other leaves the node alone,
// and the node is drained once, by the first.
func TestNoticeHandledOnceByTheFirstComponent(t *testing.T) {
	env := testenv.StartAPIServer(t)
	ctx := testenv.Context(t, time.Minute)
	client := env.Client
	createNode(ctx, t, client, tu.Node("spot-1"), "boot-1")
	n := notice.Notice{Cloud: notice.CloudAWS, Kind: notice.Termination, ID: "spot/instance-action", Action: "terminate", Deadline: time.Now().Add(2 * time.Minute)}

	queue := handlerOf(client, "queue", "spot-1")
	if err := queue.Handle(ctx, n); err != nil {
		t.Fatal(err)
	}
	queue.jobs.Wait()
	agent := newTestHandler(client, "spot-1")
	if err := agent.Handle(ctx, n); err != nil {
		t.Fatal(err)
	}
	if drainScheduled(agent) {
		t.Error("the agent started a drain of a notice the queue handles")
	}
	node, s := recordOf(ctx, t, client, "spot-1")
	if e := s.Notices["aws/spot/instance-action"]; e.By != "queue" {
		t.Errorf("record = %+v, want the notice handled by the queue", s)
	}
	mark, ok, err := drain.MarkOf(node)
	if err != nil || !ok || mark.By != "queue" {
		t.Errorf("drain mark = %+v %v %v, want the queue's", mark, ok, err)
	}

	// The end of the event, seen by the agent, leaves the queue's record.
	if err := agent.Handle(ctx, notice.Notice{Cloud: n.Cloud, Kind: n.Kind, ID: n.ID, Action: n.Action, Deadline: n.Deadline, Ended: true}); err != nil {
		t.Fatal(err)
	}
	if m := marksOf(ctx, t, client, "spot-1"); !m.record || !m.taint || !m.cordoned {
		t.Errorf("after the agent saw the end: %+v, want the queue's marks kept", m)
	}
}

// One maintenance seen under two IDs: the agent's scheduled event from the
// metadata service, the queue's AWS Health event. A notice of a kind another
// component already handles on the node is left to it.
func TestNoticeOfAKindHandledByAnotherIsLeftToIt(t *testing.T) {
	env := testenv.StartAPIServer(t)
	ctx := testenv.Context(t, time.Minute)
	client := env.Client
	createNode(ctx, t, client, tu.Node("spot-1"), "boot-1")
	at := time.Now().Add(48 * time.Hour)
	agent := newTestHandler(client, "spot-1")
	if err := agent.Handle(ctx, notice.Notice{Cloud: notice.CloudAWS, Kind: notice.Maintenance, ID: "instance-event-1", Action: "instance-retirement", Deadline: at}); err != nil {
		t.Fatal(err)
	}
	queue := handlerOf(client, "queue", "spot-1")
	if err := queue.Handle(ctx, notice.Notice{Cloud: notice.CloudAWS, Kind: notice.Maintenance, ID: "arn:aws:health:event-1", Action: "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED", Deadline: at}); err != nil {
		t.Fatal(err)
	}
	if drainScheduled(queue) {
		t.Error("the queue scheduled a drain for a maintenance the agent handles")
	}
	if _, s := recordOf(ctx, t, client, "spot-1"); len(s.Notices) != 1 || s.Notices["aws/instance-event-1"].By != Component {
		t.Errorf("record = %+v, want the agent's notice only", s)
	}
}
