// Command benchsummary re-runs the rows of BENCHMARKS.md marked cheap and
// prints each as a table row beside the figure the file gives, so that the
// table can be checked against the code as it is:
//
//	make bench-summary            # every cheap row
//	go run ./hack/benchsummary -rows 'plan-,sim-default-time'
//
// A row's command is run as the table gives it: `go test` commands in the
// repository, `bin/spotter` commands in a scratch directory that holds the
// configurations they name (defaults.yaml, spot-first.yaml). A row whose
// command is "as OTHER" reads OTHER's output. What is printed of an output:
// the benchmark lines' figures (ns/op as ms), the wall time, user time and
// peak RSS /usr/bin/time reports, and for `spotter simulate` the row of the
// strategy the table's row is about, as mean (min – max) over the runs.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// row is one row of a table of BENCHMARKS.md.
type row struct {
	id, command, today string
	cheap              bool
}

var rowRE = regexp.MustCompile(`^\| <a id="([a-z0-9-]+)"></a>`)

// parseRows reads the rows of every table of the file: Row, What is
// measured, Command, Today, Target, Cheap.
func parseRows(path string) ([]row, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rows []row
	for n, line := range strings.Split(string(data), "\n") {
		m := rowRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		cells := splitCells(line)
		if len(cells) != 6 {
			return nil, fmt.Errorf("%s:%d: row %s has %d cells, want 6 (Row, What is measured, Command, Today, Target, Cheap)", path, n+1, m[1], len(cells))
		}
		rows = append(rows, row{id: m[1], command: strings.Trim(cells[2], "` "), today: cells[3], cheap: cells[5] == "yes"})
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%s: no rows (<a id=...> in a table's first cell)", path)
	}
	return rows, nil
}

// splitCells splits a Markdown table row on the pipes outside backticks.
func splitCells(line string) []string {
	var cells []string
	var cur strings.Builder
	code := false
	for _, r := range strings.TrimSpace(line)[1:] {
		switch {
		case r == '`':
			code = !code
			cur.WriteRune(r)
		case r == '|' && !code:
			cells = append(cells, strings.TrimSpace(cur.String()))
			cur.Reset()
		default:
			cur.WriteRune(r)
		}
	}
	return cells
}

func main() {
	file := flag.String("file", "BENCHMARKS.md", "the benchmarks file")
	only := flag.String("rows", "", "comma-separated prefixes of the row ids to run (default: every cheap row)")
	flag.Parse()
	if err := run(*file, *only); err != nil {
		fmt.Fprintln(os.Stderr, "benchsummary:", err)
		os.Exit(1)
	}
}

func run(file, only string) error {
	rows, err := parseRows(file)
	if err != nil {
		return err
	}
	byID := map[string]row{}
	for _, r := range rows {
		byID[r.id] = r
	}
	scratch, err := prepareScratch()
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	outputs := map[string]string{} // by command
	fmt.Println("| Row | Today (BENCHMARKS.md) | Now | Command |")
	fmt.Println("|---|---|---|---|")
	for _, r := range rows {
		if !r.cheap || !selected(r.id, only) {
			continue
		}
		command := r.command
		if other, ok := strings.CutPrefix(command, "as "); ok {
			command = byID[other].command
		}
		out, ok := outputs[command]
		if !ok {
			start := time.Now()
			fmt.Fprintf(os.Stderr, "running %s: %s\n", r.id, command)
			out, err = runCommand(command, scratch)
			if err != nil {
				fmt.Printf("| %s | %s | failed: %v | `%s` |\n", r.id, r.today, err, command)
				continue
			}
			fmt.Fprintf(os.Stderr, "  done in %s\n", time.Since(start).Round(time.Second))
			outputs[command] = out
		}
		fmt.Printf("| %s | %s | %s | `%s` |\n", r.id, r.today, summarize(r.id, command, out), command)
	}
	return nil
}

func selected(id, only string) bool {
	if only == "" {
		return true
	}
	for _, p := range strings.Split(only, ",") {
		if strings.HasPrefix(id, strings.TrimSpace(p)) {
			return true
		}
	}
	return false
}

// prepareScratch builds bin/spotter and makes a directory where the
// table's spotter commands run: bin/spotter, defaults.yaml (the defaults)
// and spot-first.yaml (the recommended configuration with spot-first on).
func prepareScratch() (string, error) {
	if out, err := exec.Command("go", "build", "-o", "bin/spotter", "./cmd/spotter").CombinedOutput(); err != nil {
		return "", fmt.Errorf("building bin/spotter: %w\n%s", err, out)
	}
	dir, err := os.MkdirTemp("", "benchsummary-")
	if err != nil {
		return "", err
	}
	bin, err := filepath.Abs("bin")
	if err != nil {
		return "", err
	}
	if err := os.Symlink(bin, filepath.Join(dir, "bin")); err != nil {
		return "", err
	}
	defaults, err := exec.Command("bin/spotter", "config", "defaults").Output()
	if err != nil {
		return "", fmt.Errorf("spotter config defaults: %w", err)
	}
	spotFirst := "apiVersion: spotter.dev/v1alpha1\nkind: SpotterConfiguration\nmigrator:\n  enabled: true\nspotFirst:\n  enabled: true\n"
	for name, body := range map[string][]byte{"defaults.yaml": defaults, "spot-first.yaml": []byte(spotFirst)} {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// runCommand runs command with bash: `go test` in the repository, the rest
// in scratch, with /tmp/rep... report directories moved into scratch.
func runCommand(command, scratch string) (string, error) {
	cmd := exec.Command("bash", "-c", "set -eo pipefail; "+strings.ReplaceAll(command, "/tmp/rep", filepath.Join(scratch, "rep")))
	if !strings.HasPrefix(command, "go ") {
		cmd.Dir = scratch
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		tail := out.String()
		if len(tail) > 2000 {
			tail = tail[len(tail)-2000:]
		}
		return "", fmt.Errorf("%w: %s", err, strings.ReplaceAll(strings.TrimSpace(tail), "\n", " / "))
	}
	return out.String(), nil
}

var (
	timeRE  = regexp.MustCompile(`(?m)^([0-9.]+) s wall ([0-9.]+) s user ([0-9]+) KB$`)
	benchRE = regexp.MustCompile(`^(Benchmark\S+?)(-\d+)?\s+(\d+)\s+(.*)$`)
)

// summarize prints what out says, for row id.
func summarize(id, command, out string) string {
	var parts []string
	if strings.Contains(command, "bin/spotter simulate") && !strings.HasSuffix(id, "-time") {
		return simulateRow(id, out)
	}
	for _, m := range timeRE.FindAllStringSubmatch(out, -1) {
		kb, _ := strconv.ParseFloat(m[3], 64)
		parts = append(parts, fmt.Sprintf("%s s wall, %s s user, peak RSS %.0f MB", m[1], m[2], kb/1024))
	}
	// Each benchmark's figures, over its runs (-count), as low – high.
	var names []string
	figures := map[string]map[string][]float64{} // name, unit: values
	units := map[string][]string{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		m := benchRE.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		name := m[1]
		if figures[name] == nil {
			names = append(names, name)
			figures[name] = map[string][]float64{}
		}
		f := strings.Fields(m[4])
		for i := 0; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			unit := f[i+1]
			switch unit {
			case "ns/op":
				v, unit = v/1e6, "ms/op"
			case "B/op":
				v, unit = v/1e6, "MB/op"
			}
			if figures[name][unit] == nil {
				units[name] = append(units[name], unit)
			}
			figures[name][unit] = append(figures[name][unit], v)
		}
	}
	for _, name := range names {
		var fs []string
		for _, unit := range units[name] {
			fs = append(fs, lowHigh(figures[name][unit])+" "+unit)
		}
		parts = append(parts, name+": "+strings.Join(fs, ", "))
	}
	if len(parts) == 0 {
		return "no figure in the output"
	}
	return strings.Join(parts, "; ")
}

// lowHigh prints values as "v" or "low – high".
func lowHigh(vs []float64) string {
	lo, hi := vs[0], vs[0]
	for _, v := range vs {
		lo, hi = min(lo, v), max(hi, v)
	}
	if lo == hi {
		return num(lo)
	}
	return num(lo) + " – " + num(hi)
}

// num prints v with three significant digits, and whole from 100 on.
func num(v float64) string {
	if v >= 100 || v <= -100 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

// strategyOf is the row of `spotter simulate`'s table a row id is about.
func strategyOf(id string) string {
	switch {
	case strings.HasSuffix(id, "-cost-manager"):
		return "migrator"
	case strings.HasSuffix(id, "-spot-rescheduler"):
		return "rescheduler"
	}
	return "spotter"
}

// simulateRow summarises the strategy's row over every run in out: saving,
// shares of the bound and of the packing, evictions per pod and day, pending
// pod-minutes, PDB below budget and zone-minutes short, each as mean (min –
// max).
func simulateRow(id, out string) string {
	strategy := strategyOf(id)
	cols := []string{"saving %", "share of bound %", "share of packing %", "evictions/pod/day", "pending pod-min", "PDB below budget pod-min", "zone-min short"}
	// Fields of the row: name, cost, USD, saving, share of bound, share of
	// packing, spot, evictions, preempted, pending, pdb, (voluntary), zone.
	idx := []int{3, 4, 5, 7, 9, 10, 12}
	values := make([][]float64, len(cols))
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 13 || f[0] != strategy || f[2] != "USD" {
			continue
		}
		for i, k := range idx {
			v, err := strconv.ParseFloat(strings.TrimSuffix(f[k], "%"), 64)
			if err == nil {
				values[i] = append(values[i], v)
			}
		}
	}
	if len(values[0]) == 0 {
		return "no " + strategy + " row in the output"
	}
	var parts []string
	for i, vs := range values {
		parts = append(parts, cols[i]+" "+meanRange(vs))
	}
	return fmt.Sprintf("%s over %d runs: %s", strategy, len(values[0]), strings.Join(parts, ", "))
}

func meanRange(vs []float64) string {
	if len(vs) == 0 {
		return "-"
	}
	sum := 0.0
	for _, v := range vs {
		sum += v
	}
	if len(vs) == 1 {
		return num(vs[0])
	}
	return num(sum/float64(len(vs))) + " (" + lowHigh(vs) + ")"
}
