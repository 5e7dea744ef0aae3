// Package app is the command line of spotter-agent, the node agent that handles
// spot interruption notices. It stays lean: client-go only, no scheduler or
// controller-runtime code, because it runs on every spot node
// (TestAgentDependencies enforces it).
package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
	"k8s.io/utils/clock"

	"spotter.dev/spotter/internal/agent/internal/watch"
	"spotter.dev/spotter/internal/version"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// Options are the agent's flags. Their names are a contract: deployment
// manifests and tests outside the project use them.
type Options struct {
	NodeName           string
	Kubeconfig         string
	Cloud              string
	MetadataEndpoint   string
	ConfigFile         string
	DryRun             bool
	MetricsBindAddress string
	// HealthProbeBindAddress is where /healthz and /readyz are served.
	HealthProbeBindAddress string
	Check                  bool
	Version                bool
	// Verbosity is -v: 0 logs what an operator reads, more adds detail.
	Verbosity int
	// LogFormat is text (klog's lines) or json (one JSON object a line).
	LogFormat string

	set map[string]bool // flags given on the command line
}

// ParseFlags reads the agent's flags from args (without the program name).
func ParseFlags(args []string, stderr io.Writer) (*Options, error) {
	o := &Options{set: map[string]bool{}}
	fs := flag.NewFlagSet("spotter-agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.NodeName, "node-name", os.Getenv("NODE_NAME"), "the node this agent runs on (default $NODE_NAME)")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig file; in-cluster configuration when empty")
	fs.StringVar(&o.Cloud, "cloud", "", "metadata service: aws, gcp, azure or auto (overrides agent.cloud; default auto)")
	fs.StringVar(&o.MetadataEndpoint, "metadata-endpoint", "", "base URL of the metadata service (overrides agent.metadataEndpoint)")
	fs.StringVar(&o.ConfigFile, "config", "", "SpotterConfiguration file; the agent reads its agent section and dryRun")
	fs.BoolVar(&o.DryRun, "dry-run", false, "log and record what would be done, change nothing")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", "", `where Prometheus metrics are served, host:port, "0" for none (overrides agent.metricsBindAddress; default ":9102")`)
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", "", `where /healthz and /readyz are served, host:port, "0" for none (overrides agent.healthProbeBindAddress; default ":9103")`)
	fs.BoolVar(&o.Check, "check", false, "check the configuration, the node, the metadata service and a dry-run update of the node, then exit")
	fs.BoolVar(&o.Version, "version", false, "print the version and exit")
	fs.IntVar(&o.Verbosity, "v", 0, "log verbosity: 0 logs what an operator reads, 1 and more add detail")
	fs.StringVar(&o.LogFormat, "log-format", "text", "log output: text (klog lines) or json (one JSON object a line)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q: spotter-agent takes flags only", fs.Args())
	}
	if o.Verbosity < 0 {
		return nil, fmt.Errorf("-v %d: verbosity is 0 or more", o.Verbosity)
	}
	if o.LogFormat != "text" && o.LogFormat != "json" {
		return nil, fmt.Errorf("--log-format %q: use text or json", o.LogFormat)
	}
	fs.Visit(func(f *flag.Flag) { o.set[f.Name] = true })
	return o, nil
}

// Config returns the effective configuration: the file (or the defaults), then
// the flags that were given, then defaults and validation. A metadata endpoint
// with credentials is refused, from the flag or the file, before validation
// could echo it (see checkEndpoint).
func (o *Options) Config() (*v1alpha1.SpotterConfiguration, error) {
	if o.set["metadata-endpoint"] {
		if err := checkEndpoint(o.MetadataEndpoint, "--metadata-endpoint"); err != nil {
			return nil, err
		}
	}
	var fileErr error
	override := func(c *v1alpha1.SpotterConfiguration) {
		if !o.set["metadata-endpoint"] && o.ConfigFile != "" {
			if fileErr = checkEndpoint(c.Agent.MetadataEndpoint, "agent.metadataEndpoint in "+o.ConfigFile); fileErr != nil {
				c.Agent.MetadataEndpoint = "" // kept out of validation's messages
			}
		}
		if o.set["cloud"] {
			c.Agent.Cloud = v1alpha1.Cloud(o.Cloud)
		}
		if o.set["metadata-endpoint"] {
			c.Agent.MetadataEndpoint = o.MetadataEndpoint
		}
		if o.set["dry-run"] {
			c.Agent.DryRun = o.DryRun
		}
		if o.set["metrics-bind-address"] {
			c.Agent.MetricsBindAddress = o.MetricsBindAddress
		}
		if o.set["health-probe-bind-address"] {
			c.Agent.HealthProbeBindAddress = o.HealthProbeBindAddress
		}
	}
	if o.ConfigFile != "" {
		c, err := v1alpha1.Load(o.ConfigFile, override)
		if fileErr != nil {
			return nil, fileErr
		}
		return c, o.nameFlags(err)
	}
	c, errs := v1alpha1.Complete(&v1alpha1.SpotterConfiguration{}, override)
	if len(errs) > 0 {
		return nil, o.nameFlags(&v1alpha1.InvalidError{Path: "(flags)", Errors: errs})
	}
	return c, nil
}

// agentFlags maps each flag that overrides the file to the field it sets.
var agentFlags = map[string]string{
	"cloud":                     "agent.cloud",
	"metadata-endpoint":         "agent.metadataEndpoint",
	"dry-run":                   "agent.dryRun",
	"metrics-bind-address":      "agent.metricsBindAddress",
	"health-probe-bind-address": "agent.healthProbeBindAddress",
}

// nameFlags names the flag in each problem of err with a field a flag set.
func (o *Options) nameFlags(err error) error {
	var invalid *v1alpha1.InvalidError
	if errors.As(err, &invalid) {
		set := map[string]string{}
		for flag, path := range agentFlags {
			if o.set[flag] {
				set[path] = flag
			}
		}
		invalid.NameFlags(set)
	}
	return err
}

// Main runs spotter-agent and returns its exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := ParseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err == nil {
		logger := newLogger(o, stderr)
		klog.SetLogger(logger)
		err = run(klog.NewContext(ctx, logger), o, stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "spotter-agent: %v\n", err)
		return 1
	}
	return 0
}

func run(ctx context.Context, o *Options, stdout io.Writer) error {
	if o.Version {
		fmt.Fprintln(stdout, version.Get().String())
		return nil
	}
	cfg, err := o.Config()
	if err != nil {
		return err
	}
	if o.NodeName == "" {
		return errors.New("--node-name is required (or set NODE_NAME, e.g. from the downward API spec.nodeName)")
	}
	restConfig, err := restConfig(o.Kubeconfig)
	if err != nil {
		return err
	}
	// A notice brings a burst: every pod of the node evicted, PDB refusals
	// retried, within seconds. client-go's default of 5 requests per second
	// would spend the deadline waiting on the client's own rate limiter.
	restConfig.QPS, restConfig.Burst = 50, 100
	restConfig.UserAgent = "spotter-agent/" + version.Get().Version
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return err
	}
	node, err := client.CoreV1().Nodes().Get(ctx, o.NodeName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading node %s: %w", o.NodeName, err)
	}
	dryRun := cfg.DryRun || cfg.Agent.DryRun
	fmt.Fprintf(stdout, "node %s found (provider %q); cloud %s, dry-run %v\n", node.Name, node.Spec.ProviderID, cfg.Agent.Cloud, dryRun)
	if o.Check {
		return check(ctx, cfg.Agent, client, node, stdout)
	}
	return runWatch(ctx, cfg, client, node, dryRun, clock.RealClock{})
}

// checkEndpoint refuses a metadata endpoint that holds credentials
// (watch.ErrCredentials), naming where it comes from, without showing it.
// Metadata services take no credentials, and the agent logs its endpoint.
// Other problems with the URL are left to the configuration's validation.
func checkEndpoint(endpoint, from string) error {
	if _, err := watch.Endpoint(endpoint); errors.Is(err, watch.ErrCredentials) {
		return fmt.Errorf("%s: %w", from, err)
	}
	return nil
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		c, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("no --kubeconfig and not in a cluster: %w", err)
		}
		return c, nil
	}
	c, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("reading kubeconfig %s: %w", kubeconfig, err)
	}
	return c, nil
}

// newLogger returns the agent's logger on w: klog's text lines, or JSON lines
// (log/slog's handler, no other dependency), at the verbosity of -v.
func newLogger(o *Options, w io.Writer) logr.Logger {
	if o.LogFormat == "json" {
		return logr.FromSlogHandler(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.Level(-o.Verbosity)}))
	}
	return textlogger.NewLogger(textlogger.NewConfig(textlogger.Verbosity(o.Verbosity), textlogger.Output(w)))
}
