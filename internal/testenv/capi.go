package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/klog/v2/textlogger"

	"spotter.dev/spotter/internal/lab/capiinfra"
)

// CAPIBinDirEnv names the environment variable that points at the Cluster API
// manager and CRDs; without it, hack/capi-bin.sh of the Spotter checkout that
// holds the working directory builds them (once, into its cache).
const CAPIBinDirEnv = "SPOTTER_CAPI_BIN_DIR"

// Names of the Cluster API core manager binary in the directory of
// hack/capi-bin.sh, and of the logs in the lab's logs/.
const (
	capiManager = "cluster-api-manager"
	labProvider = "capiinfra"
)

var (
	capiOnce sync.Once
	capiDir  string
	capiErr  error
)

// capiBinaries locates (and if needed builds) the Cluster API manager and CRDs
// once per test binary.
func capiBinaries(t testing.TB) string {
	t.Helper()
	capiOnce.Do(func() { capiDir, capiErr = findCAPIBinaries() })
	if capiErr != nil {
		t.Fatalf("Cluster API binaries: %v", capiErr)
	}
	return capiDir
}

func findCAPIBinaries() (string, error) {
	if dir := os.Getenv(CAPIBinDirEnv); dir != "" {
		return dir, nil
	}
	return runCheckoutScript("capi-bin.sh", CAPIBinDirEnv)
}

// ClusterAPI is Cluster API running against a lab: the core controller
// manager as a process, and the lab's infrastructure and control plane
// provider (package capiinfra) in the test process.
type ClusterAPI struct {
	// Log is the manager's log file, in the lab's logs/.
	Log string

	readyURL string
	exited   chan struct{} // closed when the manager has exited
}

// StartClusterAPI installs Cluster API's CRDs and the lab provider's into the
// lab's apiserver, then starts Cluster API's core controller manager (no
// leader election, webhooks served on a self-signed certificate but not
// registered with the apiserver, the MachinePool controller on) and the lab
// provider. Both stop when the test
// ends. Objects must use cluster.x-k8s.io/v1beta2, the stored version: the CRDs
// have no conversion webhook. See package capiinfra for what a Cluster needs.
// The lab is both the management and the workload cluster; see
// StartClusterAPIManaging for two.
func StartClusterAPI(t testing.TB, env *Env) *ClusterAPI {
	t.Helper()
	return StartClusterAPIManaging(t, env, env)
}

// StartClusterAPIManaging is StartClusterAPI with a management cluster apart
// from the workload cluster: the CRDs, Cluster API's manager and the lab
// provider run against mgmt, and the lab provider's Nodes are created in
// workload, whose kubeconfig each Cluster's <cluster>-kubeconfig Secret holds,
// so that Cluster API reaches the workload cluster's Nodes as it does in a
// cloud.
func StartClusterAPIManaging(t testing.TB, mgmt, workload *Env) *ClusterAPI {
	t.Helper()
	bin := capiBinaries(t)
	InstallClusterAPICRDs(t, mgmt)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := startCAPIManager(t, mgmt, bin)
	if err := c.waitReady(ctx); err != nil {
		t.Fatalf("Cluster API manager not ready: %v\n--- last lines of %s ---\n%s", err, c.Log, tailFile(c.Log, 40))
	}
	startLabProvider(t, mgmt, workload)
	return c
}

// startLabProvider runs the lab's Cluster API provider (package capiinfra)
// against mgmt in the test process until the test ends, its Nodes in
// workload, its log in mgmt's logs/.
func startLabProvider(t testing.TB, mgmt, workload *Env) {
	t.Helper()
	kubeconfig, err := os.ReadFile(workload.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(mgmt.Dir, "logs", labProvider+".log")
	f, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	logger := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(f), textlogger.Verbosity(1)))
	provider, err := capiinfra.New(mgmt.Config, capiinfra.Options{Kubeconfig: kubeconfig, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- provider.Start(ctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("lab Cluster API provider: %v", err)
		}
		_ = f.Close()
		if t.Failed() {
			t.Logf("--- %s (last lines of %s) ---\n%s", labProvider, log, tailFile(log, 40))
		}
	})
}

// startCAPIManager starts the manager with its log in the lab's logs/, to be
// stopped (and its log shown, if the test failed) when the test ends.
func startCAPIManager(t testing.TB, env *Env, bin string) *ClusterAPI {
	t.Helper()
	// The manager always starts its webhook server, which needs a certificate.
	certDir := filepath.Join(env.Dir, "pki", "capi-webhook")
	crt, key, err := certutil.GenerateSelfSignedCertKey("127.0.0.1", []net.IP{net.ParseIP("127.0.0.1")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(certDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(certDir, "tls.crt"), crt, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(certDir, "tls.key"), key, 0o600); err != nil {
		t.Fatal(err)
	}
	_, webhookPort, _ := net.SplitHostPort(FreeAddr(t))
	health := FreeAddr(t)
	args := []string{
		"--kubeconfig=" + env.Kubeconfig,
		"--leader-elect=false",
		"--health-addr=" + health,
		"--diagnostics-address=" + FreeAddr(t),
		"--insecure-diagnostics=true",
		"--webhook-port=" + webhookPort,
		"--webhook-cert-dir=" + certDir,
		// MachinePools (the lab's LabMachinePool): on by default in v1.14
		// (Beta), asked for all the same so that the lab does not depend on
		// the default.
		"--feature-gates=MachinePool=true",
		"--v=2",
	}

	log := filepath.Join(env.Dir, "logs", capiManager+".log")
	f, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(bin, capiManager), args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("--- %s (last lines of %s) ---\n%s", capiManager, log, tailFile(log, 60))
		}
	})
	return &ClusterAPI{Log: log, readyURL: "http://" + health + "/readyz", exited: exited}
}

// waitReady waits until the manager's readiness endpoint answers 200, or the
// manager exits.
func (c *ClusterAPI) waitReady(ctx context.Context) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		select {
		case <-c.exited:
			return false, errors.New("the manager exited")
		default:
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.readyURL, nil)
		if err != nil {
			return false, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			last = err
			return false, nil
		}
		_ = resp.Body.Close()
		last = errors.New(resp.Status)
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil && last != nil {
		return fmt.Errorf("%w (last check: %w)", err, last)
	}
	return err
}

// tailFile returns the last n lines of a file.
func tailFile(path string, n int) string {
	data, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
