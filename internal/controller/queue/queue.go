// Package queue is the controller's interruption queue on AWS: with
// cloud.aws.interruptionQueueURL set, the leader long-polls an SQS queue to
// which EventBridge rules send the cluster's EC2, Auto Scaling and AWS
// Health events (docs/queue.md), and handles each for the node of its
// instance:
//
//   - a spot interruption warning, a rebalance recommendation, a scheduled
//     change, an instance stopping or shutting down: the notice the agent
//     would read from the metadata service, handled by the agent's own rules
//     (interrupt.Handler, under Component): taint, cordon, drain in priority
//     order within the deadline;
//   - an Auto Scaling terminating lifecycle action: the node is drained,
//     with heartbeats while it drains, then the action is completed
//     (CONTINUE) once no pod a drain moves is left, or at the deadline;
//   - an instance stopped or terminated: its Node is deleted, so that a
//     cordoned leftover does not linger until a cloud controller manager
//     notices.
//
// A message is deleted once handled; a malformed one, one for an instance
// no node of this cluster has, and a repeat of an event already handled are
// deleted too, with a log line and a count (spotter_queue_messages_total),
// and never block the queue. When the agent runs as well, the node's record
// says who handles a notice: whichever saw it first (interrupt.Options.
// Component), so that the node is drained once.
package queue

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"spotter.dev/spotter/internal/agent/interrupt"
	"spotter.dev/spotter/internal/agent/notice"
	"spotter.dev/spotter/internal/backoff"
	"spotter.dev/spotter/internal/coop"
	"spotter.dev/spotter/internal/drain"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// Component names the queue's handling on the node's record, the drain's
// marks and Events.
const Component = "queue"

// SQSAPI is what the queue asks of SQS.
type SQSAPI interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
	ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, opts ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
}

// LifecycleAPI is what the queue asks of Auto Scaling.
type LifecycleAPI interface {
	CompleteLifecycleAction(ctx context.Context, in *autoscaling.CompleteLifecycleActionInput, opts ...func(*autoscaling.Options)) (*autoscaling.CompleteLifecycleActionOutput, error)
	RecordLifecycleActionHeartbeat(ctx context.Context, in *autoscaling.RecordLifecycleActionHeartbeatInput, opts ...func(*autoscaling.Options)) (*autoscaling.RecordLifecycleActionHeartbeatOutput, error)
}

// Options configure a Controller.
type Options struct {
	// QueueURL is the SQS queue's URL.
	QueueURL string
	// SQS and AutoScaling are the clients.
	SQS         SQSAPI
	AutoScaling LifecycleAPI
	// Kube writes nodes and evicts pods; Nodes reads nodes (the manager's
	// cache).
	Kube  kubernetes.Interface
	Nodes client.Reader
	Clock clock.Clock
	// Recorder records the notices' Events on the nodes; nil: none.
	Recorder events.EventRecorder
	// Config gives the agent's rules (agent.*) and the drain's (drain.*).
	Config *v1alpha1.SpotterConfiguration
	// LifecycleTimeout bounds the drain of a node under a lifecycle action:
	// the action is completed at the latest this long after it came.
	// Default drain.timeout.
	LifecycleTimeout time.Duration
	// HeartbeatInterval is how often a held message is kept invisible (for
	// two intervals) and a lifecycle action alive while its node drains;
	// default 1m, within a hook's heartbeat timeout of more than a minute.
	HeartbeatInterval time.Duration
	// CheckInterval is how often a held message's node is looked at (one
	// LIST of its pods); default 2s.
	CheckInterval time.Duration
	DryRun        bool
}

// Controller reads the queue. It runs on the leader only.
type Controller struct {
	opts Options

	mu       sync.Mutex
	handlers map[string]nodeHandler // by node name
	seen     map[string]time.Time   // event IDs handled, and when
	holds    map[string]*hold       // messages held, by message ID
	wg       sync.WaitGroup
}

// New returns a Controller.
func New(opts Options) *Controller {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.LifecycleTimeout <= 0 {
		opts.LifecycleTimeout = opts.Config.Drain.Timeout.Duration
	}
	if opts.HeartbeatInterval <= 0 {
		opts.HeartbeatInterval = time.Minute
	}
	if opts.CheckInterval <= 0 {
		opts.CheckInterval = 2 * time.Second
	}
	return &Controller{opts: opts, handlers: map[string]nodeHandler{}, seen: map[string]time.Time{}, holds: map[string]*hold{}}
}

// Name is the controller's name.
func (c *Controller) Name() string { return "interruption-queue" }

// NeedLeaderElection implements manager.LeaderElectionRunnable: the leader
// alone reads the queue.
func (c *Controller) NeedLeaderElection() bool { return true }

// seenFor is how long an event ID is remembered: longer than SQS keeps a
// message invisible after a receipt that was not deleted.
const seenFor = 30 * time.Minute

// Start long-polls the queue until ctx ends, then waits for the drains and
// lifecycle actions in flight (a termination drain is bounded by its
// deadline).
func (c *Controller) Start(ctx context.Context) error {
	log := klog.FromContext(ctx).WithValues("controller", c.Name(), "queue", c.opts.QueueURL)
	ctx = klog.NewContext(ctx, log)
	log.Info("Reading interruption events from the queue")
	retries := backoff.Backoff{Initial: time.Second, Max: time.Minute}
	for ctx.Err() == nil {
		out, err := c.opts.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: &c.opts.QueueURL, MaxNumberOfMessages: 10, WaitTimeSeconds: 20,
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameApproximateReceiveCount},
		})
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			receiveErrors.Inc()
			wait := retries.Next()
			log.Error(err, "Receiving from the interruption queue; will retry", "retryIn", wait)
			if coop.Sleep(ctx, c.opts.Clock, wait) != nil {
				break
			}
			continue
		}
		retries.Reset()
		for _, m := range out.Messages {
			c.handle(ctx, m)
		}
	}
	c.wg.Wait()
	c.mu.Lock()
	hs := make([]*interrupt.Handler, 0, len(c.handlers))
	for _, nh := range c.handlers {
		hs = append(hs, nh.h)
	}
	c.mu.Unlock()
	for _, h := range hs {
		h.Wait()
	}
	return nil
}

// Outcomes of a message (spotter_queue_messages_total's label).
const (
	OutcomeHandled   = "handled"
	OutcomeIgnored   = "ignored"
	OutcomeMalformed = "malformed"
	OutcomeForeign   = "foreign"
	OutcomeDuplicate = "duplicate"
	OutcomeFailed    = "failed"
)

// hold is a message kept on the queue, invisible, while its node drains: a
// termination notice or a lifecycle action. If this process stops before the
// node is drained, the message comes back to the next leader, which goes on.
type hold struct {
	mu      sync.Mutex
	receipt string // the latest: only it deletes the message
}

func (h *hold) latest() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.receipt
}

// handle acts on one message and deletes it, unless acting failed in a way
// a later delivery may mend (the cluster could not be read or written), or
// the message is held while its node drains (see hold).
func (c *Controller) handle(ctx context.Context, m sqstypes.Message) {
	log := klog.FromContext(ctx).WithValues("messageID", aws.ToString(m.MessageId))
	now := c.opts.Clock.Now()
	receipt := aws.ToString(m.ReceiptHandle)
	ev, err := Parse(aws.ToString(m.Body), now)
	var outcome string
	held := false
	switch {
	case err != nil:
		outcome = OutcomeMalformed
		log.Error(err, "Deleting a message that is no interruption event", "body", truncate(aws.ToString(m.Body), 200))
	case c.refresh(aws.ToString(m.MessageId), receipt):
		// This message again, while its node drains here (its invisibility
		// ran out): held on with the new receipt.
		return
	case c.repeat(ev.ID, now):
		outcome = OutcomeDuplicate
		log.Info("Deleting a repeat of an event already handled", "event", ev.ID, "detail", ev.Detail)
	default:
		outcome, held, err = c.act(klog.NewContext(ctx, log.WithValues("event", ev.ID, "instance", ev.InstanceID)), ev, aws.ToString(m.MessageId), receipt)
		if err != nil {
			log.Error(err, "Handling an interruption event; it comes back after the queue's visibility timeout", "detail", ev.Detail)
			c.forget(ev.ID)
		}
	}
	messages.WithLabelValues(outcome).Inc()
	if outcome == OutcomeFailed || held {
		return
	}
	c.deleteMessage(ctx, receipt)
}

func (c *Controller) deleteMessage(ctx context.Context, receipt string) {
	if _, err := c.opts.SQS.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &c.opts.QueueURL, ReceiptHandle: &receipt}); err != nil && ctx.Err() == nil {
		// Delivered again later: a repeat, deleted then.
		klog.FromContext(ctx).Error(err, "Deleting a handled message from the interruption queue")
	}
}

// refresh gives held message id its latest receipt, and reports whether it
// is held.
func (c *Controller) refresh(id, receipt string) bool {
	c.mu.Lock()
	h, ok := c.holds[id]
	c.mu.Unlock()
	if ok {
		h.mu.Lock()
		h.receipt = receipt
		h.mu.Unlock()
	}
	return ok
}

// repeat reports whether event id was handled already, and records it.
func (c *Controller) repeat(id string, now time.Time) bool {
	if id == "" {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, at := range c.seen {
		if now.Sub(at) > seenFor {
			delete(c.seen, k)
		}
	}
	if _, ok := c.seen[id]; ok {
		return true
	}
	c.seen[id] = now
	return false
}

func (c *Controller) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.seen, id)
}

// act handles a parsed event; held says that its message stays on the
// queue while the node drains.
func (c *Controller) act(ctx context.Context, ev Event, messageID, receipt string) (outcome string, held bool, err error) {
	log := klog.FromContext(ctx)
	if ev.Kind == KindIgnored {
		log.V(1).Info("Deleting an event that asks nothing", "detail", ev.Detail)
		return OutcomeIgnored, false, nil
	}
	ids := append([]string{ev.InstanceID}, ev.MoreInstances...)
	var nodes []*corev1.Node
	for _, id := range ids {
		node, err := c.nodeOf(ctx, id)
		if err != nil {
			return OutcomeFailed, false, err
		}
		if node != nil {
			nodes = append(nodes, node)
		}
	}
	if len(nodes) == 0 {
		if ev.Kind == KindLifecycle && slices.Contains(c.opts.Config.Cloud.AWS.AutoScalingGroups, ev.Lifecycle.Group) {
			// One of this cluster's groups terminates an instance without a
			// Node: nothing to drain, and it need not wait.
			log.Info("Lifecycle action of an instance without a node in one of cloud.aws.autoScalingGroups: completed at once", "group", ev.Lifecycle.Group)
			c.complete(ctx, ev.Lifecycle, "no node")
			return OutcomeHandled, false, nil
		}
		log.Info("Deleting an event for an instance no node of this cluster has", "detail", ev.Detail)
		return OutcomeForeign, false, nil
	}
	for _, node := range nodes {
		nodeCtx := klog.NewContext(ctx, log.WithValues("node", node.Name))
		switch ev.Kind {
		case KindNotice, KindLifecycle:
			n := ev.Notice
			if ev.Kind == KindLifecycle {
				n.Deadline = c.opts.Clock.Now().Add(c.opts.LifecycleTimeout)
			}
			if err := c.handlerFor(node).Handle(nodeCtx, n); err != nil {
				return OutcomeFailed, false, err
			}
			if ev.Kind == KindLifecycle || (n.Kind == notice.Termination && !n.Ended && len(nodes) == 1) {
				c.hold(nodeCtx, ev, node.Name, n.Deadline, messageID, receipt)
				held = true
			}
		case KindTerminated:
			if err := c.deleteNode(nodeCtx, node); err != nil {
				return OutcomeFailed, false, err
			}
		}
	}
	return OutcomeHandled, held, nil
}

// nodeOf finds the node whose providerID names instance id
// (aws:///<zone>/<id>), from the cache.
func (c *Controller) nodeOf(ctx context.Context, id string) (*corev1.Node, error) {
	var nodes corev1.NodeList
	if err := c.opts.Nodes.List(ctx, &nodes); err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if strings.HasPrefix(n.Spec.ProviderID, "aws://") && strings.HasSuffix(n.Spec.ProviderID, "/"+id) {
			return n, nil
		}
	}
	return nil, nil
}

// nodeHandler is the notice handler of one node, by its UID: a node of the
// same name made later (AWS names nodes by IP address) gets a new one.
type nodeHandler struct {
	uid types.UID
	h   *interrupt.Handler
}

// handlerFor returns the notice handler of node.
func (c *Controller) handlerFor(node *corev1.Node) *interrupt.Handler {
	c.mu.Lock()
	defer c.mu.Unlock()
	nh, ok := c.handlers[node.Name]
	if !ok || nh.uid != node.UID {
		nh = nodeHandler{uid: node.UID, h: interrupt.ForComponent(Component, c.opts.Kube, c.opts.Clock, c.opts.Recorder, nil, c.opts.Config, node.Name, c.opts.DryRun)}
		c.handlers[node.Name] = nh
	}
	return nh.h
}

// drop forgets the handler of node once it is gone.
func (c *Controller) drop(node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.handlers, node)
}

// deleteNode deletes the Node of a terminated instance, unless it was
// replaced meanwhile by a Node of the same name for another instance.
func (c *Controller) deleteNode(ctx context.Context, node *corev1.Node) error {
	log := klog.FromContext(ctx)
	if c.opts.DryRun {
		log.Info("Dry run: would delete the Node of a terminated instance")
		return nil
	}
	err := c.opts.Kube.CoreV1().Nodes().Delete(ctx, node.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &node.UID}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting node %s: %w", node.Name, err)
	}
	log.Info("Deleted the Node of a terminated instance")
	c.drop(node.Name)
	return nil
}

// hold keeps ev's message on the queue, invisible, while node drains, in
// the background: until no pod a drain moves is left on the node (whoever
// drained it), the node is gone, or deadline (a lifecycle action is
// completed then, with heartbeats meanwhile). Then the message is deleted.
// When ctx ends first (this process stops), the message is left to come
// back to the next leader.
func (c *Controller) hold(ctx context.Context, ev Event, node string, deadline time.Time, messageID, receipt string) {
	h := &hold{receipt: receipt}
	c.mu.Lock()
	c.holds[messageID] = h
	c.mu.Unlock()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer func() {
			c.mu.Lock()
			delete(c.holds, messageID)
			c.mu.Unlock()
		}()
		why, ok := c.waitDrained(ctx, ev, node, deadline, h)
		if !ok {
			return
		}
		if ev.Kind == KindLifecycle {
			c.complete(ctx, ev.Lifecycle, why)
		}
		c.deleteMessage(ctx, h.latest())
	}()
}

// waitDrained waits, keeping the message invisible (and a lifecycle action
// alive), until node is drained, gone, or deadline; it says which. ok is
// false when ctx ended first.
func (c *Controller) waitDrained(ctx context.Context, ev Event, node string, deadline time.Time, h *hold) (why string, ok bool) {
	log := klog.FromContext(ctx)
	clk := c.opts.Clock
	var nextBeat time.Time // now: the message's visibility is extended at once
	for {
		left, err := c.podsToMove(ctx, node)
		switch {
		case ctx.Err() != nil:
			return "", false
		case err != nil:
			log.Error(err, "Reading the pods of a node under a termination notice")
		case left < 0:
			c.drop(node)
			return "node gone", true
		case left == 0:
			return "node drained", true
		}
		now := clk.Now()
		if !now.Before(deadline) {
			return fmt.Sprintf("deadline passed with %d pods left", left), true
		}
		if !now.Before(nextBeat) {
			nextBeat = now.Add(c.opts.HeartbeatInterval)
			c.keepAlive(ctx, ev, h)
		}
		if coop.Sleep(ctx, clk, c.opts.CheckInterval) != nil {
			return "", false
		}
	}
}

// keepAlive extends the message's invisibility to two heartbeat intervals,
// and records a heartbeat of a lifecycle action.
func (c *Controller) keepAlive(ctx context.Context, ev Event, h *hold) {
	log := klog.FromContext(ctx)
	receipt := h.latest()
	visible := int32(max(30, (2*c.opts.HeartbeatInterval+time.Second-1)/time.Second))
	if _, err := c.opts.SQS.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &c.opts.QueueURL, ReceiptHandle: &receipt, VisibilityTimeout: visible}); err != nil && ctx.Err() == nil {
		log.Error(err, "Keeping a held message invisible; it may come back while its node drains, and is then held again")
	}
	if ev.Kind != KindLifecycle || c.opts.DryRun {
		return
	}
	a := ev.Lifecycle
	if _, err := c.opts.AutoScaling.RecordLifecycleActionHeartbeat(ctx, &autoscaling.RecordLifecycleActionHeartbeatInput{
		AutoScalingGroupName: &a.Group, LifecycleHookName: &a.Hook, LifecycleActionToken: &a.Token, InstanceId: &a.InstanceID}); err != nil && ctx.Err() == nil {
		log.Error(err, "Recording a heartbeat of the lifecycle action")
	}
}

// complete completes lifecycle action a with CONTINUE, retrying a few times.
func (c *Controller) complete(ctx context.Context, a LifecycleAction, why string) {
	log := klog.FromContext(ctx).WithValues("group", a.Group, "hook", a.Hook)
	if c.opts.DryRun {
		log.Info("Dry run: would complete the lifecycle action", "why", why)
		return
	}
	retries := backoff.Backoff{Initial: time.Second, Max: 10 * time.Second}
	for {
		_, err := c.opts.AutoScaling.CompleteLifecycleAction(ctx, &autoscaling.CompleteLifecycleActionInput{
			AutoScalingGroupName: &a.Group, LifecycleHookName: &a.Hook, LifecycleActionToken: &a.Token, InstanceId: &a.InstanceID,
			LifecycleActionResult: aws.String("CONTINUE")})
		if err == nil {
			lifecycleActions.WithLabelValues("completed").Inc()
			log.Info("Lifecycle action completed: the instance may terminate", "why", why)
			return
		}
		if retries.Failures() >= 4 || ctx.Err() != nil {
			lifecycleActions.WithLabelValues("failed").Inc()
			log.Error(err, "Completing the lifecycle action; Auto Scaling goes on at the hook's heartbeat timeout")
			return
		}
		if coop.Sleep(ctx, c.opts.Clock, retries.Next()) != nil {
			return
		}
	}
}

// podsToMove counts the pods on node that a drain moves (drain.PodsToMove);
// -1 when the node is gone (as the cache sees it).
func (c *Controller) podsToMove(ctx context.Context, node string) (int, error) {
	var n corev1.Node
	if err := c.opts.Nodes.Get(ctx, client.ObjectKey{Name: node}, &n); apierrors.IsNotFound(err) {
		return -1, nil
	} else if err != nil {
		return 0, err
	}
	return drain.PodsToMove(ctx, c.opts.Kube, node)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
