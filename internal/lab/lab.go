// Package lab runs a local Kubernetes control plane from real binaries: etcd and
// kube-apiserver always, and optionally kube-scheduler, kube-controller-manager
// and kwok (fake kubelets). Integration tests use the first two, e2e tests and
// `spotter lab up` all of them.
//
// Every run lives in one directory: certificates, the admin kubeconfig, a log per
// component (logs/) and a PID file per process (pids/). Ports are chosen per run,
// so runs may proceed in parallel. Processes of a run die with the process that
// started them; a later Start also kills what a killed run left behind.
package lab

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Options select what a lab runs.
type Options struct {
	// BinDir holds etcd, kube-apiserver, kube-scheduler,
	// kube-controller-manager, kubectl and kwok (see FindBinaries).
	BinDir string
	// Dir is the run directory. Empty: a new directory under RunsRoot().
	Dir string
	// Full adds kube-scheduler, kube-controller-manager and kwok to etcd and
	// kube-apiserver.
	Full bool
	// Detach lets the processes outlive the caller (`spotter lab up`); stop them
	// with StopDir. Otherwise they die with the caller.
	Detach bool
	// Progress, when set, receives one line per step.
	Progress io.Writer
	// StartTimeout bounds the start of each component. Default 90s.
	StartTimeout time.Duration
}

// Lab is a running control plane.
type Lab struct {
	// Dir is the run directory.
	Dir string
	// Kubeconfig is the path of the admin kubeconfig (group system:masters).
	Kubeconfig string
	// Config is the admin REST configuration.
	Config *rest.Config
	// Server is the apiserver URL.
	Server string

	procs    []*process // in start order
	progress io.Writer
	pki      *pki
	opts     Options
	// apiReady tells when the apiserver is ready (RestartAPIServer).
	apiReady func(context.Context) error
}

// Component names, also the names of their binaries, logs and PID files.
const (
	Etcd              = "etcd"
	APIServer         = "kube-apiserver"
	Scheduler         = "kube-scheduler"
	ControllerManager = "kube-controller-manager"
	Kwok              = "kwok"
	Kubectl           = "kubectl"
)

// KwokNodeAnnotation marks the nodes that the lab's kwok manages.
const KwokNodeAnnotation = "kwok.x-k8s.io/node"

// RunsRoot is where runs without an explicit Dir are created.
func RunsRoot() string {
	return filepath.Join(os.TempDir(), "spotter-lab-runs")
}

// Start brings up a lab and returns when every component is ready. On failure
// it stops whatever it started and returns an error that includes the failing
// component's last log lines.
func Start(ctx context.Context, opts Options) (l *Lab, err error) {
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 90 * time.Second
	}
	for _, name := range binariesFor(opts.Full) {
		if _, err := os.Stat(filepath.Join(opts.BinDir, name)); err != nil {
			return nil, fmt.Errorf("binary %s missing in %q: run hack/kube-bin.sh: %w", name, opts.BinDir, err)
		}
	}
	CleanupStale(RunsRoot())

	dir := opts.Dir
	if dir == "" {
		if err := os.MkdirAll(RunsRoot(), 0o755); err != nil {
			return nil, err
		}
		if dir, err = os.MkdirTemp(RunsRoot(), "run-"); err != nil {
			return nil, err
		}
	}
	for _, sub := range []string{"logs", "pids", "pki", "etcd"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return nil, err
		}
	}
	if !opts.Detach {
		// Marks the run as owned by this process: CleanupStale kills its
		// processes once this process is gone.
		if err := writePIDFile(filepath.Join(dir, "owner.pid"), os.Getpid()); err != nil {
			return nil, err
		}
	}

	l = &Lab{Dir: dir, Kubeconfig: filepath.Join(dir, "admin.kubeconfig"), progress: opts.Progress, opts: opts}
	// Every failure below returns a nil *Lab, so the cleanup keeps its own
	// reference to what was started.
	started := l
	defer func() {
		if err != nil {
			started.Stop()
		}
	}()

	l.say("lab directory %s", dir)
	pki, err := newPKI(filepath.Join(dir, "pki"))
	if err != nil {
		return nil, err
	}
	l.pki = pki
	start := func(name string, args []string, env []string, ready func(context.Context) error) error {
		began := time.Now()
		l.say("starting %s", name)
		p, err := startProcess(dir, name, filepath.Join(opts.BinDir, name), args, env, opts.Detach)
		if err != nil {
			return err
		}
		l.procs = append(l.procs, p)
		if err := l.waitReady(ctx, p, opts.StartTimeout, ready); err != nil {
			return fmt.Errorf("%s did not become ready: %w\n--- last lines of %s ---\n%s", name, err, p.logPath, tail(p.logPath, 30))
		}
		l.say("%s ready in %s", name, time.Since(began).Round(10*time.Millisecond))
		return nil
	}

	ports, err := freePorts(6)
	if err != nil {
		return nil, err
	}
	etcdClient, etcdPeer, apiPort, schedPort, kcmPort, kwokPort := ports[0], ports[1], ports[2], ports[3], ports[4], ports[5]

	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", etcdClient)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", etcdPeer)
	err = start(Etcd, []string{
		"--name=lab",
		"--data-dir=" + filepath.Join(dir, "etcd"),
		"--listen-client-urls=" + etcdURL, "--advertise-client-urls=" + etcdURL,
		"--listen-peer-urls=" + peerURL, "--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=lab=" + peerURL,
		// A lab's data is thrown away; fsync only slows it down.
		"--unsafe-no-fsync",
		"--log-level=warn",
	}, nil, func(ctx context.Context) error { return httpOK(ctx, etcdURL+"/health", nil) })
	if err != nil {
		return nil, err
	}

	l.Server = fmt.Sprintf("https://127.0.0.1:%d", apiPort)
	if err := l.writeKubeconfig(pki); err != nil {
		return nil, err
	}
	if l.Config, err = clientcmd.BuildConfigFromFlags("", l.Kubeconfig); err != nil {
		return nil, err
	}
	l.Config.QPS, l.Config.Burst = 200, 400
	client, err := kubernetes.NewForConfig(l.Config)
	if err != nil {
		return nil, err
	}

	apiArgs := []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(apiPort),
		"--tls-cert-file=" + pki.servingCert, "--tls-private-key-file=" + pki.servingKey,
		"--client-ca-file=" + pki.caCert,
		"--service-account-key-file=" + pki.saPub,
		"--service-account-signing-key-file=" + pki.saKey,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-cluster-ip-range=10.0.0.0/16",
		"--authorization-mode=Node,RBAC",
		"--allow-privileged=true",
		// With one apiserver on loopback, the endpoint reconciler only logs errors.
		"--endpoint-reconciler-type=none",
		"--v=0",
	}
	if !opts.Full {
		// Without the controller-manager nothing creates the default service
		// accounts, and pods would be refused.
		apiArgs = append(apiArgs, "--disable-admission-plugins=ServiceAccount")
	}
	l.apiReady = func(ctx context.Context) error {
		body, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			return fmt.Errorf("%w: %s", err, body)
		}
		return nil
	}
	err = start(APIServer, apiArgs, nil, l.apiReady)
	if err != nil {
		return nil, err
	}
	if !opts.Full {
		return l, nil
	}

	common := []string{
		"--kubeconfig=" + l.Kubeconfig,
		"--authentication-kubeconfig=" + l.Kubeconfig,
		"--authorization-kubeconfig=" + l.Kubeconfig,
		"--bind-address=127.0.0.1",
		"--leader-elect=false",
	}
	healthz := func(port int) func(context.Context) error {
		return func(ctx context.Context) error {
			return httpOK(ctx, fmt.Sprintf("https://127.0.0.1:%d/healthz", port), insecureTLS)
		}
	}
	err = start(Scheduler, append(common, "--secure-port="+strconv.Itoa(schedPort)), nil, healthz(schedPort))
	if err != nil {
		return nil, err
	}
	// The controller-manager runs as kubeadm and the managed clusters run it:
	// as system:kube-controller-manager, each controller with its own
	// ServiceAccount's token (kube-system:daemon-set-controller creates the
	// DaemonSets' pods, which the chart's agent-identity policy checks).
	kcmKubeconfig, err := l.UserKubeconfig("system:kube-controller-manager")
	if err != nil {
		return nil, err
	}
	kcmArgs := append([]string{}, common...)
	kcmArgs[0] = "--kubeconfig=" + kcmKubeconfig
	err = start(ControllerManager, append(kcmArgs,
		"--secure-port="+strconv.Itoa(kcmPort),
		"--service-account-private-key-file="+pki.saKey,
		"--root-ca-file="+pki.caCert,
		"--cluster-signing-cert-file="+pki.caCert,
		"--cluster-signing-key-file="+pki.caKey,
		"--use-service-account-credentials=true",
	), nil, func(ctx context.Context) error {
		if err := healthz(kcmPort)(ctx); err != nil {
			return err
		}
		// Pods are refused until the default service account exists.
		_, err := client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err
	})
	if err != nil {
		return nil, err
	}

	stages, err := writeKwokStages(opts.BinDir, dir)
	if err != nil {
		return nil, err
	}
	err = start(Kwok, []string{
		"--kubeconfig=" + l.Kubeconfig,
		"--config=" + stages,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=" + KwokNodeAnnotation + "=fake",
		"--server-address=127.0.0.1:" + strconv.Itoa(kwokPort),
		"--node-lease-duration-seconds=40",
		// Room for tens of thousands of pod IPs.
		"--cidr=10.128.0.1/10",
	}, []string{"HOME=" + dir}, func(ctx context.Context) error {
		return httpOK(ctx, fmt.Sprintf("http://127.0.0.1:%d/healthz", kwokPort), nil)
	})
	if err != nil {
		return nil, err
	}
	return l, nil
}

// Stop ends every component, clients first and etcd last (an apiserver whose
// etcd is gone hangs for about 20 s before it exits), and removes the PID files.
// The directory and its logs stay.
func (l *Lab) Stop() {
	for i := len(l.procs) - 1; i >= 0; i-- {
		l.procs[i].stop(15 * time.Second)
	}
	l.procs = nil
	_ = os.Remove(filepath.Join(l.Dir, "owner.pid"))
}

// RestartAPIServer stops kube-apiserver (SIGTERM, as a rolling update of the
// control plane does), leaves it down for down, and starts it again with the
// same flags: the same port and the same etcd, so objects and their
// resourceVersions are kept. It returns once the apiserver is ready again; the
// other components and every client reconnect by themselves.
func (l *Lab) RestartAPIServer(ctx context.Context, down time.Duration) error {
	i := slices.IndexFunc(l.procs, func(p *process) bool { return p.name == APIServer })
	if i < 0 {
		return errors.New("the lab runs no kube-apiserver")
	}
	old := l.procs[i]
	l.say("stopping %s", APIServer)
	old.stop(15 * time.Second)
	select {
	case <-time.After(down):
	case <-ctx.Done():
		return ctx.Err()
	}
	l.say("starting %s again", APIServer)
	p, err := startProcess(l.Dir, APIServer, old.cmd.Path, old.cmd.Args[1:], old.env, l.opts.Detach)
	if err != nil {
		return err
	}
	l.procs[i] = p
	if err := l.waitReady(ctx, p, l.opts.StartTimeout, l.apiReady); err != nil {
		return fmt.Errorf("%s did not become ready again: %w\n--- last lines of %s ---\n%s", APIServer, err, p.logPath, tail(p.logPath, 30))
	}
	return nil
}

// Logs returns the last n lines of every component's log, for test failures.
func (l *Lab) Logs(n int) string {
	var b strings.Builder
	for _, p := range l.procs {
		fmt.Fprintf(&b, "--- %s (last %d lines of %s) ---\n%s\n", p.name, n, p.logPath, tail(p.logPath, n))
	}
	return b.String()
}

// StopDir stops the processes of the lab in dir, by their PID files, in the
// same order as Stop. It is how `spotter lab down` ends a detached lab.
func StopDir(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, "pids")); err != nil {
		return fmt.Errorf("no lab in %s: %w", dir, err)
	}
	for _, name := range []string{Kwok, ControllerManager, Scheduler, APIServer, Etcd} {
		killPIDFile(filepath.Join(dir, "pids", name+".pid"), 15*time.Second)
	}
	return nil
}

// Running reports whether the apiserver of the lab in dir is running.
func Running(dir string) bool {
	_, alive := readPIDFile(filepath.Join(dir, "pids", APIServer+".pid"))
	return alive
}

// CleanupStale stops the processes of runs under root whose owner process has
// died (a test binary killed with SIGKILL, say) and removes their directories.
// Runs of live owners, and detached labs, are left alone.
func CleanupStale(root string) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return
	}
	for _, e := range entries {
		dir := filepath.Join(root, e.Name())
		owner := filepath.Join(dir, "owner.pid")
		if _, err := os.Stat(owner); err != nil {
			continue // detached, or stopped cleanly
		}
		if _, alive := readPIDFile(owner); alive {
			continue
		}
		_ = StopDir(dir)
		_ = os.RemoveAll(dir)
	}
}

func (l *Lab) say(format string, args ...any) {
	if l.progress != nil {
		fmt.Fprintf(l.progress, "[lab] "+format+"\n", args...)
	}
}

// waitReady polls ready until it succeeds, the process exits or timeout passes.
func (l *Lab) waitReady(ctx context.Context, p *process, timeout time.Duration, ready func(context.Context) error) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if done, err := p.exited(); done {
			return false, fmt.Errorf("process exited: %w", err)
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		last = ready(rctx)
		return last == nil, nil
	})
	if err != nil && last != nil && !strings.Contains(err.Error(), "process exited") {
		return fmt.Errorf("%w (last check: %w)", err, last)
	}
	return err
}

func (l *Lab) writeKubeconfig(p *pki) error {
	return writeKubeconfig(l.Kubeconfig, l.Server, p.caPEM, p.adminCertPEM, p.adminKeyPEM)
}

// UserKubeconfig writes a kubeconfig for a user authenticated by a client
// certificate with the given name and groups, and returns its path. The user has
// only the permissions RBAC grants it: tests use it for permission errors.
func (l *Lab) UserKubeconfig(user string, groups ...string) (string, error) {
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: user, Organization: groups},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	dir := filepath.Join(l.Dir, "pki")
	certPEM, keyPEM, err := l.pki.issue(tmpl, filepath.Join(dir, user+".crt"), filepath.Join(dir, user+".key"))
	if err != nil {
		return "", err
	}
	path := filepath.Join(l.Dir, user+".kubeconfig")
	return path, writeKubeconfig(path, l.Server, l.pki.caPEM, certPEM, keyPEM)
}

func writeKubeconfig(path, server string, ca, cert, key []byte) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["lab"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos["user"] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
	cfg.Contexts["lab"] = &clientcmdapi.Context{Cluster: "lab", AuthInfo: "user"}
	cfg.CurrentContext = "lab"
	return clientcmd.WriteToFile(*cfg, path)
}

func binariesFor(full bool) []string {
	if full {
		return []string{Etcd, APIServer, Scheduler, ControllerManager, Kwok, Kubectl}
	}
	return []string{Etcd, APIServer}
}

func freePorts(n int) ([]int, error) {
	seen := map[int]bool{}
	var ports []int
	for len(ports) < n {
		p, err := freePort()
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		if !seen[p] {
			seen[p] = true
			ports = append(ports, p)
		}
	}
	return ports, nil
}

func httpOK(ctx context.Context, url string, client *http.Client) error {
	if client == nil {
		client = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// ErrNoBinaries is returned by FindBinaries when it cannot locate or build the
// Kubernetes binaries.
var ErrNoBinaries = errors.New("kubernetes test binaries not found")
