package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"spotter.dev/spotter/internal/cli"
	awsprovider "spotter.dev/spotter/internal/cloud/aws"
	"spotter.dev/spotter/internal/controller/migrator"
	"spotter.dev/spotter/internal/emulator/awsapi"
	"spotter.dev/spotter/internal/lab"
	"spotter.dev/spotter/internal/plan"
	"spotter.dev/spotter/internal/testenv"
	tu "spotter.dev/spotter/internal/testutil"
)

// awsLab is the lab with the EC2 and Auto Scaling emulator behind it: each
// instance the emulator launches becomes a kwok Node with the instance's
// providerID and labels, and goes when the instance terminates. Two groups of
// cluster "lab": od (3 on-demand m5.xlarge) and spot (empty, all spot).
type awsLab struct {
	// readyTimeout is migrator.nodeReadyTimeout; empty: the default (10m).
	readyTimeout string
	env          *testenv.Env
	emu          *awsapi.Server
	dir          string
	// silent is how many more spot instances launch without a Node;
	// silentID is the last such instance's ID.
	silent   atomic.Int32
	silentID atomic.Value
	// keepNodes leaves the Node of a terminated instance (no cloud
	// controller manager deletes it).
	keepNodes atomic.Bool
}

func startAWSLab(t *testing.T) *awsLab {
	t.Helper()
	env := testenv.StartLab(t)
	ctx := testenv.Context(t, 5*time.Minute)
	emu := awsapi.New(awsapi.Options{LaunchDelay: 2 * time.Second, TerminateDelay: time.Second})
	srv := httptest.NewServer(emu)
	t.Cleanup(srv.Close)
	l := &awsLab{env: env, emu: emu, dir: t.TempDir(), readyTimeout: "20s"}
	emu.OnLaunch(func(i awsapi.Instance) {
		if i.Spot && l.silent.Add(-1) >= 0 {
			l.silentID.Store(i.ID)
			return // an instance whose kubelet never registers
		}
		capType := "ON_DEMAND"
		if i.Spot {
			capType = "SPOT"
		}
		err := lab.CreateNodes(ctx, env.Client, lab.NodeSpec{Name: nodeName(i.ID), CPU: "4", Memory: "16Gi", Zone: i.AvailabilityZone,
			InstanceType: i.InstanceType, ProviderID: "aws:///" + i.AvailabilityZone + "/" + i.ID,
			Labels: map[string]string{awsprovider.CapacityTypeLabel: capType}})
		if err != nil && ctx.Err() == nil {
			t.Errorf("creating the Node of instance %s: %v", i.ID, err)
		}
	})
	emu.OnTerminate(func(i awsapi.Instance) {
		if l.keepNodes.Load() {
			return
		}
		_ = env.Client.CoreV1().Nodes().Delete(ctx, nodeName(i.ID), metav1.DeleteOptions{})
	})
	go emu.Run(ctx, 200*time.Millisecond)

	od, err := emu.CreateLaunchTemplate("od", awsapi.LaunchTemplateData{InstanceType: "m5.xlarge"})
	if err != nil {
		t.Fatal(err)
	}
	spot, err := emu.CreateLaunchTemplate("spot", awsapi.LaunchTemplateData{InstanceType: "m5.xlarge", Spot: true})
	if err != nil {
		t.Fatal(err)
	}
	tags := map[string]string{awsprovider.EnabledTag: "true", awsprovider.ClusterTagPrefix + "lab": "owned"}
	for _, g := range []awsapi.Group{
		{Name: "od", MaxSize: 3, DesiredCapacity: 3, AvailabilityZones: []string{"us-east-1a"}, Tags: tags, LaunchTemplate: &awsapi.LaunchTemplateRef{ID: od}},
		{Name: "spot", MaxSize: 6, AvailabilityZones: []string{"us-east-1a"}, Tags: tags, LaunchTemplate: &awsapi.LaunchTemplateRef{ID: spot}},
		// A group Spotter leaves out (and says so): a launch configuration.
		{Name: "legacy", MaxSize: 3, AvailabilityZones: []string{"us-east-1a"}, Tags: tags, LaunchConfigurationName: "legacy-lc"},
	} {
		if err := emu.CreateGroup(g); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, time.Minute, "three on-demand nodes Ready", func(ctx context.Context) (bool, string, error) {
		n := l.readyNodes(ctx, t, "ON_DEMAND")
		return n == 3, fmt.Sprintf("%d ready", n), nil
	})
	for _, w := range []string{"web", "api"} {
		d := tu.Deployment(w, 3, tu.CPU("1500m"), tu.GracePeriod(1), tu.AntiAffinity(w, "kubernetes.io/hostname"))
		if _, err := env.Client.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := env.Client.PolicyV1().PodDisruptionBudgets("default").Create(ctx, tu.PDB("web", "web", tu.MaxUnavailable(1)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitForPodsRunning("default", "app=web", 3, time.Minute)
	env.WaitForPodsRunning("default", "app=api", 3, time.Minute)
	waitPDBsComputed(ctx, t, env)

	// The controller finds AWS through the SDK's standard variables.
	for k, v := range map[string]string{
		"AWS_ENDPOINT_URL": srv.URL, "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret",
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
	} {
		t.Setenv(k, v)
	}
	return l
}

func nodeName(instanceID string) string { return "ip-" + strings.TrimPrefix(instanceID, "i-") }

// readyNodes counts the Ready nodes of a capacity type (SPOT or ON_DEMAND).
func (l *awsLab) readyNodes(ctx context.Context, t *testing.T, capType string) int {
	t.Helper()
	ready, err := readyNodes(ctx, l.env, awsprovider.CapacityTypeLabel+"="+capType)
	if err != nil {
		t.Fatal(err)
	}
	return ready
}

// start runs `spotter controller` with the migrator on the aws provider.
func (l *awsLab) start(t *testing.T) {
	t.Helper()
	config := filepath.Join(l.dir, "spotter.yaml")
	body := `apiVersion: spotter.dev/v1alpha1
kind: SpotterConfiguration
cloud:
  provider: aws
  aws:
    clusterName: lab
migrator:
  enabled: true
  schedule: "@every 5s"
{{nodeReadyTimeout}}  spotUnavailableBackoff: 1m
rescheduler:
  enabled: false
drain:
  evictionBackoff: 200ms
  maxEvictionBackoff: 1s
pricing:
  currency: USD
  instanceTypes:
    m5.xlarge: {spot: 0.07} # on-demand: the shipped table's us-east-1 price, 0.192
`
	body = strings.Replace(body, "{{nodeReadyTimeout}}", nodeReadyTimeoutLine(l.readyTimeout), 1)
	if err := os.WriteFile(config, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	testenv.StartSpotter(t, "controller", "controller", "--config", config, "--kubeconfig", l.env.Kubeconfig,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--leader-elect=false")
}

// The migrator replaces the on-demand Auto Scaling group's instances by spot
// ones, make-before-break, through the AWS SDK against the emulator: every pod
// ends on spot, the on-demand group is at 0 and its instances terminated, the
// budget held, and no node is left marked.
func TestAWSMigratorReplacesOnDemandBySpot(t *testing.T) {
	l := startAWSLab(t)
	lm := &migratorLab{env: l.env}
	stopWatch := lm.watch(t)
	l.start(t)
	testenv.Eventually(t, 3*time.Minute, "every pod Running on spot, the on-demand group empty", func(ctx context.Context) (bool, string, error) {
		onSpot, err := podsOnSpot(ctx, l.env, "ip-", awsprovider.CapacityTypeLabel, "SPOT")
		if err != nil {
			return false, "", err
		}
		od, _ := l.emu.GroupStatus("od")
		sp, _ := l.emu.GroupStatus("spot")
		return onSpot == 6 && od.DesiredCapacity == 0 && len(od.Instances) == 0,
			fmt.Sprintf("%d pods on spot; od desired %d with %d instances, spot desired %d; %s", onSpot, od.DesiredCapacity, len(od.Instances), sp.DesiredCapacity, podsByNode(ctx, t, l.env)), nil
	})
	worst, _ := stopWatch()
	if worst > 1 {
		t.Errorf("%d web pods unavailable at once; the PDB allows 1", worst)
	}
	if sp, _ := l.emu.GroupStatus("spot"); sp.DesiredCapacity != 3 {
		t.Errorf("spot group desired %d, want 3 (one per replaced node)", sp.DesiredCapacity)
	}
	if n := l.emu.Calls("DescribeInstances"); n > 20 {
		t.Errorf("%d DescribeInstances calls: instances must be looked up in batches and cached", n)
	}
	assertNoMarks(t, l.env)
}

// Auto Scaling refuses the first request for spot capacity with AccessDenied
// (a role without autoscaling:SetDesiredCapacity on the group): an error of
// the group, not a shortage. The migrator says so (SpotterSpotRequestFailed),
// does not back the group off (no SpotterSpotUnavailable), asks again at its
// next run, and replaces every on-demand node.
func TestAWSRefusedRequestIsNoShortage(t *testing.T) {
	l := startAWSLab(t)
	l.emu.FailNext("SetDesiredCapacity", awsapi.APIError{Status: http.StatusForbidden, Code: "AccessDenied",
		Message: "User: arn:aws:sts::123456789012:assumed-role/spotter/x is not authorized to perform: autoscaling:SetDesiredCapacity on resource: spot"})
	l.start(t)
	if note := firstEventNote(t, l.env, migrator.ReasonSpotRequestFailed, time.Minute); !strings.Contains(note, "AccessDenied") {
		t.Errorf("the Event's note %q does not give the cloud's refusal", note)
	}
	testenv.Eventually(t, 3*time.Minute, "every pod Running on spot, the on-demand group empty", func(ctx context.Context) (bool, string, error) {
		onSpot, err := podsOnSpot(ctx, l.env, "ip-", awsprovider.CapacityTypeLabel, "SPOT")
		if err != nil {
			return false, "", err
		}
		od, _ := l.emu.GroupStatus("od")
		return onSpot == 6 && od.DesiredCapacity == 0, fmt.Sprintf("%d pods on spot; od desired %d", onSpot, od.DesiredCapacity), nil
	})
	list, err := l.env.Client.EventsV1().Events("").List(testenv.Context(t, 10*time.Second),
		metav1.ListOptions{FieldSelector: fields.Set{"reason": migrator.ReasonSpotUnavailable}.String()})
	if err != nil || len(list.Items) != 0 {
		t.Errorf("%d SpotterSpotUnavailable Events (%v), want none: a refusal is no shortage", len(list.Items), err)
	}
	assertNoMarks(t, l.env)
}

// A spot shortage: Auto Scaling accepts the request for spot capacity and
// cannot launch it; the migrator reads the failed scaling activity at its
// next poll, well before nodeReadyTimeout (the default, 10m), cancels the
// request and backs off, and nothing is drained.
func TestAWSSpotShortageDrainsNothing(t *testing.T) {
	l := startAWSLab(t)
	l.readyTimeout = "" // the default, 10m: the stock-out is read from the cloud, not waited out
	l.emu.SetCapacityShortage("spot", true)
	l.start(t)
	// Auto Scaling accepts the request and fails the launch in a scaling
	// activity, which the migrator reads.
	note := firstEventNote(t, l.env, migrator.ReasonSpotUnavailable, stockOutWithin)
	logRequestToShortage(t, l.env)
	if !strings.Contains(note, "the cloud reports") || !strings.Contains(note, "InsufficientInstanceCapacity") {
		t.Errorf("the Event's note %q does not give the scaling activity's cause", note)
	}
	// The request (desired 0 to 1), then its cancellation (back to 0, below).
	if n := l.emu.Calls("SetDesiredCapacity"); n != 2 {
		t.Errorf("%d SetDesiredCapacity calls, want the request and its cancellation", n)
	}
	testenv.Eventually(t, 30*time.Second, "the request cancelled", func(context.Context) (bool, string, error) {
		sp, _ := l.emu.GroupStatus("spot")
		return sp.DesiredCapacity == 0, fmt.Sprintf("spot desired %d", sp.DesiredCapacity), nil
	})
	ctx := testenv.Context(t, time.Minute)
	if n := l.readyNodes(ctx, t, "ON_DEMAND"); n != 3 {
		t.Errorf("%d on-demand nodes, want the 3 untouched", n)
	}
	if od, _ := l.emu.GroupStatus("od"); od.DesiredCapacity != 3 {
		t.Errorf("od desired %d, want 3", od.DesiredCapacity)
	}
	assertNoMarks(t, l.env)

	// spotter plan with the same configuration names each node's group,
	// instance type (from EC2) and on-demand price (from the table Spotter
	// ships: the configuration gives a spot price only).
	var out, errOut bytes.Buffer
	code := cli.Main([]string{"plan", "--kubeconfig", l.env.Kubeconfig, "--config", filepath.Join(l.dir, "spotter.yaml"), "-o", "json"},
		cli.Streams{In: strings.NewReader(""), Out: &out, Err: &errOut})
	var p plan.Plan
	if code != 0 || json.Unmarshal(out.Bytes(), &p) != nil {
		t.Fatalf("spotter plan: exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
	groups := 0
	for _, n := range p.Nodes {
		if n.NodeGroup == "od" && n.InstanceType == "m5.xlarge" && n.HourlyPrice == 0.192 {
			groups++
		}
	}
	if groups != 3 {
		t.Errorf("%d nodes of group od with type and price in the plan, want 3:\n%s%s", groups, out.String(), errOut.String())
	}
	// The launch configuration's group is left out, and said so by the plan
	// and by an Event on the controller's leader Lease.
	if !strings.Contains(errOut.String(), "warning: cloud provider aws: node group legacy left out") {
		t.Errorf("spotter plan does not warn of the group left out:\n%s", errOut.String())
	}
	if note := firstEventNote(t, l.env, migrator.ReasonNodeGroupLeftOut, time.Minute); !strings.Contains(note, "legacy") || !strings.Contains(note, "launch template") {
		t.Errorf("the Event's note %q does not name the group and the fix", note)
	}
}

// An instance that never registers as a Node: the first spot instance the
// migrator asks for comes up, and its Node never appears. At
// nodeReadyTimeout (20 s here) the migrator deletes it through its group
// (SpotterSpotGivenBack), so that it is neither billed nor idle, and the
// next run replaces the on-demand nodes with instances that do register.
func TestAWSUnregisteredInstanceIsDeleted(t *testing.T) {
	l := startAWSLab(t)
	l.silent.Store(1)
	l.start(t)
	if note := firstEventNote(t, l.env, migrator.ReasonSpotGivenBack, 2*time.Minute); !strings.Contains(note, "never became nodes") {
		t.Errorf("the Event's note %q does not say why the instance was deleted", note)
	}
	id := l.silentID.Load()
	if id == nil {
		t.Fatal("no instance launched without its Node")
	}
	testenv.Eventually(t, time.Minute, "the unregistered instance terminated", func(context.Context) (bool, string, error) {
		i, ok := l.emu.Instance(id.(string))
		return ok && (i.State == awsapi.StateTerminated || i.State == awsapi.StateShuttingDown), fmt.Sprintf("%+v", i.State), nil
	})
	if n := l.emu.Calls("TerminateInstanceInAutoScalingGroup"); n < 1 {
		t.Errorf("%d TerminateInstanceInAutoScalingGroup calls, want the unregistered instance's", n)
	}
	assertNoMarks(t, l.env)
}

// A partial delivery: the spot group now launches c5.large (2 vCPUs: each
// on-demand node's two pods need a new node each), and the pool has room
// for one instance when the migrator asks for two; Auto Scaling launches one
// and reports the other short. The request ends with nothing idle: the
// delivered node is used for the drain when the node's pods fit on it (the
// lab's nodes have 4 CPUs whatever their type), else given back, and no
// instance runs without its Node.
func TestAWSPartialDeliveryLeavesNoIdleNode(t *testing.T) {
	l := startAWSLab(t)
	v, err := l.emu.CreateLaunchTemplateVersion("spot", awsapi.LaunchTemplateData{InstanceType: "c5.large", Spot: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.emu.SetDefaultLaunchTemplateVersion("spot", v); err != nil {
		t.Fatal(err)
	}
	l.emu.SetPoolCapacityLeft("c5.large", "us-east-1a", true, 1)
	l.start(t)
	if note := firstEventNote(t, l.env, migrator.ReasonSpotUnavailable, 2*time.Minute); !strings.Contains(note, "InsufficientInstanceCapacity") {
		t.Errorf("the Event's note %q does not give the shortage", note)
	}
	testenv.Eventually(t, time.Minute, "every spot instance a Node that holds pods", func(ctx context.Context) (bool, string, error) {
		sp, _ := l.emu.GroupStatus("spot")
		var idle []string
		for _, i := range sp.Instances {
			if i.LifecycleState != awsapi.LifecycleInService && i.LifecycleState != awsapi.LifecyclePending {
				continue
			}
			pods, err := l.env.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + nodeName(i.ID)})
			if err != nil {
				return false, "", err
			}
			if len(pods.Items) == 0 {
				idle = append(idle, i.ID)
			}
		}
		return len(idle) == 0, fmt.Sprintf("spot desired %d, %d instances, idle or without a Node: %v; %s", sp.DesiredCapacity, len(sp.Instances), idle,
			podsByNode(ctx, t, l.env)), nil
	})
	assertNoMarks(t, l.env)
}
