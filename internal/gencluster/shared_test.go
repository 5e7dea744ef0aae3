package gencluster

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// sharedTool is the gencluster tool of the Spotter workspace, beside the
// checkout, that the benchmarks used before this package.
var sharedTool = filepath.Join("..", "..", "..", "shared", "tools", "gencluster")

// TestMatchesSharedTool checks that the package writes, byte for byte, what
// the shared tool writes for the same flags, and prints the same summary.
// It is skipped where the shared tool is absent.
func TestMatchesSharedTool(t *testing.T) {
	if _, err := os.Stat(filepath.Join(sharedTool, "main.go")); err != nil {
		t.Skipf("no shared gencluster tool beside the checkout: %v", err)
	}
	if testing.Short() {
		t.Skip("builds the shared tool")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "gencluster")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = sharedTool
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the shared tool: %v\n%s", err, out)
	}
	for _, args := range [][]string{
		{"-nodes", "90"},
		{"-nodes", "120", "-spot-fill", "0.8", "-seed", "7", "-ondemand-frac", "0.5", "-spot-only-frac", "0.2", "-pods-per-node", "40"},
		{"-nodes", "40", "-ondemand-frac", "0"},
		{"-nodes", "40", "-ondemand-frac", "1", "-spot-only-frac", "1"},
		{"-nodes", "12", "-pods-per-node", "110", "-seed", "3"},
		{"-nodes", "30", "-pods-per-node", "0"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			file := filepath.Join(dir, "shared.yaml")
			var stderr bytes.Buffer
			cmd := exec.Command(bin, append(args, "-o", file)...)
			cmd.Stderr = &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("shared tool: %v\n%s", err, stderr.Bytes())
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}

			o := parseArgs(t, args...)
			c, got := generate(t, o)
			// The pods' image is the one difference: this package names no
			// registry.
			got, want = withoutImages(got), withoutImages(want)
			if i := firstDifference(got, want); i >= 0 {
				t.Errorf("%d bytes, the shared tool %d; first difference at byte %d:\n got %q\nwant %q",
					len(got), len(want), i, around(got, i), around(want, i))
			}
			summary := c.Stats().String()
			if s, _, _ := strings.Cut(strings.TrimSpace(stderr.String()), " bytes="); s != summary {
				t.Errorf("summary:\n got %s\nwant %s", summary, s)
			}
		})
	}
}

// withoutImages drops the value of every image: line.
func withoutImages(data []byte) []byte {
	lines := bytes.Split(data, []byte("\n"))
	for i, l := range lines {
		if j := bytes.Index(l, []byte("image: ")); j >= 0 {
			lines[i] = l[:j+len("image:")]
		}
	}
	return bytes.Join(lines, []byte("\n"))
}

func firstDifference(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

func around(b []byte, i int) []byte { return b[max(0, i-80):min(len(b), i+80)] }
