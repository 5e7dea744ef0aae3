package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/url"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"spotter.dev/spotter/internal/classify"
	"spotter.dev/spotter/internal/cloud"
	"spotter.dev/spotter/internal/plan"
	"spotter.dev/spotter/internal/snapshot"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

type planOptions struct {
	kubeconfig       string
	context          string
	snapshotFile     string
	strict           bool
	maxSnapshotBytes string
	configFile       string
	output           string
}

func newPlanCommand() *cobra.Command {
	var o planOptions
	cmd := &cobra.Command{
		Use: "plan [--kubeconfig K] [--context C] [--snapshot FILE] [--config F] [-o table|json|yaml]",
		Example: `  spotter plan                                   # the current kubeconfig context
  spotter plan --context prod --config spotter.yaml -o json
  kubectl get nodes,pods,pdb -A -o yaml > cluster.yaml && spotter plan --snapshot cluster.yaml`,
		Short: "Show which on-demand nodes could be emptied onto spot now, and why not",
		Long: `Reads the cluster (or a saved snapshot) and runs the planner: a scheduling
simulation with the kube-scheduler's own filter plugins, PodDisruptionBudgets
counted across the whole plan. Changes nothing.

A snapshot is a YAML or JSON List of Nodes, Pods, PodDisruptionBudgets and volume
objects, as written by:
  kubectl get nodes,pods,pdb,pv,pvc,storageclass,csinode,rs,sts,svc,ns -A -o yaml
It is read up to --max-snapshot-bytes (default 512Mi). Objects the API server
would refuse (no name, negative quantities) and the same object twice with
other contents are errors; identical duplicates and pods on nodes the snapshot
lacks are warnings (docs/planner.md).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runPlan(cmd.Context(), &o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	f.StringVar(&o.context, "context", "", "kubeconfig context (default: the current context)")
	f.StringVar(&o.snapshotFile, "snapshot", "", "plan a saved cluster snapshot instead of a live cluster")
	f.BoolVar(&o.strict, "strict", false, "fail, rather than warn, when the cluster or snapshot holds no nodes")
	f.StringVar(&o.maxSnapshotBytes, "max-snapshot-bytes", "512Mi",
		"largest --snapshot file read, such as 1Gi (a 5,000-node cluster's snapshot is about 185 MB; memory grows with the file)")
	f.StringVarP(&o.configFile, "config", "f", "", fmt.Sprintf("SpotterConfiguration file (at most %s): classification selectors, movability rules, prices",
		v1alpha1.FormatBytes(v1alpha1.MaxFileBytes)))
	f.StringVarP(&o.output, "output", "o", "table", "output format: table, json or yaml")
	return cmd
}

func runPlan(ctx context.Context, o *planOptions, out, errOut io.Writer) error {
	switch o.output {
	case "table", "json", "yaml":
	default:
		return fmt.Errorf("--output %q is not supported: use table, json or yaml", o.output)
	}
	maxBytes, err := parseBytes(o.maxSnapshotBytes)
	if err != nil {
		return fmt.Errorf("--max-snapshot-bytes: %w", err)
	}
	cfg := v1alpha1.NewDefaults()
	if o.configFile != "" {
		if cfg, err = v1alpha1.Load(o.configFile); err != nil {
			return err
		}
	}
	classifier, err := classify.New(cfg.Classification, nil)
	if err != nil {
		return err
	}

	start := time.Now()
	var snap *snapshot.Snapshot
	if o.snapshotFile != "" {
		restoreGC := lessGC(loadGCPercent)
		snap, err = snapshot.LoadFileWith(o.snapshotFile, snapshot.Options{MaxBytes: maxBytes})
		restoreGC()
		if err != nil {
			if _, ok := errors.AsType[*snapshot.TooLargeError](err); ok {
				return fmt.Errorf("%w; if it is the right file, raise the limit with --max-snapshot-bytes (such as --max-snapshot-bytes=%s)",
					err, resource.NewQuantity(2*maxBytes, resource.BinarySI))
			}
			return err
		}
		for _, w := range snap.Warnings {
			fmt.Fprintf(errOut, "warning: %s\n", w)
		}
	}
	var instances map[string]cloud.Instance
	if o.snapshotFile == "" {
		var rc *rest.Config
		var client kubernetes.Interface
		if snap, rc, client, err = readCluster(ctx, o); err != nil {
			return err
		}
		instances = readCloud(ctx, cfg, rc, client, snap.Nodes, errOut).instances
	}
	loaded := time.Since(start)
	if len(snap.Nodes) == 0 {
		from := "the cluster"
		if o.snapshotFile != "" {
			from = "snapshot " + o.snapshotFile
		}
		msg := fmt.Sprintf("%s holds no nodes: nothing to plan (a snapshot needs the Nodes too: kubectl get nodes,pods,pdb -A -o yaml)", from)
		if o.strict {
			return errors.New(msg)
		}
		fmt.Fprintf(errOut, "warning: %s\n", msg)
	}

	start = time.Now()
	opts := plan.ConfigOptions(cfg, classifier)
	opts.Instances = instances
	p, err := plan.New(opts).Plan(ctx, snap)
	if err != nil {
		return err
	}
	p.Summary.Warnings = append(p.Summary.Warnings, plan.SpreadWarnings(snap)...)
	fmt.Fprintf(errOut, "read %s in %s, planned in %s\n", snap.Counts(), loaded.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))

	switch o.output {
	case "json":
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(p)
	case "yaml":
		data, err := yaml.Marshal(p)
		if err != nil {
			return err
		}
		_, err = out.Write(data)
		return err
	}
	return printPlanTable(out, p)
}

// loadGCPercent is the collector's GOGC while a snapshot loads. Loading only
// adds to the heap, which grows from nothing to the loaded snapshot: at the
// default 100 the collector runs each time it doubles and marks the whole
// snapshot so far, again and again, for little garbage. At 400, `spotter plan`
// on the 1,000-node file collects 5 times instead of 9 and takes 0.8 – 1.1 s
// of CPU instead of 1.15 – 1.35 s (BENCHMARKS.md, "Loading").
const loadGCPercent = 400

// lessGC raises GOGC to percent, unless it is higher or off (GOGC in the
// environment is the operator's), and returns what sets it back.
func lessGC(percent int) (restore func()) {
	old := debug.SetGCPercent(percent)
	if old < 0 || old > percent {
		debug.SetGCPercent(old)
		return func() {}
	}
	return func() { debug.SetGCPercent(old) }
}

// parseBytes reads a size such as 512Mi, 1Gi or 600000000.
func parseBytes(s string) (int64, error) {
	q, err := resource.ParseQuantity(s)
	if err != nil || q.Sign() <= 0 {
		return 0, fmt.Errorf("%q is not a size such as 512Mi, 1Gi or 600000000", s)
	}
	return q.Value(), nil
}

// readCluster lists the objects the planner needs, and returns the REST
// configuration and client it used. Connection and permission problems become
// one line that says what to fix.
func readCluster(ctx context.Context, o *planOptions) (*snapshot.Snapshot, *rest.Config, kubernetes.Interface, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.kubeconfig
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: o.context})
	rc, err := loader.ClientConfig()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	rc.QPS, rc.Burst = 50, 100
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	s, err := snapshot.FromCluster(ctx, client)
	if err != nil {
		var le *snapshot.ListError
		resource := "the cluster"
		if errors.As(err, &le) {
			resource = le.Resource
		}
		var netErr net.Error
		var urlErr *url.Error
		switch {
		case apierrors.IsForbidden(err):
			return nil, nil, nil, &exitError{code: 1, msg: fmt.Sprintf("error: not allowed to list %s at %s: spotter plan needs get and list on nodes, pods, poddisruptionbudgets, namespaces, services, replicationcontrollers, replicasets, statefulsets, persistentvolumes, persistentvolumeclaims, storageclasses and csinodes (%v)", resource, rc.Host, apierrors.ReasonForError(err))}
		case apierrors.IsUnauthorized(err):
			return nil, nil, nil, &exitError{code: 1, msg: fmt.Sprintf("error: the API server at %s did not accept the credentials of the kubeconfig: %v", rc.Host, err)}
		case errors.As(err, &urlErr) || errors.As(err, &netErr):
			return nil, nil, nil, &exitError{code: 1, msg: fmt.Sprintf("error: cannot reach the API server at %s: %v", rc.Host, rootCause(err))}
		}
		return nil, nil, nil, err
	}
	return s, rc, client, nil
}

func rootCause(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}

func printPlanTable(out io.Writer, p *plan.Plan) error {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "NODE\tCLASS\tTYPE\tGROUP\tPRICE/H\tPODS\tCPU\tMEMORY\tDRAINABLE\tWAVES\tREASON")
	for _, n := range p.Nodes {
		drainable, waves := "-", "-"
		if n.Class == classify.OnDemand {
			drainable = map[bool]string{true: "yes", false: "no"}[n.Drainable]
		}
		if n.Consolidated {
			drainable = "consolidate"
		}
		if n.Drainable && n.Waves > 0 {
			waves = fmt.Sprint(n.Waves)
		}
		reason := n.Reason
		if n.Class == classify.Spot || n.Class == classify.ControlPlane || n.Class == classify.Excluded || n.Class == classify.Unknown {
			reason = n.ClassReason
		}
		if n.Consolidated {
			reason = consolidationReason(&n)
		}
		if n.ConsolidationReason != "" {
			reason += "; not consolidated: " + n.ConsolidationReason
		}
		if n.Warning != "" {
			reason = "WARNING: " + n.Warning
		}
		price := "-"
		if n.HourlyPrice > 0 {
			price = strconv.FormatFloat(n.HourlyPrice, 'f', -1, 64)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", n.Name, n.Class, or(n.InstanceType, "-"), or(n.NodeGroup, "-"), price,
			n.PodCount, percent(n.CPURequested, n.CPUAllocatable), percent(n.MemoryRequested, n.MemoryAllocatable), drainable, waves, reason)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	s := p.Summary
	fmt.Fprintf(out, "\n%d of %d on-demand nodes could be emptied onto spot now (%d pods to move; %d spot nodes",
		s.DrainableNodes, s.OnDemandNodes, s.PodsToMove, s.SpotNodes)
	if s.ConsolidatedNodes > 0 {
		fmt.Fprintf(out, "; %d of them by consolidation, their pods that fit no spot node going to on-demand nodes that stay", s.ConsolidatedNodes)
		if d := displaced(p); d > 0 {
			fmt.Fprintf(out, ", %d pods of those moving to spot to make room", d)
		}
	}
	if s.PendingReserved > 0 {
		fmt.Fprintf(out, ", capacity kept for %d pending pods", s.PendingReserved)
	}
	fmt.Fprintln(out, ").")
	if s.HourlySaving > 0 {
		fmt.Fprintf(out, "Estimated saving once they are removed: %.2f %s per hour.\n", s.HourlySaving, s.Currency)
	}
	for _, warning := range s.Warnings {
		fmt.Fprintf(out, "WARNING: %s\n", warning)
	}
	return nil
}

// consolidationReason says where a consolidation sends a node's pods: how
// many to spot, and how many to which on-demand nodes that stay.
func consolidationReason(n *plan.NodePlan) string {
	spot, onDemand := 0, map[string]int{}
	for _, p := range n.Pods {
		switch {
		case p.OnDemand:
			onDemand[p.Destination]++
		case p.Destination != "":
			spot++
		}
	}
	nodes := slices.Sorted(maps.Keys(onDemand))
	for i, name := range nodes {
		nodes[i] = fmt.Sprintf("%d to %s", onDemand[name], name)
	}
	reason := fmt.Sprintf("consolidation: %d pods to spot, %s (on-demand, stays)", spot, strings.Join(nodes, ", "))
	if len(n.Displaced) > 0 {
		from := map[string]int{}
		for _, p := range n.Displaced {
			from[p.From]++
		}
		names := slices.Sorted(maps.Keys(from))
		for i, name := range names {
			names[i] = fmt.Sprintf("%d of %s", from[name], name)
		}
		reason += fmt.Sprintf(", after moving %s to spot to make room", strings.Join(names, ", "))
	}
	return reason
}

// displaced counts the pods the plan's consolidations displace.
func displaced(p *plan.Plan) int {
	n := 0
	for i := range p.Nodes {
		n += len(p.Nodes[i].Displaced)
	}
	return n
}

// or returns s, or def when s is empty.
func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func percent(a, b int64) string {
	if b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%d%%", a*100/b)
}
