package bench

import (
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"spotter.dev/spotter/internal/agent/interrupt"
	"spotter.dev/spotter/internal/emulator/awsimds"
	"spotter.dev/spotter/internal/emulator/azureimds"
	"spotter.dev/spotter/internal/emulator/gcpmetadata"
	"spotter.dev/spotter/internal/lab"
	"spotter.dev/spotter/internal/testenv"
)

// BenchmarkAgentIdle: spotter-agent on one node, polling an AWS metadata
// emulator every second (the default) with no notice. Reports its RSS and its
// CPU use over a measured minute, as a share of one core.
//
//	go test ./test/bench -run '^$' -bench AgentIdle -benchtime 1x
func BenchmarkAgentIdle(b *testing.B) {
	env := testenv.StartAPIServer(b)
	if err := lab.CreateNodes(testenv.Context(b, time.Minute), env.Client, lab.NodeSpec{Name: "spot-1", Class: lab.ClassSpot}); err != nil {
		b.Fatal(err)
	}
	emu := awsimds.New(awsimds.Options{})
	srv := httptest.NewServer(emu)
	b.Cleanup(srv.Close)
	config := filepath.Join(b.TempDir(), "agent.yaml")
	if err := os.WriteFile(config, []byte("apiVersion: spotter.dev/v1alpha1\nkind: SpotterConfiguration\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	metrics := testenv.FreeAddr(b)
	p := testenv.StartAgent(b, "agent", "--node-name", "spot-1", "--kubeconfig", env.Kubeconfig, "--cloud", "aws",
		"--metadata-endpoint", srv.URL, "--config", config, "--metrics-bind-address", metrics, "--health-probe-bind-address", "0")
	pid := p.Cmd.Process.Pid
	// Metrics as a Prometheus reads them by default: HTTPS, a ServiceAccount
	// token checked by the apiserver, every 15 s.
	token := env.ServiceAccountToken("prometheus", true)
	scrape := func() {
		code, _, err := testenv.Scrape(testenv.Context(b, 10*time.Second), "https://"+metrics+"/metrics", token)
		if err != nil || code != http.StatusOK {
			b.Fatalf("scraping the agent: HTTP %d, %v", code, err)
		}
	}
	// Past start-up: the first polls, the client's discovery and caches.
	time.Sleep(10 * time.Second)
	scrape()
	cpuBefore, polls := cpuSeconds(b, pid), emu.Requests("/latest/meta-data/spot/instance-action")
	b.ResetTimer()
	start := time.Now()
	for range 4 {
		time.Sleep(15 * time.Second)
		scrape()
	}
	elapsed := time.Since(start)
	cpu := cpuSeconds(b, pid) - cpuBefore
	b.StopTimer()
	polls = emu.Requests("/latest/meta-data/spot/instance-action") - polls
	rss := rssMiB(b, pid)
	b.ReportMetric(rss, "RSS-MiB")
	b.ReportMetric(100*cpu/elapsed.Seconds(), "%core")
	b.ReportMetric(float64(polls), "polls/min")
	b.Logf("idle agent: RSS %.1f MiB, CPU %.2f%% of a core, %d instance-action polls in %s", rss, 100*cpu/elapsed.Seconds(), polls, elapsed.Round(time.Second))
}

// cpuSeconds returns the user and system CPU time of pid, from /proc.
func cpuSeconds(b *testing.B, pid int) float64 {
	b.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		b.Fatal(err)
	}
	// The fields after the command name, which is in parentheses and may hold spaces.
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	const ticksPerSecond = 100 // USER_HZ on Linux
	return (utime + stime) / ticksPerSecond
}

// BenchmarkAgentNoticeToCordon: time from an interruption notice in the
// metadata service to the node tainted NoSchedule and cordoned, as the
// apiserver shows it, on each cloud with the agent's defaults: an AWS spot
// instance-action (read every 200 ms), a GCP preemption (long-polled, answered
// at once) and an Azure Preempt event (the document read every 250 ms). Each
// notice comes at a random moment of the poll's cycle; between two, the notice
// is withdrawn and the agent lifts its marks. Reports the median and the
// worst of b.N notices.
//
//	go test ./test/bench -run '^$' -bench AgentNoticeToCordon -benchtime 5x
func BenchmarkAgentNoticeToCordon(b *testing.B) {
	b.Run("cloud=aws", func(b *testing.B) {
		emu := awsimds.New(awsimds.Options{})
		noticeToCordon(b, "aws", emu, func() bool { return emu.Requests(awsimds.InstanceActionPath) > 0 }, func(on bool, _ int) {
			if on {
				emu.SetInstanceAction("terminate", time.Now().Add(2*time.Minute))
			} else {
				emu.ClearInstanceAction()
			}
		})
	})
	b.Run("cloud=gcp", func(b *testing.B) {
		emu := gcpmetadata.New(gcpmetadata.Options{})
		b.Cleanup(emu.Close)
		noticeToCordon(b, "gcp", emu, func() bool { return emu.Waiting(gcpmetadata.PreemptedPath) > 0 }, func(on bool, _ int) {
			emu.SetPreempted(on)
		})
	})
	b.Run("cloud=azure", func(b *testing.B) {
		emu := azureimds.New(azureimds.Options{VMName: "spot-1"})
		noticeToCordon(b, "azure", emu, func() bool { return emu.Requests("/metadata/scheduledevents") > 0 }, func(on bool, i int) {
			id := "preempt-" + strconv.Itoa(i)
			if on {
				emu.AddEvent(azureimds.Event{EventID: id, EventType: "Preempt", Resources: []string{"spot-1"}, NotBefore: time.Now().Add(30 * time.Second)})
			} else {
				emu.RemoveEvent(id)
			}
		})
	})
}

// noticeToCordon runs the agent for cloud against the metadata emulator emu
// on node spot-1 and measures b.N notices: notify(true, i) gives the i-th,
// notify(false, i) withdraws it. polling reports when the agent reads the
// notice's path.
func noticeToCordon(b *testing.B, cloud string, emu http.Handler, polling func() bool, notify func(on bool, i int)) {
	env := testenv.StartAPIServer(b)
	ctx := testenv.Context(b, 10*time.Minute)
	if err := lab.CreateNodes(ctx, env.Client, lab.NodeSpec{Name: "spot-1", Class: lab.ClassSpot}); err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(emu)
	b.Cleanup(srv.Close)
	config := filepath.Join(b.TempDir(), "agent.yaml")
	if err := os.WriteFile(config, []byte("apiVersion: spotter.dev/v1alpha1\nkind: SpotterConfiguration\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	testenv.StartAgent(b, "agent", "--node-name", "spot-1", "--kubeconfig", env.Kubeconfig, "--cloud", cloud,
		"--metadata-endpoint", srv.URL, "--config", config, "--metrics-bind-address", "0", "--health-probe-bind-address", "0")
	cordoned := func(want bool) bool {
		n, err := env.Client.CoreV1().Nodes().Get(ctx, "spot-1", metav1.GetOptions{})
		if err != nil {
			return false
		}
		tainted := false
		for _, t := range n.Spec.Taints {
			tainted = tainted || (t.Key == interrupt.TaintKey && t.Effect == corev1.TaintEffectNoSchedule)
		}
		return (n.Spec.Unschedulable && tainted) == want
	}
	waitFor := func(what string, cond func() bool) {
		deadline := time.Now().Add(time.Minute)
		for !cond() {
			if time.Now().After(deadline) {
				b.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	waitFor("the agent to read the metadata service", polling)
	took := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		// A notice comes at any moment of the agent's poll cycle.
		time.Sleep(time.Duration(rand.Int64N(int64(time.Second))))
		b.StartTimer()
		start := time.Now()
		notify(true, i)
		waitFor("the cordon", func() bool { return cordoned(true) })
		took = append(took, time.Since(start))
		b.StopTimer()
		notify(false, i)
		waitFor("the marks to be lifted", func() bool { return cordoned(false) })
		waitFor("the agent to read the metadata service again", polling)
		b.StartTimer()
	}
	b.StopTimer()
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "median-ms")
	b.ReportMetric(float64(took[len(took)-1].Microseconds())/1000, "worst-ms")
	b.Logf("%s: notice to cordon %v (sorted), median %v", cloud, took, took[len(took)/2])
}
