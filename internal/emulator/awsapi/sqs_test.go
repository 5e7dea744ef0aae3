package awsapi

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

func (e *env) sqsClient(t *testing.T) *sqs.Client {
	t.Helper()
	return sqs.NewFromConfig(sdkConfig(t, e.url, func() aws.Retryer { return aws.NopRetryer{} }))
}

// eventOf decodes an EventBridge envelope.
type eventOf struct {
	DetailType string          `json:"detail-type"`
	Source     string          `json:"source"`
	Time       string          `json:"time"`
	Detail     json.RawMessage `json:"detail"`
}

func receiveEvents(t *testing.T, c *sqs.Client, url string) ([]eventOf, []sqstypes.Message) {
	t.Helper()
	out, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 10})
	if err != nil {
		t.Fatal(err)
	}
	var evs []eventOf
	for _, m := range out.Messages {
		var e eventOf
		if err := json.Unmarshal([]byte(*m.Body), &e); err != nil {
			t.Fatalf("message %s is no event: %v", *m.MessageId, err)
		}
		evs = append(evs, e)
	}
	return evs, out.Messages
}

// The SQS API through aws-sdk-go-v2: a queue, its URL and attributes, long
// polls, visibility and deletion, and the SDK's MD5 check passing.
func TestSQSThroughSDK(t *testing.T) {
	e := newEnv(t, Options{})
	c := e.sqsClient(t)
	ctx := context.Background()
	created, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("q"), Attributes: map[string]string{"VisibilityTimeout": "10"}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("q")})
	if err != nil || *got.QueueUrl != *created.QueueUrl {
		t.Fatalf("GetQueueUrl = %v, %v; want %s", got, err, *created.QueueUrl)
	}
	url := *got.QueueUrl
	_, err = c.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("nope")})
	var missing *sqstypes.QueueDoesNotExist
	if !errors.As(err, &missing) {
		t.Errorf("GetQueueUrl of a missing queue: %v, want QueueDoesNotExist", err)
	}

	// An empty queue answers a long poll when a message arrives.
	done := make(chan *sqs.ReceiveMessageOutput, 1)
	go func() {
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, WaitTimeSeconds: 20, MaxNumberOfMessages: 10,
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{"ApproximateReceiveCount"}})
		if err != nil {
			t.Error(err)
		}
		done <- out
	}()
	for e.clock.HasWaiters() == false {
		time.Sleep(time.Millisecond)
	}
	if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("hello")}); err != nil {
		t.Fatal(err)
	}
	out := <-done
	if len(out.Messages) != 1 || *out.Messages[0].Body != "hello" || out.Messages[0].Attributes["ApproximateReceiveCount"] != "1" {
		t.Fatalf("long poll got %+v", out.Messages)
	}
	first := *out.Messages[0].ReceiptHandle

	// Invisible for the queue's 10 s, then visible again with a new receipt.
	if out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url}); err != nil || len(out.Messages) != 0 {
		t.Fatalf("a received message was received again at once: %v, %v", out, err)
	}
	attrs, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &url, AttributeNames: []sqstypes.QueueAttributeName{"All"}})
	if err != nil || attrs.Attributes["ApproximateNumberOfMessagesNotVisible"] != "1" || attrs.Attributes["VisibilityTimeout"] != "10" {
		t.Fatalf("attributes = %v, %v", attrs, err)
	}
	e.clock.Step(10 * time.Second)
	again, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url})
	if err != nil || len(again.Messages) != 1 || *again.Messages[0].ReceiptHandle == first {
		t.Fatalf("after the visibility timeout: %v, %v", again, err)
	}
	// Only the latest receipt deletes the message; an older one succeeds
	// and leaves it.
	if _, err := c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: &first}); err != nil {
		t.Fatal(err)
	}
	if m := e.s.QueueMessages("q"); len(m) != 1 {
		t.Fatalf("an older receipt deleted the message: the queue holds %v", m)
	}
	if _, err := c.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &url, ReceiptHandle: again.Messages[0].ReceiptHandle, VisibilityTimeout: 60}); err != nil {
		t.Fatal(err)
	}
	e.clock.Step(30 * time.Second)
	if out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url}); err != nil || len(out.Messages) != 0 {
		t.Fatalf("a message whose visibility was extended to 60 s was received again after 30 s: %v, %v", out, err)
	}
	if _, err := c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: again.Messages[0].ReceiptHandle}); err != nil {
		t.Fatal(err)
	}
	if m := e.s.QueueMessages("q"); len(m) != 0 {
		t.Errorf("after DeleteMessage with the latest receipt the queue holds %v", m)
	}
	if _, err := c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: aws.String("junk")}); err == nil {
		t.Error("a malformed receipt handle was accepted")
	}
}

// EventBridge's events reach the queue: a spot interruption warns, then
// terminates the instance two minutes later with its state changes; a
// rebalance recommendation and a scheduled retirement; a scale-in held by a
// lifecycle hook until CompleteLifecycleAction.
func TestEventsAndLifecycleHooks(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := context.Background()
	c := e.sqsClient(t)
	e.s.RouteEventsTo("events")
	url := *must(c.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("events")})).QueueUrl
	lt, err := e.s.CreateLaunchTemplate("spot", LaunchTemplateData{InstanceType: "m5.large", Spot: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.s.CreateGroup(Group{Name: "g", MaxSize: 3, DesiredCapacity: 2, AvailabilityZones: []string{"us-east-1a"}, LaunchTemplate: &LaunchTemplateRef{ID: lt}}); err != nil {
		t.Fatal(err)
	}
	e.s.Step()
	evs, msgs := receiveEvents(t, c, url)
	if len(evs) != 2 || evs[0].DetailType != DetailTypeStateChange || !jsonHas(evs[0].Detail, "state", "running") {
		t.Fatalf("launch events = %+v", evs)
	}
	deleteAll(t, c, url, msgs)
	ids := []string{}
	for _, i := range e.s.Instances() {
		ids = append(ids, i.ID)
	}

	if err := e.s.InterruptSpot(ids[0]); err != nil {
		t.Fatal(err)
	}
	if err := e.s.RecommendRebalance(ids[1]); err != nil {
		t.Fatal(err)
	}
	if err := e.s.ScheduleRetirement(ids[1], epoch.Add(48*time.Hour)); err != nil {
		t.Fatal(err)
	}
	evs, msgs = receiveEvents(t, c, url)
	if len(evs) != 3 || evs[0].DetailType != DetailTypeSpotWarning || !jsonHas(evs[0].Detail, "instance-id", ids[0]) ||
		!jsonHas(evs[0].Detail, "instance-action", "terminate") || evs[1].DetailType != DetailTypeRebalance ||
		evs[2].Source != "aws.health" || !jsonHas(evs[2].Detail, "startTime", "Thu, 03 Jan 2030 00:00:00 GMT") {
		t.Fatalf("events = %+v", evs)
	}
	deleteAll(t, c, url, msgs)
	e.clock.Step(SpotInterruptionNotice - time.Second)
	e.s.Step()
	if i, _ := e.s.Instance(ids[0]); i.State != StateRunning {
		t.Fatalf("interrupted instance is %s before the two minutes", i.State)
	}
	e.clock.Step(time.Second)
	e.s.Step()
	if i := e.s.instances[ids[0]]; i.State != StateTerminated || i.stateReason != "Server.SpotInstanceTermination" {
		t.Fatalf("interrupted instance is %s (%s) after the two minutes", i.State, i.stateReason)
	}
	evs, msgs = receiveEvents(t, c, url)
	if len(evs) != 2 || !jsonHas(evs[0].Detail, "state", "shutting-down") || !jsonHas(evs[1].Detail, "state", "terminated") {
		t.Fatalf("events after the interruption = %+v", evs)
	}
	deleteAll(t, c, url, msgs)

	// A scale-in is held by the terminating hook.
	as := e.as
	if _, err := as.PutLifecycleHook(ctx, &autoscaling.PutLifecycleHookInput{AutoScalingGroupName: aws.String("g"), LifecycleHookName: aws.String("drain"),
		LifecycleTransition: aws.String(TransitionTerminating), HeartbeatTimeout: aws.Int32(300), DefaultResult: aws.String("CONTINUE")}); err != nil {
		t.Fatal(err)
	}
	if _, err := as.TerminateInstanceInAutoScalingGroup(ctx, &autoscaling.TerminateInstanceInAutoScalingGroupInput{InstanceId: &ids[1], ShouldDecrementDesiredCapacity: aws.Bool(true)}); err != nil {
		t.Fatal(err)
	}
	evs, msgs = receiveEvents(t, c, url)
	var hook struct {
		Token string `json:"LifecycleActionToken"`
		ID    string `json:"EC2InstanceId"`
	}
	if len(evs) != 1 || evs[0].DetailType != DetailTypeTerminateHook || json.Unmarshal(evs[0].Detail, &hook) != nil || hook.ID != ids[1] {
		t.Fatalf("hook events = %+v", evs)
	}
	deleteAll(t, c, url, msgs)
	e.clock.Step(200 * time.Second)
	if _, err := as.RecordLifecycleActionHeartbeat(ctx, &autoscaling.RecordLifecycleActionHeartbeatInput{AutoScalingGroupName: aws.String("g"),
		LifecycleHookName: aws.String("drain"), InstanceId: &ids[1]}); err != nil {
		t.Fatal(err)
	}
	e.clock.Step(200 * time.Second) // past the first timeout, within the heartbeat's
	e.s.Step()
	if i, _ := e.s.Instance(ids[1]); i.State != StateRunning || i.LifecycleState != LifecycleTerminatingWait {
		t.Fatalf("held instance is %s/%s", i.State, i.LifecycleState)
	}
	if _, err := as.CompleteLifecycleAction(ctx, &autoscaling.CompleteLifecycleActionInput{AutoScalingGroupName: aws.String("g"), LifecycleHookName: aws.String("drain"),
		LifecycleActionToken: aws.String("wrong"), LifecycleActionResult: aws.String("CONTINUE")}); err == nil {
		t.Error("a wrong token completed the action")
	}
	if _, err := as.CompleteLifecycleAction(ctx, &autoscaling.CompleteLifecycleActionInput{AutoScalingGroupName: aws.String("g"), LifecycleHookName: aws.String("drain"),
		LifecycleActionToken: &hook.Token, LifecycleActionResult: aws.String("CONTINUE")}); err != nil {
		t.Fatal(err)
	}
	if i, _ := e.s.Instance(ids[1]); i.State != StateShuttingDown || e.s.HookWaiting(ids[1]) {
		t.Fatalf("completed instance is %s", i.State)
	}
	// Unanswered, a hold ends at its heartbeat timeout.
	if err := e.s.UpdateGroupSize("g", 0, 3, 0); err != nil {
		t.Fatal(err)
	}
	e.s.Step()
	waiting := ""
	for _, i := range e.s.Instances() {
		if e.s.HookWaiting(i.ID) {
			waiting = i.ID
		}
	}
	if waiting == "" {
		t.Fatal("the scale-in held nothing")
	}
	e.clock.Step(299 * time.Second)
	e.s.Step()
	if !e.s.HookWaiting(waiting) {
		t.Fatal("the hold ended before its heartbeat timeout")
	}
	e.clock.Step(time.Second)
	e.s.Step()
	if i, _ := e.s.Instance(waiting); i.State != StateTerminated {
		t.Fatalf("after the heartbeat timeout the held instance is %s", i.State)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func jsonHas(raw json.RawMessage, key, want string) bool {
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil {
		return false
	}
	return m[key] == want
}

func deleteAll(t *testing.T, c *sqs.Client, url string, msgs []sqstypes.Message) {
	t.Helper()
	for _, m := range msgs {
		if _, err := c.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle}); err != nil {
			t.Fatal(err)
		}
	}
}
