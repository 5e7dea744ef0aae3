package lab_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"spotter.dev/spotter/internal/lab"
	"spotter.dev/spotter/internal/testenv"
	"spotter.dev/spotter/internal/testutil"
)

// A deleted pod on a kwok node stays until its grace period ends, as on a real
// kubelet, so that drains take as long as they would.
func TestPodDeletionHonoursGracePeriod(t *testing.T) {
	env := testenv.StartLab(t)
	env.CreateNodes(lab.NodeSpec{Name: "n1", Class: lab.ClassSpot})
	ctx := testenv.Context(t, time.Minute)

	pod := testutil.Pod("slow", testutil.OnNode("n1"), testutil.GracePeriod(4))
	if _, err := env.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitForPodsRunning("default", "", 1, 30*time.Second)

	start := time.Now()
	if err := env.Client.CoreV1().Pods("default").Delete(ctx, "slow", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the deleted pod to go", func(ctx context.Context) (bool, string, error) {
		_, err := env.Client.CoreV1().Pods("default").Get(ctx, "slow", metav1.GetOptions{})
		return err != nil, "", nil
	})
	if took := time.Since(start); took < 3*time.Second {
		t.Errorf("pod with a 4s grace period went after %s; kwok ignored the grace period", took)
	}
}

// helperEnv makes the test binary act as a process that starts a lab and hangs,
// so that a test can kill it with SIGKILL.
const helperEnv = "SPOTTER_LAB_TEST_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		l, err := lab.Start(context.Background(), lab.Options{BinDir: os.Getenv(lab.BinDirEnv)})
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println("dir:", l.Dir)
		time.Sleep(10 * time.Minute)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Killing a test process with SIGKILL leaves no etcd or apiserver behind, and
// the next run removes the abandoned directory.
func TestKilledOwnerLeavesNoProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the Kubernetes binaries; skipped with -short")
	}
	bins, err := lab.FindBinaries(os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=1", lab.BinDirEnv+"="+bins)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "dir: ") {
		_ = cmd.Process.Kill()
		t.Fatalf("helper did not start a lab: %q %v", line, err)
	}
	dir := strings.TrimSpace(strings.TrimPrefix(line, "dir: "))
	pids := readPIDs(t, dir)
	if len(pids) != 2 {
		t.Fatalf("expected PID files of etcd and kube-apiserver, got %v", pids)
	}

	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()

	testenv.Eventually(t, 20*time.Second, "the killed run's etcd and apiserver to exit", func(context.Context) (bool, string, error) {
		var alive []string
		for name, pid := range pids {
			if syscall.Kill(pid, 0) == nil && !zombie(pid) {
				alive = append(alive, name)
			}
		}
		return len(alive) == 0, fmt.Sprint("still running: ", alive), nil
	})
	lab.CleanupStale(filepath.Dir(dir))
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("abandoned run directory %s not removed: %v", dir, err)
	}
}

// CleanupStale kills a process recorded by a run whose owner is gone, even when
// the kernel did not (the PID file path), and leaves runs of live owners alone.
func TestCleanupStaleKillsRecordedProcesses(t *testing.T) {
	root := t.TempDir()
	sleeper := exec.Command("sleep", "300")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = sleeper.Wait(); close(done) }()
	t.Cleanup(func() { _ = sleeper.Process.Kill() })

	// A finished process stands for the dead owner.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	abandoned := makeRun(t, root, "abandoned", dead.Process.Pid, 1, sleeper.Process.Pid)
	live := makeRun(t, root, "live", os.Getpid(), 0, sleeper.Process.Pid)

	lab.CleanupStale(root)
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("process of the abandoned run still running")
	}
	if _, err := os.Stat(abandoned); !os.IsNotExist(err) {
		t.Errorf("abandoned run not removed: %v", err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("run of a live owner removed: %v", err)
	}
}

// makeRun writes a run directory whose owner.pid names ownerPID and whose etcd
// PID file names pid, both with their real start times (ownerStartSkew is added
// to the owner's, so that a reused PID does not count as the owner).
func makeRun(t *testing.T, root, name string, ownerPID int, ownerStartSkew uint64, pid int) string {
	t.Helper()
	dir := filepath.Join(root, name)
	if err := os.MkdirAll(filepath.Join(dir, "pids"), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(path string, pid int, skew uint64) {
		start, err := startTime(pid)
		if err != nil {
			start = 1 // the process is gone: any start time is stale
		}
		if err := os.WriteFile(path, fmt.Appendf(nil, "%d %d\n", pid, start+skew), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(dir, "owner.pid"), ownerPID, ownerStartSkew)
	write(filepath.Join(dir, "pids", "etcd.pid"), pid, 0)
	return dir
}

func startTime(pid int) (uint64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	var v uint64
	_, err = fmt.Sscan(fields[19], &v)
	return v, err
}

func zombie(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(data)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+1:])[0] == "Z"
}

func readPIDs(t *testing.T, dir string) map[string]int {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "pids", "*.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pids := map[string]int{}
	for _, f := range files {
		var pid int
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fmt.Sscan(string(data), &pid); err != nil {
			t.Fatal(err)
		}
		pids[strings.TrimSuffix(filepath.Base(f), ".pid")] = pid
	}
	return pids
}

// A component that fails to start makes Start return an error with its log,
// and stops what was already running: here the real etcd, when the apiserver
// exits at once (as it does on a full disk).
func TestFailedStartStopsWhatItStarted(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the Kubernetes binaries; skipped with -short")
	}
	real, err := lab.FindBinaries(os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	bins := t.TempDir()
	for _, name := range []string{lab.Etcd, lab.Scheduler, lab.ControllerManager, lab.Kwok, lab.Kubectl} {
		if err := os.Symlink(filepath.Join(real, name), filepath.Join(bins, name)); err != nil {
			t.Fatal(err)
		}
	}
	failing := "#!/bin/sh\necho 'write /var/run/apiserver: no space left on device' >&2\nexit 1\n"
	if err := os.WriteFile(filepath.Join(bins, lab.APIServer), []byte(failing), 0o755); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()

	_, err = lab.Start(testenv.Context(t, time.Minute), lab.Options{BinDir: bins, Dir: dir, StartTimeout: 20 * time.Second})
	if err == nil {
		t.Fatal("Start succeeded with an apiserver that exits at once")
	}
	// The apiserver may exit before its PID is recorded ("did not start")
	// or after ("did not become ready"): either way the error names it and
	// shows its log.
	for _, want := range []string{lab.APIServer + " did not", "no space left on device"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%v", want, err)
		}
	}
	if pids := readPIDs(t, dir); len(pids) != 0 {
		t.Errorf("PID files left after a failed start: %v", pids)
	}
	if left := processesUnder(t, dir); len(left) != 0 {
		t.Errorf("processes of the failed lab still running: %v", left)
	}
}

// processesUnder lists the live processes whose command line names dir.
func processesUnder(t *testing.T, dir string) []string {
	t.Helper()
	cmdlines, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, f := range cmdlines {
		data, err := os.ReadFile(f)
		if err != nil || !strings.Contains(string(data), dir) {
			continue
		}
		pid := 0
		if _, err := fmt.Sscan(filepath.Base(filepath.Dir(f)), &pid); err == nil && !zombie(pid) {
			found = append(found, strings.ReplaceAll(string(data), "\x00", " "))
		}
	}
	return found
}
