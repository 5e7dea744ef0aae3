package v1alpha1

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// writeConfig writes a valid configuration of at least size bytes (ending at
// an entry): the defaults' sections and a price for each of many instance
// types, the one section that grows. The same size gives the same bytes: the
// inputs of BenchmarkConfigPeakMemory come from the repository alone.
func writeConfig(w io.Writer, size int64) error {
	bw := bufio.NewWriter(w)
	n, _ := fmt.Fprint(bw, header+"dryRun: true\nrescheduler:\n  interval: 30s\npricing:\n  currency: USD\n  instanceTypes:\n")
	written := int64(n)
	for i := 0; written < size; i++ {
		n, _ := fmt.Fprintf(bw, "    family%d.size%d: {onDemand: %d.%03d, spot: 0.%03d}\n", i/97, i%97, 1+i%7, i%1000, i%1000)
		written += int64(n)
	}
	return bw.Flush()
}

// BenchmarkConfigPeakMemory reports the peak memory (maximum resident set) of
// a process that reads a 1 MB and a 50 MB configuration, beside that of a
// process that reads nothing: with Load (at most MaxFileBytes: the 50 MB file
// is refused) and with Parse of the whole file (no limit: the decoder's own
// cost).
//
//	go test ./pkg/apis/config/v1alpha1 -run '^$' -bench ConfigPeakMemory -benchtime 1x
//
// Each read runs in a child process (this test binary, TestMemoryHelper),
// whose address space is capped at 8 GiB so that no input can take the
// machine down.
func BenchmarkConfigPeakMemory(b *testing.B) {
	for _, size := range []int64{1e6, 50e6} {
		path := filepath.Join(b.TempDir(), "config.yaml")
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		if err := writeConfig(f, size); err != nil {
			b.Fatal(err)
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
		fi, err := os.Stat(path)
		if err != nil {
			b.Fatal(err)
		}
		for _, mode := range []string{"load", "parse"} {
			b.Run(fmt.Sprintf("%s/%dMB", mode, size/1e6), func(b *testing.B) {
				var peak, idle int64
				for range b.N {
					rss, out := maxRSS(b, mode, path)
					peak = max(peak, rss)
					b.Log(strings.TrimSpace(strings.Split(out, "\n")[0]))
					rss, _ = maxRSS(b, "idle", path)
					idle = max(idle, rss)
				}
				b.ReportMetric(float64(fi.Size())/1e6, "input-MB")
				b.ReportMetric(float64(peak)/(1<<20), "peak-RSS-MiB")
				b.ReportMetric(float64(idle)/(1<<20), "idle-RSS-MiB")
				b.ReportMetric(float64(peak-idle)/float64(fi.Size()), "(peak-idle)/input")
			})
		}
	}
}

// maxRSS runs TestMemoryHelper in a child process and returns its maximum
// resident set in bytes, and its output.
func maxRSS(tb testing.TB, mode, path string) (int64, string) {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestMemoryHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), "SPOTTER_MEMORY_HELPER="+mode+":"+path)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "helper done") {
		tb.Fatalf("%s %s: %v\n%s", mode, path, err, out)
	}
	return cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10, string(out) // KiB on Linux
}

// TestMemoryHelper is the child process of BenchmarkConfigPeakMemory; it does
// nothing (skips) in a normal test run.
func TestMemoryHelper(t *testing.T) {
	mode, path, ok := strings.Cut(os.Getenv("SPOTTER_MEMORY_HELPER"), ":")
	if !ok {
		t.Skip("the child process of BenchmarkConfigPeakMemory")
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: 8 << 30, Max: 8 << 30}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var c *SpotterConfiguration
	var err error
	switch mode {
	case "idle":
		fmt.Println("idle")
	case "load":
		c, err = Load(path)
	case "parse":
		var data []byte
		if data, err = os.ReadFile(path); err == nil {
			var errs field.ErrorList
			if c, errs = Parse(data); len(errs) > 0 {
				err = errs.ToAggregate()
			}
		}
	}
	if mode != "idle" {
		if err != nil {
			fmt.Printf("%s: refused in %s: %.150s\n", mode, time.Since(start).Round(time.Millisecond), err)
		} else {
			fmt.Printf("%s: %d instance types in %s\n", mode, len(c.Pricing.InstanceTypes), time.Since(start).Round(time.Millisecond))
		}
	}
	runtime.KeepAlive(c)
	fmt.Println("helper done")
}
