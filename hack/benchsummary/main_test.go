package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Every row of BENCHMARKS.md reads as the summary reads it, with a unique id
// and a command, and every link to a row from the README and the docs
// resolves.
func TestBenchmarksFileAndLinks(t *testing.T) {
	rows, err := parseRows("../../BENCHMARKS.md")
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	cheap := 0
	for _, r := range rows {
		if ids[r.id] {
			t.Errorf("row %s appears twice", r.id)
		}
		ids[r.id] = true
		if r.command == "" || r.today == "" {
			t.Errorf("row %s: no command or no figure", r.id)
		}
		if r.cheap {
			cheap++
		}
	}
	if cheap == 0 {
		t.Error("no row is marked cheap: make bench-summary would run nothing")
	}
	files := []string{"../../README.md", "../../BENCHMARKS.md"}
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, docs...)
	link := regexp.MustCompile(`BENCHMARKS\.md#([a-z0-9-]+)|\]\(#([a-z0-9-]+)\)`)
	anchors := regexp.MustCompile(`<a id="([a-z0-9-]+)"></a>`)
	data, err := os.ReadFile("../../BENCHMARKS.md")
	if err != nil {
		t.Fatal(err)
	}
	inFile := map[string]bool{"method": true}
	for _, m := range anchors.FindAllStringSubmatch(string(data), -1) {
		inFile[m[1]] = true
	}
	links := 0
	for _, f := range files {
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(body), -1) {
			id := m[1]
			if id == "" {
				if !strings.HasSuffix(f, "BENCHMARKS.md") {
					continue // a link within another file
				}
				id = m[2]
			}
			links++
			if !inFile[id] {
				t.Errorf("%s links to BENCHMARKS.md#%s, which is no row or anchor", f, id)
			}
		}
	}
	if links == 0 {
		t.Error("no link to a row found: the check saw nothing")
	}
}

func TestSimulateRow(t *testing.T) {
	out := `       STRATEGY        COST  SAVING  SHARE OF BOUND  SHARE OF PACKING  SPOT POD-HOURS  EVICTIONS/POD/DAY  PREEMPTED PODS  PENDING POD-MIN  PDB BELOW BUDGET POD-MIN  ZONE SPREAD SHORT ZONE-MIN  EVICTIONS REFUSED       BACK TO SPOT
    rescheduler  340.22 USD   23.8%             40%               46%           41.4%              0.171             307             1188                   114 (0)                        2848                120       1.7h (13.7h)
       migrator  246.85 USD   44.7%             75%               87%           77.9%              3.059             639             4915                   143 (1)                        5374               2490        1.1h (5.8h)
        spotter  244.93 USD   45.2%             76%               88%           74.8%              0.413             498             1542                    95 (0)                        1630            7 (869)         39m (3.8h)
        spotter  250.00 USD   44.2%             74%               86%           74.8%              0.401             498             1500                    90 (0)                        1600            7 (869)         39m (3.8h)
`
	for id, want := range map[string]string{
		"sim-default-spotter":            "spotter over 2 runs: saving % 44.7 (44.2 – 45.2), share of bound % 75 (74 – 76), share of packing % 87 (86 – 88), evictions/pod/day 0.407 (0.401 – 0.413), pending pod-min 1521 (1500 – 1542), PDB below budget pod-min 92.5 (90 – 95), zone-min short 1615 (1600 – 1630)",
		"sim-default-cost-manager":       "migrator over 1 runs: saving % 44.7, share of bound % 75, share of packing % 87, evictions/pod/day 3.06, pending pod-min 4915, PDB below budget pod-min 143, zone-min short 5374",
		"sim-aws-1node-spot-rescheduler": "rescheduler over 1 runs: saving % 23.8, share of bound % 40, share of packing % 46, evictions/pod/day 0.171, pending pod-min 1188, PDB below budget pod-min 114, zone-min short 2848",
	} {
		if got := simulateRow(id, out); got != want {
			t.Errorf("%s:\n got %s\nwant %s", id, got, want)
		}
	}
}
