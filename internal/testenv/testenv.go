// Package testenv is the harness of Spotter's integration and e2e tests: a real
// etcd and kube-apiserver (integration), plus the real kube-scheduler,
// kube-controller-manager and kwok nodes (e2e, "the lab"), started per test with
// their own ports and directory, stopped when the test ends. A failing test
// prints the components' last log lines and keeps the directory.
//
// Both tiers are skipped with -short, which is how `make unit` runs unit tests
// alone.
package testenv

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"spotter.dev/spotter/internal/lab"
)

// Env is a running control plane with an admin client.
type Env struct {
	*lab.Lab
	// Client is an admin clientset.
	Client kubernetes.Interface
	t      testing.TB

	tokensMu sync.Mutex
	tokens   map[string]string // ServiceAccountToken's, by account
}

var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

// binaries locates (and if needed builds) the Kubernetes binaries once per test
// binary.
func binaries(t testing.TB) string {
	binOnce.Do(func() { binDir, binErr = lab.FindBinaries(os.Stderr) })
	if binErr != nil {
		t.Fatalf("Kubernetes binaries: %v", binErr)
	}
	return binDir
}

// StartAPIServer starts etcd and kube-apiserver for t.
func StartAPIServer(t testing.TB) *Env {
	return start(t, false)
}

// StartLab starts the full lab for t: etcd, kube-apiserver, kube-scheduler,
// kube-controller-manager and kwok. It has no nodes; add them with CreateNodes.
func StartLab(t testing.TB) *Env {
	return start(t, true)
}

// StartOldestLab is StartLab on the oldest Kubernetes minor the chart
// supports (lab.FindOldestBinaries).
func StartOldestLab(t testing.TB) *Env {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a real kube-apiserver; skipped with -short")
	}
	dir, err := lab.FindOldestBinaries(os.Stderr)
	if err != nil {
		t.Fatalf("Kubernetes binaries of the oldest supported minor: %v", err)
	}
	return startIn(t, dir, true)
}

func start(t testing.TB, full bool) *Env {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a real kube-apiserver; skipped with -short")
	}
	return startIn(t, binaries(t), full)
}

func startIn(t testing.TB, binDir string, full bool) *Env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	l, err := lab.Start(ctx, lab.Options{BinDir: binDir, Full: full})
	if err != nil {
		t.Fatalf("starting the lab: %v", err)
	}
	t.Cleanup(func() {
		l.Stop()
		if t.Failed() {
			t.Logf("lab logs kept in %s\n%s", l.Dir, l.Logs(40))
			return
		}
		_ = os.RemoveAll(l.Dir)
	})
	client, err := kubernetes.NewForConfig(l.Config)
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	return &Env{Lab: l, Client: client, t: t}
}

// Context returns a context that ends with the test, or after timeout.
func Context(t testing.TB, timeout time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	return ctx
}
