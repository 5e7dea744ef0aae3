package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"spotter.dev/spotter/internal/drain"
	"spotter.dev/spotter/internal/lab"
	"spotter.dev/spotter/internal/testenv"
)

// kill -9 of the controller in the middle of a drain, then a restart: the new
// process finds its marks on the node and finishes the drain; at the end no
// node carries a Spotter taint, annotation or cordon.
func TestControllerKilledMidDrainResumes(t *testing.T) {
	env := testenv.StartLab(t)
	ctx := testenv.Context(t, 5*time.Minute)
	// Long grace periods keep the drain going long enough to kill it midway.
	webOnOnDemand(ctx, t, env, 3, 15)
	env.CreateNodes(lab.NodeSpec{Name: "spot-1", Class: lab.ClassSpot})

	config := writeConfig(t, "drain:\n  cordon: true\n  onRestart: Resume\nrescheduler:\n  interval: 10s\n  drainDelay: 0s\n")
	args := []string{"controller", "--config", config, "--kubeconfig", env.Kubeconfig,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--leader-elect=false"}
	first := testenv.StartSpotter(t, "first", args...)

	marked := func(want bool) func(ctx context.Context) (bool, string, error) {
		return func(ctx context.Context) (bool, string, error) {
			n, err := env.Client.CoreV1().Nodes().Get(ctx, "od-1", metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			m, ok, _ := drain.MarkOf(n)
			tainted := false
			for _, taint := range n.Spec.Taints {
				tainted = tainted || taint.Key == drain.DrainingTaintKey
			}
			if want {
				return ok && m.By == "rescheduler" && tainted && n.Spec.Unschedulable, fmt.Sprintf("mark %v taints %v", ok, n.Spec.Taints), nil
			}
			return !ok && !tainted && !n.Spec.Unschedulable, fmt.Sprintf("mark %v taints %v cordoned %v", ok, n.Spec.Taints, n.Spec.Unschedulable), nil
		}
	}
	testenv.Eventually(t, time.Minute, "the first controller to start draining od-1", marked(true))
	first.Kill()

	// The marks are the drain's only state, and they survived the crash: the
	// process is gone (Kill waits for it), the marks are there, and the
	// second controller must act on them (its log says so, below).
	testenv.Eventually(t, time.Second, "od-1 still marked after the crash", marked(true))

	second := testenv.StartSpotter(t, "second", args...)
	testenv.Eventually(t, 2*time.Minute, "the resumed drain to finish and clear its marks", marked(false))
	// Depending on where the kill fell, the restarted controller resumes the
	// drain (pods left to move) or finishes it (every eviction was accepted):
	// either way it acts on the marks it found, by the rules of a fresh drain.
	if log, _ := os.ReadFile(second.Log); !strings.Contains(string(log), "Resuming an unfinished drain") &&
		!strings.Contains(string(log), "Finished an unfinished drain") {
		t.Error("the second controller did not act on the marks it found")
	}
	env.WaitForPodsRunning("default", "app=web", 3, time.Minute)
	pods, err := env.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName != "spot-1" {
			t.Errorf("pod %s on %s after the resumed drain, want spot-1", p.Name, p.Spec.NodeName)
		}
	}
}

// SIGTERM in the middle of a drain that cannot finish within
// drain.shutdownGracePeriod: the controller rolls the drain back before it
// exits, so the node is left as it was found.
func TestControllerStoppedMidDrainRollsBack(t *testing.T) {
	env := testenv.StartLab(t)
	ctx := testenv.Context(t, 5*time.Minute)
	// Pods that take 30 s to terminate: the drain cannot end within the 1 s grace.
	webOnOnDemand(ctx, t, env, 2, 30)
	env.CreateNodes(lab.NodeSpec{Name: "spot-1", Class: lab.ClassSpot})

	config := writeConfig(t, "drain:\n  cordon: true\n  shutdownGracePeriod: 1s\nrescheduler:\n  interval: 10s\n  drainDelay: 0s\n")
	p := testenv.StartSpotter(t, "controller", "controller", "--config", config, "--kubeconfig", env.Kubeconfig,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--leader-elect=false")
	testenv.Eventually(t, time.Minute, "the controller to start draining od-1", func(ctx context.Context) (bool, string, error) {
		n, err := env.Client.CoreV1().Nodes().Get(ctx, "od-1", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		_, ok, _ := drain.MarkOf(n)
		return ok, fmt.Sprint(n.Annotations), nil
	})

	start := time.Now()
	p.Stop()
	t.Logf("the controller exited %s after SIGTERM", time.Since(start).Round(10*time.Millisecond))
	if code := p.Cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
	n, err := env.Client.CoreV1().Nodes().Get(ctx, "od-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, marked, _ := drain.MarkOf(n)
	for _, taint := range n.Spec.Taints {
		marked = marked || taint.Key == drain.DrainingTaintKey
	}
	if marked || n.Spec.Unschedulable {
		t.Errorf("od-1 left marked after a graceful stop: annotations %v taints %v cordoned %v", n.Annotations, n.Spec.Taints, n.Spec.Unschedulable)
	}
	if log, _ := os.ReadFile(p.Log); !strings.Contains(string(log), drain.ErrShutdown.Error()) {
		t.Error("the controller's log does not say the drain was stopped by the shutdown")
	}
}
