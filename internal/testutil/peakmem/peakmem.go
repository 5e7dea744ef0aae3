// Package peakmem measures the peak memory (maximum resident set) of reading
// an input, in a child process: the benchmark's own test binary, re-run with
// only its helper test selected, whose address space is capped so that no
// input can take the machine down. The configuration and snapshot readers'
// benchmarks use it (BENCHMARKS.md).
package peakmem

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// envVar carries "mode:path" to the child process.
const envVar = "SPOTTER_MEMORY_HELPER"

// AddressSpaceLimit caps a child's address space: 8 GiB.
const AddressSpaceLimit = 8 << 30

// Report runs the helper test b.N times in mode on path and in mode "idle",
// and reports the input's size, both peaks and their difference per input byte.
// helper is the name of the test that calls Child.
func Report(b *testing.B, helper, mode, path string) {
	b.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var peak, idle int64
	for range b.N {
		rss, out := MaxRSS(b, helper, mode, path)
		peak = max(peak, rss)
		b.Log(strings.TrimSpace(strings.Split(out, "\n")[0]))
		rss, _ = MaxRSS(b, helper, "idle", path)
		idle = max(idle, rss)
	}
	b.ReportMetric(float64(fi.Size())/1e6, "input-MB")
	b.ReportMetric(float64(peak)/(1<<20), "peak-RSS-MiB")
	b.ReportMetric(float64(idle)/(1<<20), "idle-RSS-MiB")
	b.ReportMetric(float64(peak-idle)/float64(fi.Size()), "(peak-idle)/input")
}

// MaxRSS runs the test helper in a child process with mode and path and
// returns its maximum resident set in bytes, and its output, which must say
// "helper done".
func MaxRSS(tb testing.TB, helper, mode, path string) (int64, string) {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+helper+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), envVar+"="+mode+":"+path)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "helper done") {
		tb.Fatalf("%s %s: %v\n%s", mode, path, err, out)
	}
	return cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10, string(out) // KiB on Linux
}

// Child returns the mode and path a helper test runs with, after capping the
// process's address space; outside a child it skips the test.
func Child(t *testing.T) (mode, path string) {
	t.Helper()
	mode, path, ok := strings.Cut(os.Getenv(envVar), ":")
	if !ok {
		t.Skip("the child process of a peak-memory benchmark")
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: AddressSpaceLimit, Max: AddressSpaceLimit}); err != nil {
		t.Fatal(err)
	}
	return mode, path
}
