// Package bench holds benchmarks that need the lab: run them explicitly, e.g.
//
//	go test ./test/bench -run '^$' -bench ControllerSteadyState -benchtime 1x -timeout 30m
package bench

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"spotter.dev/spotter/internal/lab"
	"spotter.dev/spotter/internal/testenv"
	tu "spotter.dev/spotter/internal/testutil"
)

// BenchmarkControllerSteadyState: 500 kwok nodes and 10,000 pods; `spotter
// controller` plans every 10 s. Reports the requests it sends to the apiserver
// per minute, by verb, after the initial sync, and its RSS.
func BenchmarkControllerSteadyState(b *testing.B) {
	const nodes, deployments, replicas = 500, 100, 100
	env := testenv.StartLab(b)
	ctx := testenv.Context(b, 30*time.Minute)
	spotTaint := corev1.Taint{Key: "spot", Value: "true", Effect: corev1.TaintEffectNoSchedule}
	var specs []lab.NodeSpec
	for i := range nodes {
		s := lab.NodeSpec{Name: fmt.Sprintf("n-%03d", i), Class: lab.ClassOnDemand, Zone: fmt.Sprintf("zone-%c", 'a'+i%3), Pods: "110"}
		if i%5 < 2 {
			// Spot nodes the pods do not tolerate: nothing is drainable, so the
			// controller stays in steady state.
			s.Class, s.Taints = lab.ClassSpot, []corev1.Taint{spotTaint}
		}
		specs = append(specs, s)
	}
	start := time.Now()
	if err := lab.CreateNodes(ctx, env.Client, specs...); err != nil {
		b.Fatal(err)
	}
	for i := range deployments {
		d := tu.Deployment(fmt.Sprintf("app-%03d", i), replicas, tu.CPU("10m"), tu.Memory("16Mi"))
		if _, err := env.Client.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	env.WaitForPodsRunning("default", "", deployments*replicas, 20*time.Minute)
	b.Logf("lab with %d nodes and %d pods ready in %s", nodes, deployments*replicas, time.Since(start).Round(time.Second))

	config := filepath.Join(b.TempDir(), "spotter.yaml")
	if err := os.WriteFile(config, []byte("apiVersion: spotter.dev/v1alpha1\nkind: SpotterConfiguration\nrescheduler:\n  interval: 10s\nmanager:\n  metricsAuthentication: None\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	metrics := testenv.FreeAddr(b)
	p := testenv.StartSpotter(b, "controller", "controller", "--config", config, "--kubeconfig", env.Kubeconfig,
		"--metrics-bind-address", metrics, "--health-probe-bind-address", "0", "--leader-elect=false")

	// The initial sync, labelling and Events (at the client's QPS) take a while
	// at this size: wait until no write has been sent for 20 s, then measure a
	// minute.
	settled := time.Now()
	last, _ := waitWritesStop(b, metrics, 10*time.Minute)
	b.Logf("settled %s after start; requests so far: %v", time.Since(settled).Round(time.Second), last)
	before := scrape(b, metrics)
	b.ResetTimer()
	time.Sleep(time.Minute)
	after := scrape(b, metrics)
	b.StopTimer()
	for _, verb := range []string{"list", "watch", "get", "create", "update", "patch", "delete"} {
		perMinute := after[verb] - before[verb]
		b.ReportMetric(perMinute, verb+"/min")
	}
	rss := rssMiB(b, p.Cmd.Process.Pid)
	b.ReportMetric(rss, "RSS-MiB")
	b.Logf("requests in the measured minute: %v; total since start: %v; RSS %.0f MiB", diff(after, before), after, rss)
}

// scrape returns the requests the spotter process serving metrics on addr
// has sent to the apiserver, by verb.
// waitWritesStop polls the controller's request counts every 10 s until two
// polls in a row see no new create, patch or update (20 s without a write),
// or limit passes. It returns the last counts and whether the writes stopped.
func waitWritesStop(b *testing.B, metrics string, limit time.Duration) (map[string]float64, bool) {
	start := time.Now()
	last := map[string]float64{}
	for quiet := 0; quiet < 2; {
		if time.Since(start) > limit {
			return last, false
		}
		time.Sleep(10 * time.Second)
		now := scrape(b, metrics)
		if now["create"] == last["create"] && now["patch"] == last["patch"] && now["update"] == last["update"] && len(last) > 0 {
			quiet++
		} else {
			quiet = 0
		}
		last = now
	}
	return last, true
}

func scrape(b *testing.B, addr string) map[string]float64 {
	b.Helper()
	body, err := fetchMetrics(addr)
	if err != nil {
		b.Fatal(err)
	}
	return requestsByVerb(body)
}

// fetchMetrics returns the text of http://addr/metrics.
func fetchMetrics(addr string) (string, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET http://%s/metrics: %s", addr, resp.Status)
	}
	return string(body), err
}

// requestsByVerb reads spotter_apiserver_requests_total from a metrics text,
// summed by verb.
func requestsByVerb(body string) map[string]float64 {
	out := map[string]float64{}
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, "spotter_apiserver_requests_total{") {
			continue
		}
		verb := line[strings.Index(line, `verb="`)+6:]
		verb = verb[:strings.Index(verb, `"`)]
		v, err := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
		if err == nil {
			out[verb] += v
		}
	}
	return out
}

// metricValue returns the sum of the samples of the metric name (every label
// set) in a metrics text; 0 when it has none.
func metricValue(body, name string) float64 {
	var sum float64
	for _, line := range strings.Split(body, "\n") {
		if rest, ok := strings.CutPrefix(line, name); ok && (strings.HasPrefix(rest, " ") || strings.HasPrefix(rest, "{")) {
			if v, err := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64); err == nil {
				sum += v
			}
		}
	}
	return sum
}

func diff(a, b map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range a {
		out[k] = v - b[k]
	}
	return out
}

// rssMiB returns the resident set size of process pid (VmRSS), in MiB.
func rssMiB(b *testing.B, pid int) float64 {
	return procStatusMiB(b, pid, "VmRSS")
}

// procStatusMiB returns a size field of /proc/PID/status (VmRSS, VmHWM, ...)
// in MiB.
func procStatusMiB(b *testing.B, pid int, field string) float64 {
	b.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) >= 2 && fields[0] == field+":" {
			kb, _ := strconv.ParseFloat(fields[1], 64)
			return kb / 1024
		}
	}
	return 0
}
