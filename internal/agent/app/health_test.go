package app

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"

	"spotter.dev/spotter/internal/agent/aws"
	"spotter.dev/spotter/internal/agent/internal/watch"
	"spotter.dev/spotter/internal/agent/internal/watchtest"
	"spotter.dev/spotter/internal/emulator/awsimds"
	"spotter.dev/spotter/internal/lab"
	"spotter.dev/spotter/internal/testenv"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// The agent against a metadata service that stops answering: /readyz fails
// after exactly agent.readinessFailureThreshold failed reads of a notice
// path, spotter_agent_metadata_errors_total counts them, the last-success
// gauge keeps the last good read, and one good read makes the agent ready
// again. Everything is real (the emulator over HTTP, the apiserver, the
// agent's endpoints) but the clock, stepped one poll round at a time so
// that each round's reads are known.
func TestReadinessFollowsMetadataReads(t *testing.T) {
	env := testenv.StartAPIServer(t)
	ctx := testenv.Context(t, 2*time.Minute)
	node, err := env.Client.CoreV1().Nodes().Create(ctx, lab.Node(lab.NodeSpec{Name: "spot-1", Class: lab.ClassSpot}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	clk := testingclock.NewFakeClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	imds := awsimds.New(awsimds.Options{Clock: clk})
	srv := httptest.NewServer(imds)
	t.Cleanup(srv.Close)

	const threshold = 3
	cfg := v1alpha1.NewDefaults()
	a := &cfg.Agent
	a.Cloud, a.MetadataEndpoint, a.ReadinessFailureThreshold = v1alpha1.CloudAWS, srv.URL, threshold
	a.MetricsBindAddress, a.MetricsAuthentication = testenv.FreeAddr(t), v1alpha1.MetricsAuthNone
	a.HealthProbeBindAddress = testenv.FreeAddr(t)
	_, logCtx := ktesting.NewTestContext(t)
	runCtx, stop := context.WithCancel(logCtx)
	done := make(chan error, 1)
	go func() { done <- runWatch(runCtx, cfg, env.Client, node, false, clk) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("runWatch: %v", err)
		}
	})

	readyz := func() (int, string) {
		t.Helper()
		return get(t, "http://"+a.HealthProbeBindAddress+"/readyz")
	}
	// sample returns the value of a series of the agent's metrics.
	sample := func(name, path string) float64 {
		t.Helper()
		_, body := get(t, "http://"+a.MetricsBindAddress+"/metrics")
		series := fmt.Sprintf(`%s{cloud="aws",path="%s"} `, name, path)
		for line := range strings.Lines(body) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), series); ok {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					t.Fatal(err)
				}
				return f
			}
		}
		t.Fatalf("no series %s in the metrics:\n%s", series, body)
		return 0
	}
	const errors, lastSuccess = "spotter_agent_metadata_errors_total", "spotter_agent_metadata_last_success_timestamp_seconds"

	// The first round, at start, reads every path.
	watchtest.WaitIdle(t, clk)
	if code, body := readyz(); code != http.StatusOK {
		t.Fatalf("/readyz after the first round: %d %s", code, body)
	}
	readAt := float64(clk.Now().Unix())
	for _, p := range []string{aws.InstanceActionPath, aws.RebalancePath, aws.ScheduledEventsPath, aws.TargetLifecycleStatePath} {
		if v := sample(lastSuccess, p); v != readAt {
			t.Errorf("%s of %s = %v, want %v", lastSuccess, p, v, readAt)
		}
	}

	// Each round now fails the read of every item (the token is still valid).
	imds.RefuseReads(true)
	for round := 1; round <= threshold; round++ {
		watchtest.Step(t, clk, watch.DefaultMaxBackoff)
		code, body := readyz()
		if round < threshold && code != http.StatusOK {
			t.Fatalf("/readyz after %d failed reads: %d %s, want 200 until %d", round, code, body, threshold)
		}
		if v := sample(errors, aws.InstanceActionPath); v != float64(round) {
			t.Errorf("%s of %s after %d failed reads: %v", errors, aws.InstanceActionPath, round, v)
		}
	}
	code, body := readyz()
	if code != http.StatusServiceUnavailable || !strings.Contains(body, aws.InstanceActionPath+": 3 reads in a row failed (threshold 3)") {
		t.Errorf("/readyz after %d failed reads: %d %q, want 503 naming %s", threshold, code, body, aws.InstanceActionPath)
	}
	if v := sample(lastSuccess, aws.InstanceActionPath); v != readAt {
		t.Errorf("%s of %s while refused = %v, want the last good read %v", lastSuccess, aws.InstanceActionPath, v, readAt)
	}
	if code, _ := get(t, "http://"+a.HealthProbeBindAddress+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz while blind: %d, want 200: a restart would not help", code)
	}

	imds.RefuseReads(false)
	watchtest.Step(t, clk, watch.DefaultMaxBackoff)
	if code, body := readyz(); code != http.StatusOK {
		t.Errorf("/readyz after a good read: %d %s", code, body)
	}
	if v := sample(lastSuccess, aws.InstanceActionPath); v != float64(clk.Now().Unix()) {
		t.Errorf("%s of %s after a good read = %v, want %v", lastSuccess, aws.InstanceActionPath, v, clk.Now().Unix())
	}
	if v := sample(errors, aws.InstanceActionPath); v != threshold {
		t.Errorf("%s of %s after a good read = %v, want still %d", errors, aws.InstanceActionPath, v, threshold)
	}
	if v := sample(errors, aws.TokenPath); v != 0 {
		t.Errorf("%s of %s = %v, want 0", errors, aws.TokenPath, v)
	}
}

// get GETs url and returns the status code and body.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	code, body, err := testenv.Scrape(testenv.Context(t, 10*time.Second), url, "")
	if err != nil {
		t.Fatal(err)
	}
	return code, body
}
