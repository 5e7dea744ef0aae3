package awsapi

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// EventBridge, as far as a cluster's interruption queue sees it: RouteEventsTo
// stands for the rules an operator creates (docs/queue.md), which send these
// events to one SQS queue, each message's body one event in EventBridge's
// envelope ({"version": "0", "id", "detail-type", "source", "account",
// "time", "region", "resources", "detail"}). The detail of each follows the
// EC2, Auto Scaling and AWS Health user guides' examples:
//
//   - "EC2 Spot Instance Interruption Warning" (aws.ec2): InterruptSpot, two
//     minutes before the instance is terminated; detail instance-id and
//     instance-action (terminate).
//   - "EC2 Instance Rebalance Recommendation" (aws.ec2): RecommendRebalance;
//     detail instance-id.
//   - "EC2 Instance State-change Notification" (aws.ec2): every change of an
//     instance to running, shutting-down or terminated; detail instance-id and
//     state.
//   - "AWS Health Event" (aws.health), category scheduledChange, service EC2:
//     ScheduleRetirement; detail eventTypeCode, startTime and endTime (as
//     RFC 1123 in GMT) and affectedEntities[].entityValue the instance ID.
//   - "EC2 Instance-terminate Lifecycle Action" (aws.autoscaling): when Auto
//     Scaling puts an instance in Terminating:Wait for a lifecycle hook;
//     detail LifecycleActionToken, AutoScalingGroupName, LifecycleHookName,
//     EC2InstanceId, LifecycleTransition (autoscaling:EC2_INSTANCE_TERMINATING).
//
// Delivery is at once and in order; EventBridge's at-least-once delivery is
// modelled by tests sending a message twice.

// Event detail types and sources.
const (
	DetailTypeSpotWarning   = "EC2 Spot Instance Interruption Warning"
	DetailTypeRebalance     = "EC2 Instance Rebalance Recommendation"
	DetailTypeStateChange   = "EC2 Instance State-change Notification"
	DetailTypeHealth        = "AWS Health Event"
	DetailTypeTerminateHook = "EC2 Instance-terminate Lifecycle Action"
)

// SpotInterruptionNotice is how long before a spot instance is terminated
// EC2 warns of it.
const SpotInterruptionNotice = 2 * time.Minute

// RouteEventsTo sends, from now on, the events above to queue (created if
// missing); "" stops it.
func (s *Server) RouteEventsTo(queue string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.eventsQueue = queue
	if queue != "" {
		s.createQueueLocked(queue, DefaultVisibilityTimeout)
	}
}

// emitLocked puts one event on the events queue, if routed; the caller holds
// s.mu.
func (s *Server) emitLocked(source, detailType string, resources []string, detail any) {
	if s.eventsQueue == "" {
		return
	}
	q := s.queues[s.eventsQueue]
	if q == nil {
		return
	}
	body, err := json.Marshal(map[string]any{
		"version":     "0",
		"id":          uuid(s.nextID() ^ 0xe7e7),
		"detail-type": detailType,
		"source":      source,
		"account":     s.accountID,
		"time":        s.clock.Now().UTC().Format(time.RFC3339),
		"region":      s.region,
		"resources":   resources,
		"detail":      detail,
	})
	if err != nil {
		panic(err) // maps of strings always marshal
	}
	s.sendLocked(q, string(body))
}

func (s *Server) instanceARN(id string) string {
	return fmt.Sprintf("arn:aws:ec2:%s:%s:instance/%s", s.region, s.accountID, id)
}

// emitStateLocked sends the state-change event of instance i.
func (s *Server) emitStateLocked(i *instance) {
	s.emitLocked("aws.ec2", DetailTypeStateChange, []string{s.instanceARN(i.ID)}, map[string]string{"instance-id": i.ID, "state": i.State})
}

// InterruptSpot interrupts a running spot instance as EC2 does: the
// interruption warning now, the instance terminated SpotInterruptionNotice
// later (at a Step), then replaced by its group.
func (s *Server) InterruptSpot(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, ok := s.instances[id]
	if !ok {
		return fmt.Errorf("instance %s: %w", id, ErrNotFound)
	}
	if !i.Spot || i.State != StateRunning {
		return fmt.Errorf("instance %s is not a running spot instance", id)
	}
	i.interruptAt = s.clock.Now().Add(SpotInterruptionNotice)
	s.emitLocked("aws.ec2", DetailTypeSpotWarning, []string{s.instanceARN(id)}, map[string]string{"instance-id": id, "instance-action": "terminate"})
	return nil
}

// RecommendRebalance sends a rebalance recommendation for instance id.
func (s *Server) RecommendRebalance(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.instances[id]; !ok {
		return fmt.Errorf("instance %s: %w", id, ErrNotFound)
	}
	s.emitLocked("aws.ec2", DetailTypeRebalance, []string{s.instanceARN(id)}, map[string]string{"instance-id": id})
	return nil
}

// ScheduleRetirement sends the AWS Health scheduled change that retires
// instance id at start (its window ends an hour later). The instance is not
// retired by the emulator.
func (s *Server) ScheduleRetirement(id string, start time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.instances[id]; !ok {
		return fmt.Errorf("instance %s: %w", id, ErrNotFound)
	}
	const rfc1123GMT = "Mon, 02 Jan 2006 15:04:05 GMT"
	s.emitLocked("aws.health", DetailTypeHealth, []string{id}, map[string]any{
		"eventArn":          fmt.Sprintf("arn:aws:health:%s::event/EC2/AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED/%s", s.region, uuid(s.nextID())),
		"service":           "EC2",
		"eventTypeCode":     "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED",
		"eventTypeCategory": "scheduledChange",
		"startTime":         start.UTC().Format(rfc1123GMT),
		"endTime":           start.Add(time.Hour).UTC().Format(rfc1123GMT),
		"affectedEntities":  []map[string]string{{"entityValue": id}},
	})
	return nil
}

// Lifecycle hooks (Amazon EC2 Auto Scaling User Guide, "Amazon EC2 Auto
// Scaling lifecycle hooks"): a group's terminating hook holds each instance
// Auto Scaling terminates (scale-in, TerminateInstanceInAutoScalingGroup) in
// Terminating:Wait, still running, until CompleteLifecycleAction, or until
// its heartbeat timeout passes (each RecordLifecycleActionHeartbeat starts
// it again); then Terminating:Proceed and the instance shuts down. For a
// terminating hook CONTINUE and ABANDON both let the termination go on.
// Instances EC2 terminates itself (a spot interruption, TerminateInstances)
// are not held. Launching hooks are not emulated.

// Lifecycle states of an instance held by a terminating hook.
const (
	LifecycleTerminatingWait    = "Terminating:Wait"
	LifecycleTerminatingProceed = "Terminating:Proceed"
)

// TransitionTerminating is the terminating hooks' LifecycleTransition.
const TransitionTerminating = "autoscaling:EC2_INSTANCE_TERMINATING"

// LifecycleHook is a group's lifecycle hook.
type LifecycleHook struct {
	Name string
	// Transition is TransitionTerminating (only that one is emulated).
	Transition string
	// HeartbeatTimeout is how long an instance waits; default one hour.
	HeartbeatTimeout time.Duration
	// DefaultResult is CONTINUE or ABANDON (the default).
	DefaultResult string
}

// hookWait is an instance held in Terminating:Wait.
type hookWait struct {
	hook     string
	token    string
	deadline time.Time
}

// PutLifecycleHook adds or replaces a lifecycle hook of a group.
func (s *Server) PutLifecycleHook(groupName string, h LifecycleHook) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.putHookLocked(groupName, h)
}

func (s *Server) putHookLocked(groupName string, h LifecycleHook) error {
	g, ok := s.groups[groupName]
	if !ok {
		return fmt.Errorf("group %s: %w", groupName, ErrNotFound)
	}
	if h.Transition != TransitionTerminating {
		return fmt.Errorf("lifecycle transition %q is not emulated (only %s)", h.Transition, TransitionTerminating)
	}
	if h.HeartbeatTimeout == 0 {
		h.HeartbeatTimeout = time.Hour
	}
	if h.DefaultResult == "" {
		h.DefaultResult = "ABANDON"
	}
	g.hooks = slices.DeleteFunc(g.hooks, func(x LifecycleHook) bool { return x.Name == h.Name })
	g.hooks = append(g.hooks, h)
	return nil
}

// autoScalingTerminateLocked terminates instance i of group g on Auto
// Scaling's decision: held by the group's terminating hook if it has one,
// else shut down now.
func (s *Server) autoScalingTerminateLocked(g *group, i *instance) {
	if len(g.hooks) == 0 || i.State != StateRunning {
		s.shutDownLocked(i, "Client.UserInitiatedShutdown")
		return
	}
	h := g.hooks[0]
	i.LifecycleState = LifecycleTerminatingWait
	i.hold = &hookWait{hook: h.Name, token: uuid(s.nextID() ^ 0x70c3), deadline: s.clock.Now().Add(h.HeartbeatTimeout)}
	s.emitLocked("aws.autoscaling", DetailTypeTerminateHook, []string{g.arn}, map[string]string{
		"LifecycleActionToken": i.hold.token,
		"AutoScalingGroupName": g.Name,
		"LifecycleHookName":    h.Name,
		"EC2InstanceId":        i.ID,
		"LifecycleTransition":  TransitionTerminating,
		"Origin":               "AutoScalingGroup",
		"Destination":          "EC2",
	})
}

// proceedLocked ends instance i's wait: it shuts down.
func (s *Server) proceedLocked(i *instance) {
	i.hold = nil
	s.shutDownLocked(i, "Client.UserInitiatedShutdown")
	i.LifecycleState = LifecycleTerminatingProceed
}

// stepHoldsLocked lets held instances whose heartbeat timeout passed go on,
// and terminates interrupted spot instances whose warning ran out; it
// returns the earliest time something is due, zero if none.
func (s *Server) stepHoldsLocked(now time.Time) time.Time {
	var next time.Time
	due := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	for _, id := range s.instanceOrder {
		i := s.instances[id]
		// EC2 takes an interrupted spot instance back at its time, held
		// by a hook or not.
		switch {
		case !i.interruptAt.IsZero() && i.State == StateRunning && !now.Before(i.interruptAt):
			i.interruptAt = time.Time{}
			s.shutDownLocked(i, "Server.SpotInstanceTermination")
			continue
		case !i.interruptAt.IsZero() && i.State == StateRunning:
			due(i.interruptAt)
		}
		switch {
		case i.hold != nil && !now.Before(i.hold.deadline):
			s.proceedLocked(i)
		case i.hold != nil:
			due(i.hold.deadline)
		}
	}
	return next
}

// HookWaiting reports whether instance id is held by a lifecycle hook.
func (s *Server) HookWaiting(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, ok := s.instances[id]
	return ok && i.hold != nil
}

func (s *Server) putLifecycleHook(q query) (any, *APIError) {
	name, hook := q.get("AutoScalingGroupName"), q.get("LifecycleHookName")
	if name == "" || hook == "" {
		return nil, validationError("AutoScalingGroupName and LifecycleHookName are required.")
	}
	h := LifecycleHook{Name: hook, Transition: q.get("LifecycleTransition"), DefaultResult: q.get("DefaultResult")}
	if v := q.get("HeartbeatTimeout"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 30 || n > 7200 {
			return nil, validationError("Value '%s' at 'heartbeatTimeout' failed to satisfy constraint: Member must have value between 30 and 7200", v)
		}
		h.HeartbeatTimeout = time.Duration(n) * time.Second
	}
	if h.DefaultResult != "" && h.DefaultResult != "CONTINUE" && h.DefaultResult != "ABANDON" {
		return nil, validationError("Valid values for DefaultResult are CONTINUE and ABANDON.")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.groups[name]; !ok {
		return nil, validationError("AutoScalingGroup name not found - AutoScalingGroup %s not found", name)
	}
	if err := s.putHookLocked(name, h); err != nil {
		return nil, validationError("%v", err)
	}
	return struct{}{}, nil // an empty PutLifecycleHookResult, as the SDK wants
}

type wireHook struct {
	LifecycleHookName    string `xml:"LifecycleHookName"`
	AutoScalingGroupName string `xml:"AutoScalingGroupName"`
	LifecycleTransition  string `xml:"LifecycleTransition"`
	HeartbeatTimeout     int    `xml:"HeartbeatTimeout"`
	GlobalTimeout        int    `xml:"GlobalTimeout"`
	DefaultResult        string `xml:"DefaultResult"`
}

type describeLifecycleHooksResult struct {
	LifecycleHooks memberList[wireHook] `xml:"LifecycleHooks"`
}

func (s *Server) describeLifecycleHooks(q query) (any, *APIError) {
	name := q.get("AutoScalingGroupName")
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.groups[name]
	if !ok {
		return nil, validationError("AutoScalingGroup name not found - AutoScalingGroup %s not found", name)
	}
	var out []wireHook
	for _, h := range g.hooks {
		hb := int(h.HeartbeatTimeout / time.Second)
		out = append(out, wireHook{h.Name, g.Name, h.Transition, hb, min(100*hb, 172800), h.DefaultResult})
	}
	return describeLifecycleHooksResult{memberList[wireHook]{out}}, nil
}

// heldInstance finds the instance a lifecycle-action call names, by ID or
// token; the caller holds s.mu.
func (s *Server) heldInstance(q query) (*instance, *APIError) {
	name, hook := q.get("AutoScalingGroupName"), q.get("LifecycleHookName")
	id, token := q.get("InstanceId"), q.get("LifecycleActionToken")
	if name == "" || hook == "" || (id == "" && token == "") {
		return nil, validationError("AutoScalingGroupName, LifecycleHookName and InstanceId or LifecycleActionToken are required.")
	}
	for _, iid := range s.instanceOrder {
		i := s.instances[iid]
		if i.hold == nil || i.Group != name || i.hold.hook != hook {
			continue
		}
		if (id == "" || id == i.ID) && (token == "" || token == i.hold.token) {
			return i, nil
		}
	}
	return nil, validationError("No active Lifecycle Action found with instance ID %s", id)
}

func (s *Server) completeLifecycleAction(q query) (any, *APIError) {
	if r := q.get("LifecycleActionResult"); r != "CONTINUE" && r != "ABANDON" {
		return nil, validationError("Valid values for LifecycleActionResult are CONTINUE and ABANDON.")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	i, err := s.heldInstance(q)
	if err != nil {
		return nil, err
	}
	s.proceedLocked(i)
	return struct{}{}, nil
}

func (s *Server) recordLifecycleActionHeartbeat(q query) (any, *APIError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, err := s.heldInstance(q)
	if err != nil {
		return nil, err
	}
	for _, h := range s.groups[i.Group].hooks {
		if h.Name == i.hold.hook {
			i.hold.deadline = s.clock.Now().Add(h.HeartbeatTimeout)
		}
	}
	return struct{}{}, nil
}
