package snapshot

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"spotter.dev/spotter/internal/testutil/peakmem"
)

// writeSnapshot writes a snapshot in kubectl's layout, of at least size bytes
// (ending at an object): nodes with 30 pods each, every object about as large
// as a real one (a 5,000-node, 150,000-pod snapshot of a real cluster is about
// 185 MB, 1.2 KB per object). The same size gives the same bytes: the inputs
// of BenchmarkLoadPeakMemory come from the repository alone.
func writeSnapshot(w io.Writer, size int64) error {
	bw := bufio.NewWriter(w)
	cw := &countingWriter{w: bw}
	fmt.Fprint(cw, "apiVersion: v1\nitems:\n")
	for n := 0; cw.n < size; n++ {
		node := fmt.Sprintf("node-%05d", n)
		class := []string{"on-demand", "spot"}[n%2]
		zone := fmt.Sprintf("zone-%c", 'a'+n%3)
		fmt.Fprintf(cw, `- apiVersion: v1
  kind: Node
  metadata:
    labels:
      karpenter.sh/capacity-type: %[2]s
      kubernetes.io/hostname: %[1]s
      node.kubernetes.io/instance-type: m5.xlarge
      topology.kubernetes.io/zone: %[3]s
    name: %[1]s
    uid: 00000000-0000-0000-0000-%012[4]d
  spec:
    providerID: aws:///%[3]s/i-%017[4]x
  status:
    allocatable:
      cpu: 3920m
      ephemeral-storage: "95551679124"
      memory: 15482Mi
      pods: "110"
    capacity:
      cpu: "4"
      ephemeral-storage: 104845292Ki
      memory: 16073Mi
      pods: "110"
    conditions:
    - lastHeartbeatTime: "2026-11-20T10:00:00Z"
      lastTransitionTime: "2026-11-20T09:00:00Z"
      message: kubelet is posting ready status
      reason: KubeletReady
      status: "True"
      type: Ready
`, node, class, zone, n)
		for i := 0; i < 30 && cw.n < size; i++ {
			app := fmt.Sprintf("app-%03d", (n*30+i)%997)
			fmt.Fprintf(cw, `- apiVersion: v1
  kind: Pod
  metadata:
    generateName: %[2]s-5d8f7c9b4-
    labels:
      app: %[2]s
      pod-template-hash: 5d8f7c9b4
    name: %[2]s-5d8f7c9b4-%05[3]d
    namespace: ns-%[4]d
    ownerReferences:
    - apiVersion: apps/v1
      blockOwnerDeletion: true
      controller: true
      kind: ReplicaSet
      name: %[2]s-5d8f7c9b4
      uid: 11111111-0000-0000-0000-%012[3]d
    uid: 22222222-0000-0000-0000-%012[3]d
  spec:
    containers:
    - image: registry.example.com/%[2]s:1.2.3
      name: main
      ports:
      - containerPort: 8080
        protocol: TCP
      resources:
        limits:
          memory: 512Mi
        requests:
          cpu: %[5]dm
          memory: 256Mi
    nodeName: %[1]s
    schedulerName: default-scheduler
    tolerations:
    - effect: NoExecute
      key: node.kubernetes.io/not-ready
      operator: Exists
      tolerationSeconds: 300
  status:
    phase: Running
    podIP: 10.%[6]d.%[7]d.%[8]d
    qosClass: Burstable
    startTime: "2026-11-20T10:00:00Z"
`, node, app, n*30+i, (n*30+i)%20, 50+10*(i%10), n%250, i, (n*7+i)%250)
		}
	}
	fmt.Fprint(cw, "kind: List\nmetadata:\n  resourceVersion: \"\"\n")
	return bw.Flush()
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// BenchmarkLoadPeakMemory reports the peak memory (maximum resident set) of
// a process that loads a 1 MB and a 50 MB snapshot, beside that of a process
// that loads nothing:
//
//	go test ./internal/snapshot -run '^$' -bench LoadPeakMemory -benchtime 1x
//
// Each load runs in a child process (this test binary, TestMemoryHelper),
// whose address space is capped at 8 GiB so that no input can take the
// machine down.
func BenchmarkLoadPeakMemory(b *testing.B) {
	for _, size := range []int64{1e6, 50e6} {
		b.Run(fmt.Sprintf("%dMB", size/1e6), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "snapshot.yaml")
			f, err := os.Create(path)
			if err != nil {
				b.Fatal(err)
			}
			if err := writeSnapshot(f, size); err != nil {
				b.Fatal(err)
			}
			if err := f.Close(); err != nil {
				b.Fatal(err)
			}
			peakmem.Report(b, "TestMemoryHelper", "load", path)
		})
	}
}

// TestMemoryHelper is the child process of BenchmarkLoadPeakMemory; it does
// nothing (skips) in a normal test run.
func TestMemoryHelper(t *testing.T) {
	mode, path := peakmem.Child(t)
	if mode == "load" {
		start := time.Now()
		s, err := LoadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		fmt.Printf("loaded %s in %s; live heap %.0f MiB\n", s.Counts(), took.Round(time.Millisecond), float64(ms.HeapAlloc)/(1<<20))
		runtime.KeepAlive(s)
	}
	fmt.Println("helper done")
}
