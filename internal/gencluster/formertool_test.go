package gencluster

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

// formerTool is what the gencluster tool the benchmarks used before this
// package (shared/tools/gencluster of the Spotter workspace, which a clone
// does not have) printed and wrote for each set of flags: its summary line
// (less " bytes=N") and the SHA-256 of its output with the value of every
// image: line removed. Recorded from that tool's build on 2026-11-28.
var formerTool = []struct {
	args    []string
	summary string
	sha256  string
}{{
	[]string{"-nodes", "90"},
	"gencluster seed=1: nodes=90 (on-demand=54 spot-only-on-demand=17 spot=36) workloads=363 (spot-tolerating=284 anti-affinity=58 zone-spread=55) pods=2540 (28.2/node) pdbs=104 util min/mean/max on-demand=20/54/89% spot=44/50/54%",
	"24c201831e851b9af8b88e4f4b3b9f23bd71e3b6052718324d43fc32c7d6df7b",
}, {
	[]string{"-nodes", "120", "-spot-fill", "0.8", "-seed", "7", "-ondemand-frac", "0.5", "-spot-only-frac", "0.2", "-pods-per-node", "40"},
	"gencluster seed=7: nodes=120 (on-demand=60 spot-only-on-demand=10 spot=60) workloads=682 (spot-tolerating=544 anti-affinity=110 zone-spread=101) pods=4800 (40.0/node) pdbs=234 util min/mean/max on-demand=21/53/83% spot=68/73/79%",
	"3eb50bf72208d7c90f3fea51921f19010d5b7dfa2cf8b7bd909be471eda7b03e",
}, {
	[]string{"-nodes", "40", "-ondemand-frac", "0"},
	"gencluster seed=1: nodes=40 (on-demand=0 spot-only-on-demand=0 spot=40) workloads=167 (spot-tolerating=167 anti-affinity=15 zone-spread=24) pods=1105 (27.6/node) pdbs=46 util min/mean/max on-demand=- spot=44/50/54%",
	"50f6e054b81f91beecf0081462da34198eb3214e4f9cc7b0bf0f11f34eef8f64",
}, {
	[]string{"-nodes", "40", "-ondemand-frac", "1", "-spot-only-frac", "1"},
	"gencluster seed=1: nodes=40 (on-demand=40 spot-only-on-demand=40 spot=0) workloads=180 (spot-tolerating=180 anti-affinity=19 zone-spread=28) pods=1200 (30.0/node) pdbs=55 util min/mean/max on-demand=18/47/77% spot=-",
	"cbd08ff8aaf3df2847d3c25cde44ef50bdb8eb686a64a925b977f0592326f4c6",
}, {
	[]string{"-nodes", "12", "-pods-per-node", "110", "-seed", "3"},
	"gencluster seed=3: nodes=12 (on-demand=7 spot-only-on-demand=3 spot=5) workloads=86 (spot-tolerating=67 anti-affinity=16 zone-spread=13) pods=449 (37.4/node) pdbs=21 util min/mean/max on-demand=29/52/69% spot=48/51/54%",
	"bbe6b0ce46646107e9412406d1d0c67ea933c59f086972033dc59d0c49b98ea0",
}, {
	[]string{"-nodes", "30", "-pods-per-node", "0"},
	"gencluster seed=1: nodes=30 (on-demand=18 spot-only-on-demand=6 spot=12) workloads=0 (spot-tolerating=0 anti-affinity=0 zone-spread=0) pods=0 (0.0/node) pdbs=0 util min/mean/max on-demand=0/0/0% spot=0/0/0%",
	"0a1182652278bbd15b52bdb4dc541b4cace259e82e524ddf106ff64196a46475",
}}

// TestMatchesFormerTool checks that the package writes, byte for byte, what
// the former tool wrote for the same flags (but for the pods' image, which
// names no registry here), and prints the same summary.
func TestMatchesFormerTool(t *testing.T) {
	for _, tc := range formerTool {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			c, out := generate(t, parseArgs(t, tc.args...))
			if got := c.Stats().String(); got != tc.summary {
				t.Errorf("summary:\n got %s\nwant %s", got, tc.summary)
			}
			sum := sha256.Sum256(withoutImages(out))
			if got := hex.EncodeToString(sum[:]); got != tc.sha256 {
				t.Errorf("output (%d bytes) of SHA-256 %s without its images, the former tool's %s", len(out), got, tc.sha256)
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
