package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation/field"
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

// configFlag is a flag that overrides one field of the file.
type configFlag struct {
	name string
	// path is the field it sets, as field paths are written.
	path string
	set  func(*configOptions, *v1alpha1.SpotterConfiguration)
}

// configFlags lists the flags that override the file, with their fields, so
// that a problem with a value given by a flag names the flag.
var configFlags = []configFlag{
	{"dry-run", "dryRun", func(o *configOptions, c *v1alpha1.SpotterConfiguration) { c.DryRun = o.dryRun }},
	{"metrics-bind-address", "manager.metricsBindAddress", func(o *configOptions, c *v1alpha1.SpotterConfiguration) {
		c.Manager.MetricsBindAddress = o.metricsAddr
	}},
	{"health-probe-bind-address", "manager.healthProbeBindAddress", func(o *configOptions, c *v1alpha1.SpotterConfiguration) {
		c.Manager.HealthProbeBindAddress = o.healthAddr
	}},
	{"leader-elect", "manager.leaderElection.enabled", func(o *configOptions, c *v1alpha1.SpotterConfiguration) {
		c.Manager.LeaderElection.Enabled = ptr.To(o.leaderElect)
	}},
	{"leader-election-namespace", "manager.leaderElection.leaseNamespace", func(o *configOptions, c *v1alpha1.SpotterConfiguration) {
		c.Manager.LeaderElection.LeaseNamespace = o.leaseNamespace
	}},
}

func (o *configOptions) addFlags(fs *pflag.FlagSet) {
	o.flags = fs
	fs.StringVarP(&o.file, "config", "f", "", fmt.Sprintf("SpotterConfiguration file (apiVersion %s, at most %s); defaults when empty",
		v1alpha1.APIVersion, v1alpha1.FormatBytes(v1alpha1.MaxFileBytes)))
	fs.BoolVar(&o.dryRun, "dry-run", false, "overrides dryRun: log and record what would be done, change nothing")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", "", "overrides manager.metricsBindAddress")
	fs.StringVar(&o.healthAddr, "health-probe-bind-address", "", "overrides manager.healthProbeBindAddress")
	fs.BoolVar(&o.leaderElect, "leader-elect", true, "overrides manager.leaderElection.enabled")
	fs.StringVar(&o.leaseNamespace, "leader-election-namespace", "", "overrides manager.leaderElection.leaseNamespace")
}

// override applies the flags that were set on the command line.
func (o *configOptions) override(c *v1alpha1.SpotterConfiguration) {
	for _, f := range configFlags {
		if o.flags.Changed(f.name) {
			f.set(o, c)
		}
	}
}

// load returns the effective configuration: the file (or the defaults), the
// flags, defaults, validation. Problems come back as a *v1alpha1.InvalidError;
// those with a value given by a flag name the flag.
func (o *configOptions) load() (*v1alpha1.SpotterConfiguration, error) {
	var c *v1alpha1.SpotterConfiguration
	var err error
	if o.file != "" {
		c, err = v1alpha1.Load(o.file, o.override)
	} else {
		var errs field.ErrorList
		if c, errs = v1alpha1.Complete(&v1alpha1.SpotterConfiguration{}, o.override); len(errs) > 0 {
			err = &v1alpha1.InvalidError{Path: "(flags)", Errors: errs}
		}
	}
	var invalid *v1alpha1.InvalidError
	if errors.As(err, &invalid) {
		o.nameFlags(invalid)
	}
	return c, err
}

// nameFlags adds the flag to each problem with a field a flag set.
func (o *configOptions) nameFlags(invalid *v1alpha1.InvalidError) {
	set := map[string]string{}
	for _, f := range configFlags {
		if o.flags.Changed(f.name) {
			set[f.path] = f.name
		}
	}
	invalid.NameFlags(set)
}
