package queue

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"spotter.dev/spotter/internal/emulator/awsapi"
	"spotter.dev/spotter/internal/testenv"
	tu "spotter.dev/spotter/internal/testutil"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// A lifecycle action is kept alive with heartbeats, and its message
// invisible, while its node still has a pod to move; the action is completed
// and the message deleted as soon as it has none: through aws-sdk-go-v2
// against the Auto Scaling and SQS emulator, the node and pod in a real
// apiserver.
func TestLifecycleActionHeartbeatsUntilDrained(t *testing.T) {
	env := testenv.StartAPIServer(t)
	ctx := testenv.Context(t, time.Minute)
	emu := awsapi.New(awsapi.Options{})
	srv := httptest.NewServer(emu)
	t.Cleanup(srv.Close)
	lt, err := emu.CreateLaunchTemplate("spot", awsapi.LaunchTemplateData{InstanceType: "m5.large", Spot: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := emu.CreateGroup(awsapi.Group{Name: "g", MaxSize: 1, DesiredCapacity: 1, AvailabilityZones: []string{"us-east-1a"}, LaunchTemplate: &awsapi.LaunchTemplateRef{ID: lt}}); err != nil {
		t.Fatal(err)
	}
	emu.Step()
	emu.Step() // launched, then running
	if err := emu.PutLifecycleHook("g", awsapi.LifecycleHook{Name: "drain", Transition: awsapi.TransitionTerminating, HeartbeatTimeout: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if err := emu.UpdateGroupSize("g", 0, 1, 0); err != nil {
		t.Fatal(err)
	}
	emu.Step()
	id := emu.Instances()[0].ID
	if !emu.HookWaiting(id) {
		t.Fatal("the scale-in is not held by the hook")
	}

	if _, err := env.Client.CoreV1().Nodes().Create(ctx, tu.Node("spot-1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := tu.Pod("web", tu.OnNode("spot-1"))
	if _, err := env.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sdk, err := config.LoadDefaultConfig(ctx, config.WithRegion("us-east-1"), config.WithBaseEndpoint(srv.URL),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", "")),
		config.WithSharedConfigFiles([]string{}), config.WithSharedCredentialsFiles([]string{}))
	if err != nil {
		t.Fatal(err)
	}
	sdk.HTTPClient = awsapi.NewHTTPClient()
	sqsc := sqs.NewFromConfig(sdk)
	url := *must(sqsc.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("q")})).QueueUrl
	if _, err := sqsc.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("the lifecycle action")}); err != nil {
		t.Fatal(err)
	}
	got := must(sqsc.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url}))
	if len(got.Messages) != 1 {
		t.Fatalf("received %v", got.Messages)
	}
	reader, err := client.New(env.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := New(Options{QueueURL: url, SQS: sqsc, AutoScaling: autoscaling.NewFromConfig(sdk), Kube: env.Client, Nodes: reader, Config: v1alpha1.NewDefaults(),
		HeartbeatInterval: 50 * time.Millisecond, CheckInterval: 10 * time.Millisecond})
	ev := Event{Kind: KindLifecycle, ID: "ev-1", InstanceID: id, Lifecycle: LifecycleAction{Group: "g", Hook: "drain", InstanceID: id}}
	c.hold(ctx, ev, "spot-1", time.Now().Add(time.Minute), *got.Messages[0].MessageId, *got.Messages[0].ReceiptHandle)
	testenv.Eventually(t, 10*time.Second, "two heartbeats while the pod is on the node", func(context.Context) (bool, string, error) {
		return emu.Calls("RecordLifecycleActionHeartbeat") >= 2 && emu.Calls("ChangeMessageVisibility") >= 2, "", nil
	})
	if !emu.HookWaiting(id) || emu.Calls("CompleteLifecycleAction") != 0 || len(emu.QueueMessages("q")) != 1 {
		t.Fatal("the action was completed, or its message deleted, with a pod still on the node")
	}
	if err := env.Client.CoreV1().Pods("default").Delete(ctx, "web", metav1.DeleteOptions{GracePeriodSeconds: aws.Int64(0)}); err != nil {
		t.Fatal(err)
	}
	c.wg.Wait()
	if emu.HookWaiting(id) {
		t.Error("the action was not completed once the node was empty")
	}
	if m := emu.QueueMessages("q"); len(m) != 0 {
		t.Errorf("the message is still on the queue once its action was completed: %v", m)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
