package awsapi

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
)

func TestThrottling(t *testing.T) {
	e := newEnv(t, Options{})
	e.group(t, "g", false, withSize(0, 1, 5))

	e.s.ThrottleNext(EC2, 2)
	for range 2 {
		_, err := e.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{})
		if code, status := apiError(t, err); code != "RequestLimitExceeded" || status != 503 {
			t.Errorf("EC2 throttle: %s HTTP %d", code, status)
		}
	}
	if _, err := e.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{}); err != nil {
		t.Errorf("third call: %v", err)
	}

	e.s.ThrottleNext(AutoScaling, 1)
	_, err := e.as.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{})
	if code, status := apiError(t, err); code != "Throttling" || status != 400 {
		t.Errorf("Auto Scaling throttle: %s HTTP %d", code, status)
	}
	// The EC2 throttle does not touch Auto Scaling and the other way round.
	if _, err := e.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{}); err != nil {
		t.Errorf("EC2 after an Auto Scaling throttle: %v", err)
	}
	if e.s.Calls("DescribeInstances") != 4 || e.s.Throttled("DescribeInstances") != 2 || e.s.Calls("DescribeAutoScalingGroups") != 1 {
		t.Errorf("calls %v", e.s.AllCalls())
	}

	// A fraction of calls, drawn from the seeded source.
	e.s.SetThrottleFraction(AutoScaling, 0.5)
	throttled := 0
	for range 200 {
		if _, err := e.as.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{}); err != nil {
			wantCode(t, err, "Throttling")
			throttled++
		}
	}
	if throttled < 60 || throttled > 140 {
		t.Errorf("%d of 200 calls throttled at 0.5", throttled)
	}
	e.s.SetThrottleFraction(AutoScaling, 0)
	e.s.ResetCalls()
	if _, err := e.as.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{}); err != nil || e.s.Calls("DescribeAutoScalingGroups") != 1 {
		t.Errorf("after reset: %v, %d calls", err, e.s.Calls("DescribeAutoScalingGroups"))
	}
}

// The SDK's standard retryer treats the throttles as retryable: with three
// attempts and two throttles, the call succeeds on the third request.
func TestThrottlingRetriedBySDK(t *testing.T) {
	e := newEnv(t, Options{})
	noWait := retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
	cfg := sdkConfig(t, e.url, func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = 3
			o.Backoff = noWait
			o.RateLimiter = ratelimit.None
		})
	})
	for _, tc := range []struct {
		name   string
		api    API
		action string
		call   func() error
	}{
		{"EC2", EC2, "DescribeInstances", func() error {
			_, err := ec2.NewFromConfig(cfg).DescribeInstances(ctx, &ec2.DescribeInstancesInput{})
			return err
		}},
		{"Auto Scaling", AutoScaling, "DescribeAutoScalingGroups", func() error {
			_, err := autoscaling.NewFromConfig(cfg).DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.s.ResetCalls()
			e.s.ThrottleNext(tc.api, 2)
			if err := tc.call(); err != nil {
				t.Fatal(err)
			}
			if got := e.s.Calls(tc.action); got != 3 {
				t.Errorf("%d attempts, want 3", got)
			}
			e.s.ThrottleNext(tc.api, 3)
			if err := tc.call(); err == nil {
				t.Error("three throttles in three attempts succeeded")
			}
		})
	}
}

func TestFailNext(t *testing.T) {
	e := newEnv(t, Options{})
	e.s.FailNext("TerminateInstances", APIError{Code: "UnauthorizedOperation", Message: "You are not authorized to perform this operation."})
	e.s.FailNext("SetDesiredCapacity", APIError{Status: 400, Code: "ScalingActivityInProgress", Message: "Scaling activity is in progress."})
	_, err := e.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{"i-0123456789abcdef0"}})
	wantCode(t, err, "UnauthorizedOperation")
	_, err = e.as.SetDesiredCapacity(ctx, &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String("g"), DesiredCapacity: aws.Int32(1)})
	wantCode(t, err, "ScalingActivityInProgress")
}

func TestCapacityShortage(t *testing.T) {
	for _, tc := range []struct {
		name    string
		spot    bool
		message string
	}{
		{"spot", true, "Could not launch Spot Instances. InsufficientInstanceCapacity - There is no Spot capacity available that matches your request. Launching EC2 instance failed."},
		{"on-demand", false, "We currently do not have sufficient m5.large capacity in the Availability Zone you requested (us-east-1a)."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Options{})
			e.group(t, "g", tc.spot, withSize(0, 0, 5))
			e.s.SetCapacityShortage("g", true)
			if _, err := e.as.SetDesiredCapacity(ctx, &autoscaling.SetDesiredCapacityInput{AutoScalingGroupName: aws.String("g"), DesiredCapacity: aws.Int32(2)}); err != nil {
				t.Fatal(err)
			}
			e.s.Step()
			e.s.Step()
			if n := len(e.mustGroup(t, "g").Instances); n != 0 {
				t.Errorf("%d instances launched during a shortage", n)
			}
			out, err := e.as.DescribeScalingActivities(ctx, &autoscaling.DescribeScalingActivitiesInput{AutoScalingGroupName: aws.String("g")})
			if err != nil {
				t.Fatal(err)
			}
			if len(out.Activities) != 2 {
				t.Fatalf("%d activities, want one failure per Step", len(out.Activities))
			}
			a := out.Activities[0]
			if a.StatusCode != astypes.ScalingActivityStatusCodeFailed || !strings.HasPrefix(aws.ToString(a.StatusMessage), tc.message) ||
				!strings.HasPrefix(aws.ToString(a.Description), "Launching a new EC2 instance.  Status Reason: ") ||
				!strings.Contains(aws.ToString(a.Cause), "increasing the capacity from 0 to 2") {
				t.Errorf("activity %+v", a)
			}

			e.s.SetCapacityShortage("g", false)
			e.s.Step()
			if n := len(e.mustGroup(t, "g").Instances); n != 2 {
				t.Errorf("%d instances after the shortage, want 2", n)
			}
		})
	}
}

func TestPoolCapacityShortage(t *testing.T) {
	e := newEnv(t, Options{})
	e.group(t, "g", false, withSize(0, 4, 10), withMixed(0, 0, "m5.large", "c5.large"))
	e.s.SetPoolCapacityShortage("m5.large", "us-east-1a", true, true)
	e.s.SetPoolCapacityShortage("c5.large", "us-east-1a", true, true)
	e.s.Step()
	g := e.mustGroup(t, "g")
	if len(g.Instances) != 4 {
		t.Fatalf("%d instances, want 4", len(g.Instances))
	}
	for _, i := range g.Instances {
		if i.AvailabilityZone != "us-east-1b" || !i.Spot || i.InstanceType != "m5.large" {
			t.Errorf("launched %s %s spot=%v, want m5.large spot in us-east-1b", i.InstanceType, i.AvailabilityZone, i.Spot)
		}
	}
}

// The error envelopes are the ones AWS sends, byte for byte in structure.
func TestWireErrorEnvelopes(t *testing.T) {
	e := newEnv(t, Options{})
	post := func(form url.Values) (int, string) {
		t.Helper()
		resp, err := http.PostForm(e.url, form)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct {
		name   string
		form   url.Values
		status int
		parts  []string
	}{
		{"EC2", url.Values{"Action": {"DescribeInstances"}, "Version": {EC2Version}, "InstanceId.1": {"i-0123456789abcdef9"}}, 400,
			[]string{"<Response><Errors><Error><Code>InvalidInstanceID.NotFound</Code><Message>The instance ID &#39;i-0123456789abcdef9&#39; does not exist</Message></Error></Errors><RequestID>"}},
		{"Auto Scaling", url.Values{"Action": {"SetDesiredCapacity"}, "Version": {AutoScalingVersion}, "AutoScalingGroupName": {"x"}, "DesiredCapacity": {"1"}}, 400,
			[]string{`<ErrorResponse xmlns="http://autoscaling.amazonaws.com/doc/2011-01-01/"><Error><Type>Sender</Type><Code>ValidationError</Code>`, "</Error><RequestId>"}},
		{"unknown EC2 action", url.Values{"Action": {"RunInstances"}, "Version": {EC2Version}}, 400,
			[]string{"<Code>InvalidAction</Code><Message>The action RunInstances is not valid for this web service.</Message>"}},
		{"unknown Auto Scaling action", url.Values{"Action": {"CreateAutoScalingGroup"}, "Version": {AutoScalingVersion}}, 400,
			[]string{"<ErrorResponse", "<Code>InvalidAction</Code>"}},
		{"EC2 success", url.Values{"Action": {"DescribeInstances"}, "Version": {EC2Version}}, 200,
			[]string{`<DescribeInstancesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>`, "<reservationSet></reservationSet>"}},
		{"Auto Scaling success", url.Values{"Action": {"DescribeAutoScalingGroups"}, "Version": {AutoScalingVersion}}, 200,
			[]string{`<DescribeAutoScalingGroupsResponse xmlns="http://autoscaling.amazonaws.com/doc/2011-01-01/"><DescribeAutoScalingGroupsResult><AutoScalingGroups></AutoScalingGroups></DescribeAutoScalingGroupsResult><ResponseMetadata><RequestId>`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := post(tc.form)
			if status != tc.status {
				t.Errorf("HTTP %d, want %d", status, tc.status)
			}
			for _, p := range tc.parts {
				if !strings.Contains(body, p) {
					t.Errorf("body lacks %q:\n%s", p, body)
				}
			}
		})
	}
}

// FuzzServeHTTP feeds arbitrary form bodies: the emulator must answer
// without panicking, with a status AWS would send.
func FuzzServeHTTP(f *testing.F) {
	f.Add("Action=DescribeInstances&Version=2016-11-15&InstanceId.1=i-0123456789abcdef0&Filter.1.Name=tag:a&Filter.1.Value.1=*")
	f.Add("Action=DescribeAutoScalingGroups&Version=2011-01-01&Filters.member.1.Name=tag-key&Filters.member.1.Values.member.1=x&MaxRecords=2")
	f.Add("Action=TerminateInstanceInAutoScalingGroup&Version=2011-01-01&InstanceIds.member.1=i-1&ShouldDecrementDesiredCapacity=true")
	f.Add("Action=DescribeSpotPriceHistory&Version=2016-11-15&StartTime=2030-01-01T00:00:00Z&NextToken=YXdzYXBpOjE")
	f.Add("Action=SetDesiredCapacity&Version=2011-01-01&AutoScalingGroupName=g&DesiredCapacity=-1")
	f.Fuzz(func(t *testing.T, body string) {
		s := New(Options{})
		id, _ := s.CreateLaunchTemplate("lt", LaunchTemplateData{InstanceType: "m5.large"})
		_ = s.CreateGroup(Group{Name: "g", MaxSize: 3, DesiredCapacity: 1, AvailabilityZones: []string{"a"}, LaunchTemplate: &LaunchTemplateRef{ID: id}})
		s.Step()
		req, _ := http.NewRequest(http.MethodPost, "/", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		rec := newRecorder()
		s.ServeHTTP(rec, req)
		if rec.status != 200 && rec.status != 400 && rec.status != 503 {
			t.Errorf("HTTP %d for %q", rec.status, body)
		}
	})
}

type recorder struct {
	header http.Header
	status int
}

func newRecorder() *recorder                    { return &recorder{header: http.Header{}} }
func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) Write(b []byte) (int, error) { return len(b), nil }
func (r *recorder) WriteHeader(status int)      { r.status = status }
