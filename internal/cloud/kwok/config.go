package kwok

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"spotter.dev/spotter/internal/lab"
)

// DefaultInterval is the time between two reconcile passes when
// Config.Interval is zero.
const DefaultInterval = time.Second

// maxIDLength keeps <id>-<5 random characters> within the 63 characters of the
// kubernetes.io/hostname label value.
const maxIDLength = validation.DNS1123LabelMaxLength - 6

// Config configures the kwok provider. It is written in YAML or JSON (see
// LoadConfig) or built in Go.
type Config struct {
	// Interval is the time between two reconcile passes of Start. Default 1s.
	Interval metav1.Duration `json:"interval,omitempty"`
	// NodeGroups are the groups, in the order NodeGroups lists them.
	NodeGroups []NodeGroupConfig `json:"nodeGroups"`
}

// NodeGroupConfig describes one node group: the nodes it makes, its limits,
// how long it takes and how much spot capacity there is.
type NodeGroupConfig struct {
	// ID names the group: a DNS-1123 label of at most 57 characters, unique. Its
	// nodes are called <id>-<5 random characters> and labelled
	// spotter.dev/node-group=<id>.
	ID string `json:"id"`
	// Spot makes the group's nodes spot (karpenter.sh/capacity-type=spot);
	// otherwise they are on-demand.
	Spot bool `json:"spot,omitempty"`
	// MinSize is the smallest target size. Default 0.
	MinSize int `json:"minSize,omitempty"`
	// MaxSize is the largest target size; at least 1 and at least MinSize.
	MaxSize int `json:"maxSize"`
	// InitialSize is the target size when the provider starts, at most MaxSize;
	// below MinSize (as when unset) it is MinSize. Nodes left by an earlier run
	// count towards it.
	InitialSize int `json:"initialSize,omitempty"`
	// InstanceType sets node.kubernetes.io/instance-type. Default "lab.large".
	InstanceType string `json:"instanceType,omitempty"`
	// Zone sets topology.kubernetes.io/zone. Default "zone-a".
	Zone string `json:"zone,omitempty"`
	// CPU, Memory and Pods are the capacity (and allocatable) of each node.
	// Defaults "8", "32Gi", "110".
	CPU    string `json:"cpu,omitempty"`
	Memory string `json:"memory,omitempty"`
	Pods   string `json:"pods,omitempty"`
	// Labels are added to each node. They may not set spotter.dev/node-group or
	// karpenter.sh/capacity-type, which the group sets itself.
	Labels map[string]string `json:"labels,omitempty"`
	// Taints are set on each node.
	Taints []corev1.Taint `json:"taints,omitempty"`
	// PricePerHour is the hourly price of a node; unknown when unset.
	PricePerHour *float64 `json:"pricePerHour,omitempty"`
	// ProvisioningDelay is the time between a request and its node being
	// created. Default 0.
	ProvisioningDelay metav1.Duration `json:"provisioningDelay,omitempty"`
	// CapacityLimit, when set, is the most nodes the group can have at once:
	// requests beyond it stay unfulfilled and report
	// *cloud.CapacityUnavailableError. This is how a spot market without
	// capacity is played.
	CapacityLimit *int `json:"capacityLimit,omitempty"`
	// Trace, when set, replays measured spot capacity over time as a second
	// limit (the lower of the two applies).
	Trace *TraceConfig `json:"trace,omitempty"`
	// Preempt makes the group delete its newest nodes when its capacity falls
	// below its node count, as a spot market reclaims instances (without
	// notice). The target size stays: the group replaces them when capacity
	// returns. Default false: capacity only holds back new nodes.
	Preempt bool `json:"preempt,omitempty"`
}

// TraceConfig replays a trace file (see Trace) as a node group's capacity. The
// replay starts Offset into the trace when the provider is created (New), runs
// on the provider's clock and wraps around at the trace's end.
type TraceConfig struct {
	// Path is the trace file. In a file read by LoadConfig, a relative path is
	// relative to that file's directory.
	Path string `json:"path"`
	// Nodes is the node count the trace was measured with, the N of
	// availability/N-node: a data point of Nodes means full capacity. Default
	// the trace's largest data point.
	Nodes int `json:"nodes,omitempty"`
	// ScaleTo is the group capacity that full capacity stands for; a data point
	// v gives floor(v * ScaleTo / Nodes) nodes. Default MaxSize.
	ScaleTo int `json:"scaleTo,omitempty"`
	// Offset is how far into the trace the replay starts.
	Offset metav1.Duration `json:"offset,omitempty"`
}

// LoadConfig reads a Config from a YAML or JSON file, strictly: unknown fields
// are errors. Relative trace paths are made relative to the file's directory.
// It does not validate; New does.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading kwok provider config: %w", err)
	}
	cfg := &Config{}
	if err := yaml.UnmarshalStrict(data, cfg); err != nil {
		return nil, fmt.Errorf("decoding kwok provider config %s: %w", path, err)
	}
	for i := range cfg.NodeGroups {
		if t := cfg.NodeGroups[i].Trace; t != nil && t.Path != "" && !filepath.IsAbs(t.Path) {
			t.Path = filepath.Join(filepath.Dir(path), t.Path)
		}
	}
	return cfg, nil
}

// Validate checks cfg and returns every problem with its field path. It does not
// read trace files and does not look for control-plane groups on spot; New
// does both.
func (cfg *Config) Validate() field.ErrorList {
	var errs field.ErrorList
	if cfg.Interval.Duration < 0 {
		errs = append(errs, field.Invalid(field.NewPath("interval"), cfg.Interval.Duration.String(), "must not be negative"))
	}
	ids := sets.New[string]()
	for i := range cfg.NodeGroups {
		path := field.NewPath("nodeGroups").Index(i)
		g := &cfg.NodeGroups[i]
		errs = append(errs, g.validate(path)...)
		if ids.Has(g.ID) {
			errs = append(errs, field.Duplicate(path.Child("id"), g.ID))
		}
		ids.Insert(g.ID)
	}
	return errs
}

func (g *NodeGroupConfig) validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(g.ID) {
		errs = append(errs, field.Invalid(path.Child("id"), g.ID, msg))
	}
	if len(g.ID) > maxIDLength {
		errs = append(errs, field.TooLong(path.Child("id"), g.ID, maxIDLength))
	}
	if g.MinSize < 0 {
		errs = append(errs, field.Invalid(path.Child("minSize"), g.MinSize, "must not be negative"))
	}
	if g.MaxSize < 1 || g.MaxSize < g.MinSize {
		errs = append(errs, field.Invalid(path.Child("maxSize"), g.MaxSize, "must be at least 1 and at least minSize"))
	}
	if g.InitialSize < 0 || g.InitialSize > g.MaxSize {
		errs = append(errs, field.Invalid(path.Child("initialSize"), g.InitialSize, "must be between 0 and maxSize"))
	}
	for _, r := range []struct{ name, q string }{{"cpu", g.CPU}, {"memory", g.Memory}, {"pods", g.Pods}} {
		name, q := r.name, r.q
		if q == "" {
			continue
		}
		if v, err := resource.ParseQuantity(q); err != nil {
			errs = append(errs, field.Invalid(path.Child(name), q, err.Error()))
		} else if v.Sign() <= 0 {
			errs = append(errs, field.Invalid(path.Child(name), q, "must be positive"))
		}
	}
	if g.InstanceType != "" {
		for _, msg := range validation.IsValidLabelValue(g.InstanceType) {
			errs = append(errs, field.Invalid(path.Child("instanceType"), g.InstanceType, msg))
		}
	}
	if g.Zone != "" {
		for _, msg := range validation.IsValidLabelValue(g.Zone) {
			errs = append(errs, field.Invalid(path.Child("zone"), g.Zone, msg))
		}
	}
	errs = append(errs, metav1validation.ValidateLabels(g.Labels, path.Child("labels"))...)
	for _, key := range []string{NodeGroupLabel, lab.CapacityTypeLabel} {
		if _, ok := g.Labels[key]; ok {
			errs = append(errs, field.Forbidden(path.Child("labels").Key(key), "set by the node group itself"))
		}
	}
	for j, t := range g.Taints {
		tp := path.Child("taints").Index(j)
		for _, msg := range validation.IsQualifiedName(t.Key) {
			errs = append(errs, field.Invalid(tp.Child("key"), t.Key, msg))
		}
		switch t.Effect {
		case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			errs = append(errs, field.NotSupported(tp.Child("effect"), t.Effect,
				[]corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute}))
		}
	}
	if g.PricePerHour != nil && !(*g.PricePerHour >= 0) {
		errs = append(errs, field.Invalid(path.Child("pricePerHour"), *g.PricePerHour, "must not be negative"))
	}
	if g.ProvisioningDelay.Duration < 0 {
		errs = append(errs, field.Invalid(path.Child("provisioningDelay"), g.ProvisioningDelay.Duration.String(), "must not be negative"))
	}
	if g.CapacityLimit != nil && *g.CapacityLimit < 0 {
		errs = append(errs, field.Invalid(path.Child("capacityLimit"), *g.CapacityLimit, "must not be negative"))
	}
	if t := g.Trace; t != nil {
		tp := path.Child("trace")
		if t.Path == "" {
			errs = append(errs, field.Required(tp.Child("path"), "a trace file"))
		}
		if t.Nodes < 0 {
			errs = append(errs, field.Invalid(tp.Child("nodes"), t.Nodes, "must not be negative"))
		}
		if t.ScaleTo < 0 {
			errs = append(errs, field.Invalid(tp.Child("scaleTo"), t.ScaleTo, "must not be negative"))
		}
		if t.Offset.Duration < 0 {
			errs = append(errs, field.Invalid(tp.Child("offset"), t.Offset.Duration.String(), "must not be negative"))
		}
	}
	return errs
}
