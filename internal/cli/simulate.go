package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"spotter.dev/spotter/internal/classify"
	"spotter.dev/spotter/internal/sim"
	"spotter.dev/spotter/internal/sim/scenario"
	"spotter.dev/spotter/internal/sim/strategy"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

type simulateOptions struct {
	scenario      string
	strategies    string
	duration      string
	seed          int32
	out           string
	configFile    string
	printScenario bool
	fromCluster   bool
	matrix        bool
	matrixOnly    []string
	plan          planOptions
}

func newSimulateCommand() *cobra.Command {
	var o simulateOptions
	cmd := &cobra.Command{
		Use: "simulate [--scenario FILE] [--strategies a,b] [--duration 7d] [--seed N] [--out DIR] | --matrix",
		Example: `  spotter simulate                                       # the built-in scenario, report in spotter-report/
  spotter simulate --seed 2 --duration 3d --strategies spotter,migrator
  spotter simulate --from-cluster --config spotter.yaml   # start from a real cluster's nodes and workloads
  spotter simulate --matrix --matrix-scenarios default    # the out-of-sample matrix, one scenario`,
		Short: "Show what Spotter does and saves: strategies side by side in a simulated cluster, no cluster needed",
		Long: `Simulates a cluster through days of spot-market history in seconds and compares
strategies in the same world with the same seed:

  none         the autoscaler alone
  rescheduler  a model of k8s-spot-rescheduler, as its code behaves
  migrator     a model of cost-manager's spot-migrator
  spotter      this project's controllers and agent, run unchanged with --config
               (the migrator only with migrator.enabled, as spotter controller);
               without --config, the recommended configuration: the defaults
               with the migrator on (the simulated cluster has node groups)

and two rows of hindsight: packing, every pod packed on the cheapest capacity
of each moment (a heuristic), and bound, the cheapest fractional capacity that
holds them (no run that runs them all pays less).

Without --scenario it runs the built-in scenario (print it with --print-scenario):
three zones, on-demand and spot node groups, 39 workloads with
PodDisruptionBudgets and a daily load cycle, spot capacity and preemptions
replayed from real AWS traces. It prints a table and writes report.json and
report.html (self-contained, charts inline) into --out. Other built-in
scenarios run by name: --scenario builtin:week-200 (200 nodes, 4,000 pods),
builtin:aws-1node and builtin:gcp-1node (the other preemption traces).

--matrix runs the out-of-sample matrix instead: every built-in scenario (or
those --matrix-scenarios names), as built and in each variant (without
minDomains, slow timings, preemptions as per-node hazards), seeds 1-4, the
rescheduler and migrator models beside the spotter row; it prints one table
and writes matrix.json into --out.

--from-cluster starts from a real cluster's nodes and workloads instead, priced
as spotter plan prices them: by the configured cloud provider (cloud.provider)
where it reads prices, else by the configuration's pricing section. See
docs/simulate.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runSimulate(cmd.Context(), &o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.scenario, "scenario", "", fmt.Sprintf("scenario file, at most %s (default: the built-in scenario)", v1alpha1.FormatBytes(scenario.MaxScenarioBytes)))
	f.StringVar(&o.strategies, "strategies", strings.Join(strategy.Names, ","), "strategies to compare, comma-separated")
	f.StringVar(&o.duration, "duration", "", "simulated time, such as 7d, 36h or 90m, at most 30d (default: the scenario's)")
	f.Int32Var(&o.seed, "seed", 0, "random seed (default: the scenario's)")
	f.StringVar(&o.out, "out", "spotter-report", "folder for report.json and report.html (made if needed; checked before the run)")
	f.StringVarP(&o.configFile, "config", "f", "", fmt.Sprintf("SpotterConfiguration (at most %s) for the spotter strategy and, with --from-cluster, prices", v1alpha1.FormatBytes(v1alpha1.MaxFileBytes)))
	f.BoolVar(&o.printScenario, "print-scenario", false, "print the scenario (defaults filled in) and exit")
	f.BoolVar(&o.fromCluster, "from-cluster", false, "start from the nodes and workloads of a real cluster")
	f.BoolVar(&o.matrix, "matrix", false, "run the out-of-sample matrix: built-in scenarios and variants, seeds 1-4")
	f.StringSliceVar(&o.matrixOnly, "matrix-scenarios", nil, "with --matrix, the built-in scenarios to run, comma-separated (default: all)")
	f.StringVar(&o.plan.kubeconfig, "kubeconfig", "", "kubeconfig file for --from-cluster (default: $KUBECONFIG or ~/.kube/config)")
	f.StringVar(&o.plan.context, "context", "", "kubeconfig context for --from-cluster")
	return cmd
}

// simulateGCPercent is the collector's GOGC while a simulation runs. The
// simulated worlds keep little (about 100 MB live in the 200-node week, all
// strategies) and make much short-lived garbage (a scheduler snapshot per
// question, a plan per cycle): at 400 the collector runs half as often as at
// 200, and the 200-node week takes about a tenth less time for about 180 MB
// more (800 measured no faster, for 400 MB more; BENCHMARKS.md, "The 200-node
// week"). The soft memory limit (simulateMemoryShare) makes it collect more
// often instead of growing past a share of the memory available.
const simulateGCPercent = 400

// simulateMemoryShare is the share of the memory available (the machine's,
// or the container's when its cgroup has a lower limit) a simulation's heap
// is kept under, unless GOMEMLIMIT is set.
const simulateMemoryShare = 2 // a half

// softMemoryLimit sets the runtime's soft memory limit to a share of the
// memory available while a simulation runs, unless GOMEMLIMIT is set (off
// included) or the memory is unknown, and returns what restores the previous
// one.
func softMemoryLimit() (restore func()) {
	if _, set := os.LookupEnv("GOMEMLIMIT"); set {
		return func() {}
	}
	total, ok := availableMemory()
	if !ok {
		return func() {}
	}
	old := debug.SetMemoryLimit(total / simulateMemoryShare)
	return func() { debug.SetMemoryLimit(old) }
}

// availableMemory is MemTotal of /proc/meminfo, or the cgroup's memory.max
// (cgroup v2) when it is lower.
func availableMemory() (int64, bool) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	total, ok := memTotal(f)
	if !ok {
		return 0, false
	}
	if b, err := os.ReadFile("/sys/fs/cgroup/memory.max"); err == nil {
		if limit, ok := cgroupLimit(string(b)); ok && limit < total {
			total = limit
		}
	}
	return total, true
}

// cgroupLimit reads a cgroup v2 memory.max: a number of bytes, or "max" (no
// limit: false).
func cgroupLimit(s string) (int64, bool) {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	return n, err == nil && n > 0
}

// memTotal reads MemTotal, in bytes, from the text of /proc/meminfo.
func memTotal(r io.Reader) (int64, bool) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 3 && fields[0] == "MemTotal:" && fields[2] == "kB" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			return kb * 1024, err == nil && kb > 0
		}
	}
	return 0, false
}

func runSimulate(ctx context.Context, o *simulateOptions, out, errOut io.Writer) error {
	strategies, err := strategy.Parse(o.strategies)
	if err != nil {
		return err
	}
	cfg := strategy.RecommendedConfig()
	if o.configFile != "" {
		if cfg, err = v1alpha1.Load(o.configFile); err != nil {
			return err
		}
	}
	if o.matrix || len(o.matrixOnly) > 0 {
		return runMatrix(ctx, o, cfg, out, errOut)
	}
	var sc *scenario.Scenario
	var opts sim.Options
	switch {
	case o.fromCluster:
		if o.scenario != "" {
			return errors.New("--from-cluster and --scenario exclude each other: the cluster is the scenario")
		}
		snap, rc, client, err := readCluster(ctx, &o.plan)
		if err != nil {
			return err
		}
		classifier, err := classify.New(cfg.Classification, nil)
		if err != nil {
			return err
		}
		// Prices as spotter plan reads them: the configured provider's
		// (configured ones first), else the configuration's.
		c := readCloud(ctx, cfg, rc, client, snap.Nodes, errOut)
		if sc, opts, err = sim.FromCluster(snap, sim.ClusterPrices{Pricing: cfg.Pricing, Price: c.price, Provider: c.provider, Classifier: classifier}); err != nil {
			return err
		}
		fmt.Fprintf(errOut, "read %s; simulating them with the built-in spot markets\n", snap.Counts())
	case o.scenario != "":
		if sc, err = scenario.LoadScenario(o.scenario); err != nil {
			return err
		}
	default:
		sc = scenario.DefaultScenario()
	}
	if o.duration != "" {
		d, err := parseDays(o.duration)
		if err != nil {
			return fmt.Errorf("--duration: %w", err)
		}
		sc.Duration.Duration = d
	}
	if o.seed != 0 {
		sc.Seed = o.seed
	}
	if errs := scenario.ValidateScenario(sc, ""); len(errs) > 0 && (o.duration != "" || o.seed != 0) {
		return &scenario.InvalidScenarioError{Path: "(flags)", Errors: errs}
	}
	if o.printScenario {
		data, err := scenario.MarshalScenario(sc)
		if err != nil {
			return err
		}
		_, err = out.Write(data)
		return err
	}

	if err := checkWritable(o.out); err != nil {
		return fmt.Errorf("--out %s: cannot write the report there: %w; choose another folder with --out", o.out, err)
	}

	opts.Strategies, opts.Config = strategies, cfg
	bar := newProgressBar(errOut)
	opts.Progress = bar.update
	restoreGC, restoreLimit := lessGC(simulateGCPercent), softMemoryLimit()
	rep, err := sim.Run(ctx, sc, opts)
	restoreLimit()
	restoreGC()
	bar.finish()
	if err != nil {
		return err
	}
	if err := rep.WriteTable(out); err != nil {
		return err
	}
	paths, err := rep.WriteFiles(o.out)
	if err != nil {
		return err
	}
	ran := fmt.Sprintf("%d strategies", len(rep.Results))
	if len(rep.Results) == 1 {
		ran = "1 strategy"
	}
	fmt.Fprintf(out, "\nSimulated %s and the baseline over %s in %s. Report: %s\n",
		ran, simulatedTime(rep.Days), rep.Elapsed.Round(10*time.Millisecond), strings.Join(paths, ", "))
	for _, p := range paths {
		if abs, err := filepath.Abs(p); err == nil && filepath.Ext(p) == ".html" {
			fmt.Fprintf(out, "Open it in a browser (self-contained, works offline): file://%s\n", filepath.ToSlash(abs))
		}
	}
	return nil
}

// runMatrix runs `spotter simulate --matrix`.
func runMatrix(ctx context.Context, o *simulateOptions, cfg *v1alpha1.SpotterConfiguration, out, errOut io.Writer) error {
	switch {
	case !o.matrix:
		return errors.New("--matrix-scenarios chooses the scenarios of --matrix: add --matrix")
	case o.scenario != "" || o.fromCluster || o.seed != 0 || o.printScenario:
		return errors.New("--matrix runs built-in scenarios over seeds 1-4: leave out --scenario, --from-cluster, --seed and --print-scenario (choose scenarios with --matrix-scenarios)")
	case o.strategies != strings.Join(strategy.Names, ","):
		return errors.New("--matrix runs the rescheduler and migrator models and spotter: leave out --strategies")
	}
	mo := sim.MatrixOptions{Scenarios: o.matrixOnly, Run: sim.Options{Config: cfg}}
	if o.duration != "" {
		d, err := parseDays(o.duration)
		if err != nil {
			return fmt.Errorf("--duration: %w", err)
		}
		mo.Duration = d
	}
	if err := checkWritable(o.out); err != nil {
		return fmt.Errorf("--out %s: cannot write the matrix there: %w; choose another folder with --out", o.out, err)
	}
	mo.Done = func(c sim.MatrixCell, n, total int) {
		s, m, r := c.Rows[strategy.Spotter], c.Rows[strategy.Migrator], c.Rows[strategy.Rescheduler]
		fmt.Fprintf(errOut, "[%d/%d] %s, %s, seed %d: spotter %.1f%%, migrator model %.1f%%; evictions per unit saved %s, rescheduler model %s (%s)\n",
			n, total, c.Scenario, c.Variant, c.Seed, 100*s.Saving, 100*m.Saving, sim.PerUnit(s.EvictionsPerUSD), sim.PerUnit(r.EvictionsPerUSD),
			c.Elapsed.Round(100*time.Millisecond))
	}
	restoreGC, restoreLimit := lessGC(simulateGCPercent), softMemoryLimit()
	rep, err := sim.RunMatrix(ctx, mo)
	restoreLimit()
	restoreGC()
	if err != nil {
		return err
	}
	rep.Config = o.configFile
	if err := rep.WriteTable(out); err != nil {
		return err
	}
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(o.out, "matrix.json")
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(out, "Ran %d simulations in %s. Matrix: %s\n", rep.Runs, rep.Elapsed.Round(time.Second), path)
	return nil
}

// simulatedTime says how long a simulation covered: "7 days", "1 day",
// "36 hours", "90 minutes".
func simulatedTime(days float64) string {
	d := time.Duration(days * 24 * float64(time.Hour)).Round(time.Minute)
	plural := func(n int64, unit string) string {
		if n == 1 {
			return "1 " + unit
		}
		return fmt.Sprintf("%d %ss", n, unit)
	}
	switch {
	case d >= 24*time.Hour && d%(24*time.Hour) == 0:
		return plural(int64(d/(24*time.Hour)), "day")
	case d >= time.Hour && d%time.Hour == 0:
		return plural(int64(d/time.Hour), "hour")
	default:
		return plural(int64(d/time.Minute), "minute")
	}
}

// parseDays reads a duration that may use a day unit: 7d, 1d12h, 36h, 90m.
// A duration too long for a time.Duration is refused, not wrapped round.
func parseDays(s string) (time.Duration, error) {
	bad := fmt.Errorf("%q is not a duration such as 7d, 36h or 90m", s)
	tooLong := fmt.Errorf("%q is too long (a simulation runs at most 30d)", s)
	var days time.Duration
	if i := strings.Index(s, "d"); i >= 0 {
		n, err := strconv.ParseInt(s[:i], 10, 64)
		switch {
		case errors.Is(err, strconv.ErrRange):
			return 0, tooLong
		case err != nil || n < 0:
			return 0, bad
		case n > int64(math.MaxInt64/(24*time.Hour)):
			return 0, tooLong
		}
		days, s = time.Duration(n)*24*time.Hour, s[i+1:]
		if s == "" {
			return days, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, bad
	}
	if d > math.MaxInt64-days {
		return 0, tooLong
	}
	return days + d, nil
}

// checkWritable makes dir if needed and checks that a file can be created in
// it, so that a run does not end in a report it cannot write.
func checkWritable(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".spotter-write-check-*")
	if err != nil {
		return err
	}
	name := f.Name()
	if err := f.Close(); err != nil {
		return err
	}
	return os.Remove(name)
}

// progressBar draws "\r[####    ] 43% strategy spotter day 3/7" on a
// terminal, and only a final line otherwise.
type progressBar struct {
	out  io.Writer
	tty  bool
	last string
}

func newProgressBar(out io.Writer) *progressBar {
	f, ok := out.(*os.File)
	return &progressBar{out: out, tty: ok && term.IsTerminal(int(f.Fd()))}
}

func (p *progressBar) update(done float64, what string) {
	if !p.tty {
		return
	}
	const width = 30
	n := int(done * width)
	line := fmt.Sprintf("\r[%s%s] %3d%% %s", strings.Repeat("#", n), strings.Repeat(" ", width-n), int(done*100), what)
	if line != p.last {
		// Pad so that a shorter line covers the previous one.
		fmt.Fprintf(p.out, "%-*s", len(p.last), line)
		p.last = line
	}
}

func (p *progressBar) finish() {
	if p.tty {
		fmt.Fprint(p.out, "\r"+strings.Repeat(" ", len(p.last))+"\r")
	}
	fmt.Fprintln(p.out, "simulation done")
}
