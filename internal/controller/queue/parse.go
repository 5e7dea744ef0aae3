package queue

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	awsnotice "spotter.dev/spotter/internal/agent/aws"
	"spotter.dev/spotter/internal/agent/notice"
)

// Kind says what a message asks of Spotter.
type Kind string

// Kinds of messages.
const (
	// KindNotice is an interruption notice for an instance's node: handled
	// as the agent handles a notice (Event.Notice).
	KindNotice Kind = "notice"
	// KindLifecycle is an Auto Scaling terminating lifecycle action: the node
	// is drained, then the action completed (Event.Lifecycle).
	KindLifecycle Kind = "lifecycle"
	// KindTerminated says the instance is gone: its Node is deleted.
	KindTerminated Kind = "terminated"
	// KindIgnored is a well-formed message that asks nothing (a test
	// notification, a state change to running, another service's health
	// event).
	KindIgnored Kind = "ignored"
)

// Event is what one queue message says.
type Event struct {
	Kind Kind
	// ID names the message's event: EventBridge's event ID, or the lifecycle
	// action's token for a hook's own notification. Repeats of an ID are
	// duplicates (EventBridge and SQS deliver at least once).
	ID string
	// InstanceID is the EC2 instance the event is about; MoreInstances the
	// others, for an AWS Health event that names several.
	InstanceID    string
	MoreInstances []string
	// Notice is the notice to handle (KindNotice, KindLifecycle).
	Notice notice.Notice
	// Lifecycle is the action to complete (KindLifecycle).
	Lifecycle LifecycleAction
	// Detail says what the event is, for logs.
	Detail string
}

// LifecycleAction names an Auto Scaling lifecycle action.
type LifecycleAction struct {
	Group, Hook, Token, InstanceID string
}

// Event sources and detail types, from the EC2, Auto Scaling and AWS Health
// user guides ("Amazon EventBridge events" of each).
const (
	sourceEC2         = "aws.ec2"
	sourceAutoScaling = "aws.autoscaling"
	sourceHealth      = "aws.health"

	typeSpotWarning   = "EC2 Spot Instance Interruption Warning"
	typeRebalance     = "EC2 Instance Rebalance Recommendation"
	typeStateChange   = "EC2 Instance State-change Notification"
	typeHealth        = "AWS Health Event"
	typeTerminateHook = "EC2 Instance-terminate Lifecycle Action"

	transitionTerminating = "autoscaling:EC2_INSTANCE_TERMINATING"
	testNotification      = "autoscaling:TEST_NOTIFICATION"
)

// SpotNotice is how long before the instance goes EC2 sends a spot
// interruption warning ("Spot Instance interruption notices", EC2 User
// Guide): the notice's deadline is the event's time plus this.
const SpotNotice = 2 * time.Minute

// ErrMalformed marks a message that is not an event Spotter reads.
var ErrMalformed = errors.New("malformed message")

// envelope is EventBridge's event.
type envelope struct {
	Version    string          `json:"version"`
	ID         string          `json:"id"`
	DetailType string          `json:"detail-type"`
	Source     string          `json:"source"`
	Time       string          `json:"time"`
	Resources  []string        `json:"resources"`
	Detail     json.RawMessage `json:"detail"`
}

// hookNotification is a lifecycle hook's notification sent to the queue by
// Auto Scaling itself (a hook with a notification target, no EventBridge).
type hookNotification struct {
	Event                string `json:"Event"`
	LifecycleTransition  string `json:"LifecycleTransition"`
	LifecycleActionToken string `json:"LifecycleActionToken"`
	AutoScalingGroupName string `json:"AutoScalingGroupName"`
	LifecycleHookName    string `json:"LifecycleHookName"`
	EC2InstanceID        string `json:"EC2InstanceId"`
	Time                 string `json:"Time"`
	RequestID            string `json:"RequestId"`
}

// Parse reads one message body: an EventBridge event of the kinds listed in
// docs/queue.md, or a lifecycle hook's own notification. received is when
// the message was received, the deadline's base when the event has no time.
// An error wraps ErrMalformed.
func Parse(body string, received time.Time) (Event, error) {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &probe); err != nil {
		return Event{}, fmt.Errorf("%w: not a JSON object: %w", ErrMalformed, err)
	}
	if _, ok := probe["detail-type"]; ok {
		return parseEnvelope(body, received)
	}
	if _, ok := probe["LifecycleTransition"]; ok {
		return parseHookNotification(body, received)
	}
	if _, ok := probe["Event"]; ok {
		var n hookNotification
		if err := json.Unmarshal([]byte(body), &n); err == nil && n.Event == testNotification {
			return Event{Kind: KindIgnored, ID: n.RequestID, Detail: "Auto Scaling test notification"}, nil
		}
	}
	return Event{}, fmt.Errorf("%w: neither an EventBridge event nor a lifecycle hook notification", ErrMalformed)
}

func parseEnvelope(body string, received time.Time) (Event, error) {
	var e envelope
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		return Event{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if e.ID == "" || len(e.Detail) == 0 {
		return Event{}, fmt.Errorf("%w: an EventBridge event without id or detail", ErrMalformed)
	}
	at := received
	if e.Time != "" {
		t, err := time.Parse(time.RFC3339, e.Time)
		if err != nil {
			return Event{}, fmt.Errorf("%w: time %q: %w", ErrMalformed, e.Time, err)
		}
		at = t
	}
	ev := Event{ID: e.ID, Detail: e.Source + " " + e.DetailType}
	switch {
	case e.Source == sourceEC2 && e.DetailType == typeSpotWarning:
		var d struct {
			InstanceID string `json:"instance-id"`
			Action     string `json:"instance-action"`
		}
		if err := detail(e, &d); err != nil {
			return Event{}, err
		}
		if err := instanceID(d.InstanceID); err != nil {
			return Event{}, err
		}
		ev.Kind, ev.InstanceID = KindNotice, d.InstanceID
		// The ID the agent gives the same notice read from the metadata
		// service, so that the node's record names one event.
		ev.Notice = notice.Notice{Cloud: notice.CloudAWS, Kind: notice.Termination, ID: awsnotice.InstanceActionID, Action: d.Action,
			Deadline: at.Add(SpotNotice), Detail: fmt.Sprintf("EC2 spot interruption warning for %s (%s) at %s, from the interruption queue", d.InstanceID, d.Action, at.Format(time.RFC3339))}
	case e.Source == sourceEC2 && e.DetailType == typeRebalance:
		var d struct {
			InstanceID string `json:"instance-id"`
		}
		if err := detail(e, &d); err != nil {
			return Event{}, err
		}
		if err := instanceID(d.InstanceID); err != nil {
			return Event{}, err
		}
		ev.Kind, ev.InstanceID = KindNotice, d.InstanceID
		ev.Notice = notice.Notice{Cloud: notice.CloudAWS, Kind: notice.Rebalance, ID: awsnotice.RebalanceID, Action: "rebalance",
			Detail: fmt.Sprintf("EC2 rebalance recommendation for %s at %s, from the interruption queue", d.InstanceID, at.Format(time.RFC3339))}
	case e.Source == sourceEC2 && e.DetailType == typeStateChange:
		var d struct {
			InstanceID string `json:"instance-id"`
			State      string `json:"state"`
		}
		if err := detail(e, &d); err != nil {
			return Event{}, err
		}
		if err := instanceID(d.InstanceID); err != nil {
			return Event{}, err
		}
		ev.InstanceID = d.InstanceID
		ev.Detail = "EC2 instance " + d.InstanceID + " " + d.State
		switch d.State {
		case "stopping", "shutting-down":
			// Going now: what can still leave, leaves (the deadline is
			// the event's time; the drain gives its pods a second).
			ev.Kind = KindNotice
			ev.Notice = notice.Notice{Cloud: notice.CloudAWS, Kind: notice.Termination, ID: "ec2/state", Action: d.State, Deadline: at,
				Detail: fmt.Sprintf("EC2 instance %s is %s (%s), from the interruption queue", d.InstanceID, d.State, at.Format(time.RFC3339))}
		case "terminated":
			ev.Kind = KindTerminated
		default:
			ev.Kind = KindIgnored
		}
	case e.Source == sourceHealth && e.DetailType == typeHealth:
		var d struct {
			Service   string `json:"service"`
			Status    string `json:"statusCode"`
			Category  string `json:"eventTypeCategory"`
			Code      string `json:"eventTypeCode"`
			EventARN  string `json:"eventArn"`
			StartTime string `json:"startTime"`
			Entities  []struct {
				Value string `json:"entityValue"`
			} `json:"affectedEntities"`
		}
		if err := detail(e, &d); err != nil {
			return Event{}, err
		}
		if d.Service != "EC2" || d.Category != "scheduledChange" {
			ev.Kind = KindIgnored
			return ev, nil
		}
		if len(d.Entities) == 0 {
			return Event{}, fmt.Errorf("%w: a scheduled change without affected entities", ErrMalformed)
		}
		for i, ent := range d.Entities {
			if err := instanceID(ent.Value); err != nil {
				return Event{}, err
			}
			if i > 0 {
				ev.MoreInstances = append(ev.MoreInstances, ent.Value)
			}
		}
		start, err := time.Parse(time.RFC1123, d.StartTime)
		if err != nil {
			return Event{}, fmt.Errorf("%w: startTime %q: %w", ErrMalformed, d.StartTime, err)
		}
		ev.Kind, ev.InstanceID = KindNotice, d.Entities[0].Value
		// An update of the event (statusCode upcoming, open, closed) has the
		// same ARN: closed ends it, lifting what it did.
		ev.Notice = notice.Notice{Cloud: notice.CloudAWS, Kind: notice.Maintenance, ID: cmp.Or(d.EventARN, e.ID), Action: d.Code, Deadline: start,
			Ended:  d.Status == "closed",
			Detail: fmt.Sprintf("AWS Health %s (%s) starting %s, from the interruption queue", d.Code, cmp.Or(d.Status, "open"), start.Format(time.RFC3339))}
	case e.Source == sourceAutoScaling && e.DetailType == typeTerminateHook:
		var d hookNotification
		if err := detail(e, &d); err != nil {
			return Event{}, err
		}
		return lifecycleEvent(e.ID, d, at)
	default:
		ev.Kind = KindIgnored
	}
	return ev, nil
}

func parseHookNotification(body string, received time.Time) (Event, error) {
	var n hookNotification
	if err := json.Unmarshal([]byte(body), &n); err != nil {
		return Event{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	at := received
	if n.Time != "" {
		if t, err := time.Parse(time.RFC3339, n.Time); err == nil {
			at = t
		}
	}
	return lifecycleEvent(n.LifecycleActionToken, n, at)
}

// lifecycleEvent is a terminating lifecycle action for the instance:
// handled as the agent handles Auto Scaling's target lifecycle state
// Terminated, which the same termination shows in the metadata service.
func lifecycleEvent(id string, n hookNotification, at time.Time) (Event, error) {
	if n.LifecycleTransition != transitionTerminating {
		return Event{Kind: KindIgnored, ID: id, Detail: "lifecycle transition " + n.LifecycleTransition}, nil
	}
	if n.LifecycleActionToken == "" || n.AutoScalingGroupName == "" || n.LifecycleHookName == "" {
		return Event{}, fmt.Errorf("%w: a lifecycle action without token, group or hook", ErrMalformed)
	}
	if err := instanceID(n.EC2InstanceID); err != nil {
		return Event{}, err
	}
	return Event{
		Kind: KindLifecycle, ID: id, InstanceID: n.EC2InstanceID,
		Notice: notice.Notice{Cloud: notice.CloudAWS, Kind: notice.Termination, ID: awsnotice.TargetLifecycleStateID, Action: "Terminated",
			Detail: fmt.Sprintf("Auto Scaling terminates %s (group %s, hook %s) at %s, from the interruption queue", n.EC2InstanceID, n.AutoScalingGroupName, n.LifecycleHookName, at.Format(time.RFC3339))},
		Lifecycle: LifecycleAction{Group: n.AutoScalingGroupName, Hook: n.LifecycleHookName, Token: n.LifecycleActionToken, InstanceID: n.EC2InstanceID},
		Detail:    "Auto Scaling lifecycle action " + n.LifecycleHookName + " on " + n.EC2InstanceID,
	}, nil
}

// detail decodes e's detail into v.
func detail(e envelope, v any) error {
	if err := json.Unmarshal(e.Detail, v); err != nil {
		return fmt.Errorf("%w: the detail of %q: %w", ErrMalformed, e.DetailType, err)
	}
	return nil
}

// instanceID checks that id looks like an EC2 instance ID.
func instanceID(id string) error {
	if !strings.HasPrefix(id, "i-") || len(id) < 3 || strings.ContainsAny(id, "/ ") {
		return fmt.Errorf("%w: %q is not an EC2 instance ID", ErrMalformed, id)
	}
	return nil
}
