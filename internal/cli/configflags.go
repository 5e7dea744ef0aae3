package cli

import (
	"github.com/spf13/pflag"
	"k8s.io/utils/ptr"

	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// configOptions loads a SpotterConfiguration from --config and lets flags
// override the file: a flag given on the command line wins over the file, a flag
// not given leaves the file's value (or the default) alone.
type configOptions struct {
	file           string
	dryRun         bool
	metricsAddr    string
	healthAddr     string
	leaderElect    bool
	leaseNamespace string
	flags          *pflag.FlagSet
}

func (o *configOptions) addFlags(fs *pflag.FlagSet) {
	o.flags = fs
	fs.StringVarP(&o.file, "config", "f", "", "SpotterConfiguration file (apiVersion "+v1alpha1.APIVersion+"); defaults when empty")
	fs.BoolVar(&o.dryRun, "dry-run", false, "overrides dryRun: log and record what would be done, change nothing")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", "", "overrides manager.metricsBindAddress")
	fs.StringVar(&o.healthAddr, "health-probe-bind-address", "", "overrides manager.healthProbeBindAddress")
	fs.BoolVar(&o.leaderElect, "leader-elect", true, "overrides manager.leaderElection.enabled")
	fs.StringVar(&o.leaseNamespace, "leader-election-namespace", "", "overrides manager.leaderElection.leaseNamespace")
}

// override applies the flags that were set on the command line.
func (o *configOptions) override(c *v1alpha1.SpotterConfiguration) {
	if o.flags.Changed("dry-run") {
		c.DryRun = o.dryRun
	}
	if o.flags.Changed("metrics-bind-address") {
		c.Manager.MetricsBindAddress = o.metricsAddr
	}
	if o.flags.Changed("health-probe-bind-address") {
		c.Manager.HealthProbeBindAddress = o.healthAddr
	}
	if o.flags.Changed("leader-elect") {
		c.Manager.LeaderElection.Enabled = ptr.To(o.leaderElect)
	}
	if o.flags.Changed("leader-election-namespace") {
		c.Manager.LeaderElection.LeaseNamespace = o.leaseNamespace
	}
}

// load returns the effective configuration: the file (or the defaults), the
// flags, defaults, validation. Problems come back as a *v1alpha1.InvalidError.
func (o *configOptions) load() (*v1alpha1.SpotterConfiguration, error) {
	if o.file != "" {
		return v1alpha1.Load(o.file, o.override)
	}
	c, errs := v1alpha1.Complete(&v1alpha1.SpotterConfiguration{}, o.override)
	if len(errs) > 0 {
		return nil, &v1alpha1.InvalidError{Path: "(flags)", Errors: errs}
	}
	return c, nil
}
