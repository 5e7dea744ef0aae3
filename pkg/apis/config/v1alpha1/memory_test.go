package v1alpha1

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"spotter.dev/spotter/internal/testutil/peakmem"
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
		for _, mode := range []string{"load", "parse"} {
			b.Run(fmt.Sprintf("%s/%dMB", mode, size/1e6), func(b *testing.B) {
				peakmem.Report(b, "TestMemoryHelper", mode, path)
			})
		}
	}
}

// TestMemoryHelper is the child process of BenchmarkConfigPeakMemory; it does
// nothing (skips) in a normal test run.
func TestMemoryHelper(t *testing.T) {
	mode, path := peakmem.Child(t)
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
