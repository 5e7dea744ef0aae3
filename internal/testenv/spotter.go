package testenv

import (
	"fmt"
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
	buildOnce sync.Once
	builtPath string
	buildErr  error
)

// SpotterBinary builds bin/spotter from the module under test, once per test
// binary, and returns its path. E2e tests run Spotter as a process, as a
// cluster would.
func SpotterBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		out, err := exec.Command("go", "env", "GOMOD").Output()
		if err != nil {
			buildErr = err
			return
		}
		root := filepath.Dir(strings.TrimSpace(string(out)))
		dir, err := os.MkdirTemp("", "spotter-bin-")
		if err != nil {
			buildErr = err
			return
		}
		builtPath = filepath.Join(dir, "spotter")
		cmd := exec.Command("go", "build", "-o", builtPath, "./cmd/spotter")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/spotter: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtPath
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
	bin := SpotterBinary(t)
	log := filepath.Join(t.TempDir(), name+".log")
	f, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
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
