package queue

import (
	"errors"
	"slices"
	"testing"
	"time"

	"spotter.dev/spotter/internal/agent/notice"
)

func TestParse(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	envelope := func(source, detailType, detail string) string {
		return `{"version":"0","id":"ev-1","detail-type":"` + detailType + `","source":"` + source + `","account":"123456789012","time":"2030-01-02T03:04:05Z","region":"us-east-1","resources":[],"detail":` + detail + `}`
	}
	for _, c := range []struct {
		name, body string
		want       Event
		malformed  bool
	}{
		{name: "spot warning", body: envelope("aws.ec2", "EC2 Spot Instance Interruption Warning", `{"instance-id":"i-1","instance-action":"terminate"}`),
			want: Event{Kind: KindNotice, ID: "ev-1", InstanceID: "i-1", Notice: notice.Notice{Kind: notice.Termination, ID: "spot/instance-action", Action: "terminate", Deadline: at.Add(2 * time.Minute)}}},
		{name: "rebalance", body: envelope("aws.ec2", "EC2 Instance Rebalance Recommendation", `{"instance-id":"i-1"}`),
			want: Event{Kind: KindNotice, ID: "ev-1", InstanceID: "i-1", Notice: notice.Notice{Kind: notice.Rebalance, ID: "rebalance", Action: "rebalance"}}},
		{name: "stopping", body: envelope("aws.ec2", "EC2 Instance State-change Notification", `{"instance-id":"i-1","state":"stopping"}`),
			want: Event{Kind: KindNotice, ID: "ev-1", InstanceID: "i-1", Notice: notice.Notice{Kind: notice.Termination, ID: "ec2/state", Action: "stopping", Deadline: at}}},
		{name: "terminated", body: envelope("aws.ec2", "EC2 Instance State-change Notification", `{"instance-id":"i-1","state":"terminated"}`),
			want: Event{Kind: KindTerminated, ID: "ev-1", InstanceID: "i-1"}},
		{name: "stopped", body: envelope("aws.ec2", "EC2 Instance State-change Notification", `{"instance-id":"i-1","state":"stopped"}`),
			want: Event{Kind: KindIgnored, ID: "ev-1", InstanceID: "i-1"}},
		{name: "running", body: envelope("aws.ec2", "EC2 Instance State-change Notification", `{"instance-id":"i-1","state":"running"}`),
			want: Event{Kind: KindIgnored, ID: "ev-1", InstanceID: "i-1"}},
		{name: "scheduled change", body: envelope("aws.health", "AWS Health Event", `{"service":"EC2","eventTypeCategory":"scheduledChange","eventTypeCode":"AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED","eventArn":"arn:h","startTime":"Thu, 03 Jan 2030 00:00:00 GMT","affectedEntities":[{"entityValue":"i-1"}]}`),
			want: Event{Kind: KindNotice, ID: "ev-1", InstanceID: "i-1", Notice: notice.Notice{Kind: notice.Maintenance, ID: "arn:h", Action: "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED", Deadline: time.Date(2030, 1, 3, 0, 0, 0, 0, time.UTC)}}},
		{name: "scheduled change closed", body: envelope("aws.health", "AWS Health Event", `{"service":"EC2","statusCode":"closed","eventTypeCategory":"scheduledChange","eventTypeCode":"AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED","eventArn":"arn:h","startTime":"Thu, 03 Jan 2030 00:00:00 GMT","affectedEntities":[{"entityValue":"i-1"},{"entityValue":"i-2"}]}`),
			want: Event{Kind: KindNotice, ID: "ev-1", InstanceID: "i-1", MoreInstances: []string{"i-2"}, Notice: notice.Notice{Kind: notice.Maintenance, ID: "arn:h", Action: "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED", Deadline: time.Date(2030, 1, 3, 0, 0, 0, 0, time.UTC), Ended: true}}},
		{name: "another service's health event", body: envelope("aws.health", "AWS Health Event", `{"service":"RDS","eventTypeCategory":"scheduledChange"}`),
			want: Event{Kind: KindIgnored, ID: "ev-1"}},
		{name: "lifecycle action", body: envelope("aws.autoscaling", "EC2 Instance-terminate Lifecycle Action", `{"LifecycleActionToken":"tok","AutoScalingGroupName":"g","LifecycleHookName":"h","EC2InstanceId":"i-1","LifecycleTransition":"autoscaling:EC2_INSTANCE_TERMINATING"}`),
			want: Event{Kind: KindLifecycle, ID: "ev-1", InstanceID: "i-1", Notice: notice.Notice{Kind: notice.Termination, ID: "autoscaling/target-lifecycle-state", Action: "Terminated"},
				Lifecycle: LifecycleAction{Group: "g", Hook: "h", Token: "tok", InstanceID: "i-1"}}},
		{name: "hook notification", body: `{"Origin":"AutoScalingGroup","Service":"AWS Auto Scaling","Time":"2030-01-02T03:04:05Z","LifecycleActionToken":"tok","AutoScalingGroupName":"g","LifecycleHookName":"h","EC2InstanceId":"i-1","LifecycleTransition":"autoscaling:EC2_INSTANCE_TERMINATING"}`,
			want: Event{Kind: KindLifecycle, ID: "tok", InstanceID: "i-1", Notice: notice.Notice{Kind: notice.Termination, ID: "autoscaling/target-lifecycle-state", Action: "Terminated"},
				Lifecycle: LifecycleAction{Group: "g", Hook: "h", Token: "tok", InstanceID: "i-1"}}},
		{name: "test notification", body: `{"Event":"autoscaling:TEST_NOTIFICATION","RequestId":"r-1"}`, want: Event{Kind: KindIgnored, ID: "r-1"}},
		{name: "launching hook", body: `{"LifecycleActionToken":"tok","AutoScalingGroupName":"g","LifecycleHookName":"h","EC2InstanceId":"i-1","LifecycleTransition":"autoscaling:EC2_INSTANCE_LAUNCHING"}`,
			want: Event{Kind: KindIgnored, ID: "tok"}},
		{name: "not JSON", body: "hello", malformed: true},
		{name: "JSON of nothing known", body: `{"a":1}`, malformed: true},
		{name: "no instance ID", body: envelope("aws.ec2", "EC2 Spot Instance Interruption Warning", `{"instance-action":"terminate"}`), malformed: true},
		{name: "bad time", body: `{"version":"0","id":"x","detail-type":"EC2 Instance Rebalance Recommendation","source":"aws.ec2","time":"yesterday","detail":{"instance-id":"i-1"}}`, malformed: true},
		{name: "hook without token", body: `{"AutoScalingGroupName":"g","LifecycleHookName":"h","EC2InstanceId":"i-1","LifecycleTransition":"autoscaling:EC2_INSTANCE_TERMINATING"}`, malformed: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := Parse(c.body, at)
			if c.malformed {
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("Parse = %+v, %v; want ErrMalformed", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Kind != c.want.Kind || got.ID != c.want.ID || got.InstanceID != c.want.InstanceID || got.Lifecycle != c.want.Lifecycle || !slices.Equal(got.MoreInstances, c.want.MoreInstances) {
				t.Errorf("Parse = %+v, want %+v", got, c.want)
			}
			n, w := got.Notice, c.want.Notice
			if w.Kind != "" && (n.Cloud != notice.CloudAWS || n.Kind != w.Kind || n.ID != w.ID || n.Action != w.Action || !n.Deadline.Equal(w.Deadline) || n.Ended != w.Ended) {
				t.Errorf("notice = %+v, want %+v", n, w)
			}
		})
	}
}
