package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"spotter.dev/spotter/internal/lab"
)

// `spotter lab up` starts a detached lab with nodes and prints how to use it;
// kubectl works against it; `spotter lab down` stops every process.
func TestLabUpAndDown(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the Kubernetes binaries; skipped with -short")
	}
	bins, err := lab.FindBinaries(os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(lab.BinDirEnv, bins)
	dir := filepath.Join(t.TempDir(), "lab")
	t.Cleanup(func() { _ = lab.StopDir(dir) })

	code, out, errOut := run(t, "lab", "up", "--dir", dir, "--spot", "2", "--on-demand", "1")
	if code != 0 {
		t.Fatalf("lab up: exit %d\n%s\n%s", code, out, errOut)
	}
	kubeconfig := filepath.Join(dir, "admin.kubeconfig")
	if !strings.Contains(out, "export KUBECONFIG="+kubeconfig) {
		t.Errorf("lab up does not print the kubeconfig path:\n%s", out)
	}
	if !lab.Running(dir) {
		t.Fatal("lab up returned but the apiserver is not running")
	}
	// A second `up` on a running lab is refused, not a second set of processes.
	if code, _, errOut := run(t, "lab", "up", "--dir", dir); code != 1 || !strings.Contains(errOut, "already running") {
		t.Errorf("second lab up: exit %d, %q", code, errOut)
	}

	// The kubectl the lab built parses the server version and sees the nodes.
	kubectl := exec.Command(filepath.Join(bins, lab.Kubectl), "--kubeconfig", kubeconfig,
		"get", "nodes", "-L", lab.CapacityTypeLabel, "--no-headers")
	got, err := kubectl.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl get nodes: %v\n%s", err, got)
	}
	if n := strings.Count(string(got), " Ready "); n != 3 {
		t.Errorf("want 3 Ready nodes, kubectl shows:\n%s", got)
	}
	if !strings.Contains(string(got), "spot") || !strings.Contains(string(got), "on-demand") {
		t.Errorf("nodes lack their capacity-type labels:\n%s", got)
	}
	version, err := exec.Command(filepath.Join(bins, lab.Kubectl), "--kubeconfig", kubeconfig, "version").CombinedOutput()
	if err != nil || !strings.Contains(string(version), "Server Version: v1.37.1") {
		t.Errorf("kubectl version: %v\n%s", err, version)
	}

	if code, out, errOut := run(t, "lab", "down", "--dir", dir); code != 0 {
		t.Fatalf("lab down: exit %d\n%s\n%s", code, out, errOut)
	}
	if lab.Running(dir) {
		t.Error("apiserver still running after lab down")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("lab down left %s: %v", dir, err)
	}
}
