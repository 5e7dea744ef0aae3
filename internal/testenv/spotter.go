package testenv

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	buildMu sync.Mutex
	built   = map[string]string{} // package -> binary
)

// SpotterBinary builds bin/spotter from the module under test, once per test
// binary, and returns its path. E2e tests run Spotter as a process, as a
// cluster would.
func SpotterBinary(t testing.TB) string {
	t.Helper()
	return binary(t, "./cmd/spotter")
}

// AgentBinary builds spotter-agent from the module under test, once per test
// binary, and returns its path.
func AgentBinary(t testing.TB) string {
	t.Helper()
	return binary(t, "./cmd/spotter-agent")
}

func binary(t testing.TB, pkg string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if path, ok := built[pkg]; ok {
		return path
	}
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Dir(strings.TrimSpace(string(out)))
	dir, err := os.MkdirTemp("", "spotter-bin-")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", path, pkg)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	built[pkg] = path
	return path
}

// Process is a Spotter process started by a test.
type Process struct {
	Cmd *exec.Cmd
	Log string
	t   testing.TB
}

// StartSpotter runs the spotter binary with args; its output goes to a log
// file printed when the test fails. It is killed when the test ends, and by the
// kernel if the test binary dies.
func StartSpotter(t testing.TB, name string, args ...string) *Process {
	t.Helper()
	return startProcess(t, SpotterBinary(t), name, args)
}

// StartSpotterEnv is StartSpotter with env added to the test's environment
// (POD_NAMESPACE=..., as a pod's would have).
func StartSpotterEnv(t testing.TB, name string, env []string, args ...string) *Process {
	t.Helper()
	return startProcessEnv(t, SpotterBinary(t), name, env, args)
}

// StartAgent runs spotter-agent with args, as StartSpotter runs spotter.
func StartAgent(t testing.TB, name string, args ...string) *Process {
	t.Helper()
	return startProcess(t, AgentBinary(t), name, args)
}

func startProcess(t testing.TB, bin, name string, args []string) *Process {
	t.Helper()
	return startProcessEnv(t, bin, name, nil, args)
}

func startProcessEnv(t testing.TB, bin, name string, env, args []string) *Process {
	t.Helper()
	log := filepath.Join(t.TempDir(), name+".log")
	f, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	p := &Process{Cmd: cmd, Log: log, t: t}
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			data, _ := os.ReadFile(log)
			lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
			if len(lines) > 60 {
				lines = lines[len(lines)-60:]
			}
			t.Logf("--- %s (last lines of %s) ---\n%s", name, log, strings.Join(lines, "\n"))
		}
	})
	return p
}

// Stop ends the process with SIGTERM, then SIGKILL after 10 s.
func (p *Process) Stop() {
	if p.Cmd.ProcessState != nil {
		return
	}
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = p.Cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = p.Cmd.Process.Kill()
		<-done
	}
}

// Kill ends the process with SIGKILL, as a crash would.
func (p *Process) Kill() {
	_ = p.Cmd.Process.Kill()
	_ = p.Cmd.Wait()
}

// FreeAddr returns a 127.0.0.1:port address that was free a moment ago.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}
