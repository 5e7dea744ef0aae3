package lab

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// process is one lab component running as a child process.
type process struct {
	name    string
	cmd     *exec.Cmd
	env     []string // added to the environment (RestartAPIServer)
	logPath string
	pidPath string
	done    chan struct{} // closed when the process has exited (non-detached only)
	waitErr error
}

// startProcess runs bin with args, its output in dir/logs/NAME.log and its PID in
// dir/pids/NAME.pid. A detached process gets its own session and outlives the
// caller (`spotter lab up`); any other is killed by the kernel if the caller dies,
// so that a killed test run leaves nothing behind.
func startProcess(dir, name, bin string, args, env []string, detach bool) (*process, error) {
	logPath := filepath.Join(dir, "logs", name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening log of %s: %w", name, err)
	}
	defer func() { _ = logFile.Close() }() // the child keeps its own descriptor

	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(), env...)
	if detach {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	} else {
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, env: env, logPath: logPath, pidPath: filepath.Join(dir, "pids", name+".pid")}
	if err := writePIDFile(p.pidPath, cmd.Process.Pid); err != nil {
		// Most often the process has exited already (its PID file cannot
		// name a zombie): say how, with its log.
		_ = cmd.Process.Kill()
		how := "exited"
		if status := cmd.Wait(); status != nil {
			how = status.Error()
		}
		return nil, fmt.Errorf("%s did not start (recording its PID: %w; the process: %s)\n--- last lines of %s ---\n%s", name, err, how, logPath, tail(logPath, 30))
	}
	if detach {
		// Nobody waits for it here: `spotter lab down` stops it by its PID file.
		_ = cmd.Process.Release()
		return p, nil
	}
	p.done = make(chan struct{})
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether a non-detached process has ended, and how.
func (p *process) exited() (bool, error) {
	if p.done == nil {
		return false, nil
	}
	select {
	case <-p.done:
		return true, p.waitErr
	default:
		return false, nil
	}
}

// stop ends the process: SIGTERM, then SIGKILL after grace.
func (p *process) stop(grace time.Duration) {
	if p.done == nil {
		killPIDFile(p.pidPath, grace)
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	_ = os.Remove(p.pidPath)
}

// A PID file holds "PID STARTTIME": the start time (from /proc) tells a live
// process from an unrelated one that reused the PID.
func writePIDFile(path string, pid int) error {
	start, err := processStartTime(pid)
	if err != nil {
		return err
	}
	return os.WriteFile(path, fmt.Appendf(nil, "%d %d\n", pid, start), 0o644)
}

// readPIDFile returns the PID recorded in path if that process still runs.
func readPIDFile(path string) (int, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	var pid int
	var start uint64
	if _, err := fmt.Sscanf(string(data), "%d %d", &pid, &start); err != nil {
		return 0, false
	}
	now, err := processStartTime(pid)
	return pid, err == nil && now == start
}

// killPIDFile stops the process named by a PID file, if it still runs, and
// removes the file.
func killPIDFile(path string, grace time.Duration) {
	if pid, alive := readPIDFile(path); alive {
		_ = syscall.Kill(pid, syscall.SIGTERM)
		deadline := time.Now().Add(grace)
		for time.Now().Before(deadline) {
			if _, alive := readPIDFile(path); !alive {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if _, alive := readPIDFile(path); alive {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	_ = os.Remove(path)
}

// processStartTime reads a process's start time, in clock ticks since boot, from
// /proc/PID/stat (field 22, see proc(5)).
func processStartTime(pid int) (uint64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; the fields after it don't.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("malformed /proc stat")
	}
	fields := strings.Fields(s[i+1:])
	const startTimeIndex = 22 - 3 // fields[0] is field 3
	if len(fields) <= startTimeIndex {
		return 0, errors.New("malformed /proc stat")
	}
	// A zombie has exited already; it is not a live process.
	if fields[0] == "Z" {
		return 0, errors.New("zombie")
	}
	return strconv.ParseUint(fields[startTimeIndex], 10, 64)
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
