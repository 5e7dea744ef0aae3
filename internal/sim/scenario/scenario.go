// Package scenario is what `spotter simulate` runs: the simulated cluster,
// its workloads and its spot market as a file (SimulationScenario), its
// defaults and validation, the built-in scenarios, and the spot capacity and
// preemption traces the markets replay.
package scenario

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// Scenario file identity.
const (
	ScenarioAPIVersion = "spotter.dev/v1alpha1"
	ScenarioKind       = "SimulationScenario"
)

// Scenario is a simulation: the cluster, its workloads and its spot market.
// Every field but the lists has a default, which a field left out of the file
// (or null) gets; a value written in the file is kept, zero included. The
// built-in default scenario (DefaultScenario) is a complete example.
type Scenario struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Name labels the report.
	Name string `json:"name"`
	// Description is shown in the report.
	Description string `json:"description,omitempty"`
	// Seed drives every random choice (which spot nodes a preemption takes,
	// synthetic markets). Default 1.
	Seed int32 `json:"seed"`
	// Start is the simulated start time, RFC 3339. Default
	// 2023-08-28T00:00:00Z. The daily load cycle follows its clock.
	Start string `json:"start"`
	// Duration of the simulation. Default 168h (a week); 1h to 720h.
	Duration metav1.Duration `json:"duration"`
	// Step is the simulated time between two steps. Default 1m; 10s to 10m.
	Step metav1.Duration `json:"step"`
	// Currency of the prices, for display. Default USD.
	Currency string `json:"currency"`
	// Cluster holds the timings of the simulated cluster.
	Cluster ClusterSettings `json:"cluster"`
	// Zones are the availability zones and their spot markets.
	Zones []Zone `json:"zones"`
	// NodeGroups are the groups the autoscaler grows and shrinks.
	NodeGroups []NodeGroup `json:"nodeGroups"`
	// Workloads run in the cluster.
	Workloads []Workload `json:"workloads"`
	// Load is the daily cycle that scales the workloads.
	Load LoadCycle `json:"load"`

	// dir is the folder trace paths are relative to: the scenario file's.
	dir string
}

// Dir is the folder the scenario's relative trace paths are read from: the
// scenario file's, or "" for a scenario built in Go.
func (sc *Scenario) Dir() string { return sc.dir }

// Warnings lists what the scenario's traces had that the simulator does not
// read (unknown fields of a trace file, ignored), each with the field path of
// the trace that named it.
func (sc *Scenario) Warnings() []string {
	var out []string
	for i, z := range sc.Zones {
		for _, t := range []struct{ path, ref string }{
			{fmt.Sprintf("zones[%d].spotCapacity.trace", i), z.SpotCapacity.Trace},
			{fmt.Sprintf("zones[%d].preemptions.trace", i), z.Preemptions.Trace},
		} {
			if t.ref == "" {
				continue
			}
			if tr, err := LoadTrace(t.ref, sc.dir); err == nil {
				for _, w := range tr.Warnings {
					out = append(out, fmt.Sprintf("%s: %s: %s", t.path, t.ref, w))
				}
			}
		}
	}
	return out
}

// ClusterSettings are the timings of the simulated control plane.
type ClusterSettings struct {
	// PodStartup is the time from binding to Ready. Default 1m.
	PodStartup metav1.Duration `json:"podStartup"`
	// GracePeriod is the termination grace period of every pod. Default 30s.
	GracePeriod metav1.Duration `json:"gracePeriod"`
	// NodeLossDetection is the time from an instance's termination to the
	// deletion of its pods (node lifecycle controller, pod garbage collector),
	// after which their controllers recreate them. Default 1m.
	NodeLossDetection metav1.Duration `json:"nodeLossDetection"`
	// ScaleDownUnneededTime is how long a node must be empty before the
	// autoscaler removes it (cluster autoscaler --scale-down-unneeded-time).
	// Default 10m.
	ScaleDownUnneededTime metav1.Duration `json:"scaleDownUnneededTime"`
	// ScaleUpBackoff is the first pause of a node group whose scale-up failed;
	// it doubles up to MaxScaleUpBackoff (cluster autoscaler
	// --initial-node-group-backoff-duration, --max-node-group-backoff-duration).
	// Defaults 5m and 30m.
	ScaleUpBackoff    metav1.Duration `json:"scaleUpBackoff"`
	MaxScaleUpBackoff metav1.Duration `json:"maxScaleUpBackoff"`
}

// Zone is an availability zone with its spot market.
type Zone struct {
	Name string `json:"name"`
	// Cloud sets the preemption notice: aws (2m), gcp (30s) or azure (30s).
	// Default aws.
	Cloud string `json:"cloud"`
	// SpotCapacity limits how many spot nodes the zone can hold at a time.
	SpotCapacity CapacitySource `json:"spotCapacity"`
	// Preemptions says when running spot nodes are taken back.
	Preemptions PreemptionSource `json:"preemptions"`
}

// CapacitySource is a spot capacity series: a trace, or synthetic. Exactly one
// of Trace and Nodes is set.
type CapacitySource struct {
	// Trace names an availability trace: "builtin:<path>" for an embedded one,
	// or a file path (relative to the scenario file). Its value at each tick,
	// times Scale, is the number of spot nodes the zone can hold.
	Trace string `json:"trace,omitempty"`
	// Offset skips the start of the trace. The trace repeats when the
	// simulation outlasts it.
	Offset metav1.Duration `json:"offset,omitempty"`
	// Scale multiplies the trace. Default 1; 0 is no capacity.
	Scale float64 `json:"scale"`
	// Nodes is a synthetic capacity: that many nodes, less the shortages.
	Nodes *int32 `json:"nodes,omitempty"`
	// ShortagesPerDay is the mean number of synthetic shortages (capacity 0)
	// per day, at random times drawn from the seed.
	ShortagesPerDay float64 `json:"shortagesPerDay,omitempty"`
	// ShortageDuration is the length of each synthetic shortage. Default 1h.
	ShortageDuration metav1.Duration `json:"shortageDuration,omitempty"`
	// StockOutDelay is how long after a request for spot nodes the cloud
	// reports that the market could not hold them. 0 (the default) refuses
	// the request at once. Otherwise the request is accepted: the nodes the
	// market holds now launch, and the rest (partial delivery) stay
	// requested, unbilled, until the delay has passed, when the group
	// reports them failed with a capacity error, as an Auto Scaling group's
	// failed scaling activity or a managed instance group's creation error
	// does a minute or more after the resize.
	StockOutDelay metav1.Duration `json:"stockOutDelay,omitempty"`
}

// PreemptionSource is a preemption series: a trace, or a synthetic rate. At
// most one of Trace and RatePerNodeHour is set; neither means no preemptions.
type PreemptionSource struct {
	// Trace names a preemption trace (as CapacitySource.Trace). Each drop of d
	// instances in it preempts d of the zone's running spot nodes, chosen with
	// the seed, at the time of the drop.
	Trace string `json:"trace,omitempty"`
	// Offset skips the start of the trace.
	Offset metav1.Duration `json:"offset,omitempty"`
	// RatePerNodeHour is a synthetic preemption rate: each running spot node is
	// taken back with this probability per hour.
	RatePerNodeHour float64 `json:"ratePerNodeHour,omitempty"`
	// Hazard reads the trace as a per-node hazard instead of absolute drops:
	// its drops over the instance-hours it measured is a rate per node-hour
	// at which each of the zone's spot nodes is taken back, as with
	// RatePerNodeHour, so that preemptions scale with the fleet (a 4-instance
	// trace replayed on 40 nodes takes about ten times as many nodes as it
	// dropped). Only with trace.
	Hazard bool `json:"hazard,omitempty"`
}

// Capacity types of node groups.
const (
	OnDemand = "on-demand"
	Spot     = "spot"
)

// NodeGroup is a group of identical nodes in one zone.
type NodeGroup struct {
	Name string `json:"name"`
	Zone string `json:"zone"`
	// CapacityType is on-demand or spot.
	CapacityType string `json:"capacityType"`
	// InstanceType labels the nodes (node.kubernetes.io/instance-type).
	InstanceType string `json:"instanceType"`
	// CPU and Memory are each node's allocatable resources.
	CPU    resource.Quantity `json:"cpu"`
	Memory resource.Quantity `json:"memory"`
	// Pods is each node's pod capacity. Default 110.
	Pods int32 `json:"pods"`
	// PricePerHour is the price of one node per hour, in the scenario's currency.
	PricePerHour float64 `json:"pricePerHour"`
	// Min and Max bound the group's size. Defaults 0 and 100; max: 0 is a
	// group that never grows.
	Min int32 `json:"min"`
	Max int32 `json:"max"`
	// Initial is the number of nodes at the start (Ready). Default Min.
	Initial *int32 `json:"initial,omitempty"`
	// ProvisioningTime is the time from a scale-up request to a Ready node.
	// Default 2m.
	ProvisioningTime metav1.Duration `json:"provisioningTime"`
}

// Workload kinds.
const (
	Deployment  = "Deployment"
	StatefulSet = "StatefulSet"
)

// Workload is a Deployment or StatefulSet, or Count alike ones.
type Workload struct {
	Name string `json:"name"`
	// Count makes Count workloads named <name>-1 ... <name>-<count>. Default 1.
	Count int32 `json:"count"`
	// Namespace. Default "default".
	Namespace string `json:"namespace"`
	// Kind is Deployment or StatefulSet. Default Deployment.
	Kind string `json:"kind"`
	// Replicas at the low point of the daily load cycle.
	Replicas int32 `json:"replicas"`
	// PeakReplicas at the high point. Default Replicas (no cycle).
	PeakReplicas int32 `json:"peakReplicas"`
	// CPU and Memory requested by each pod.
	CPU    resource.Quantity `json:"cpu"`
	Memory resource.Quantity `json:"memory"`
	// PDB, when set, adds a PodDisruptionBudget over the workload's pods.
	PDB *PDBSpec `json:"pdb,omitempty"`
	// OnDemandOnly pins the pods to on-demand nodes (a node selector on
	// karpenter.sh/capacity-type=on-demand).
	OnDemandOnly bool `json:"onDemandOnly"`
	// ZoneSpread spreads the pods over zones (maxSkew 1, DoNotSchedule).
	ZoneSpread bool `json:"zoneSpread"`
	// MinDomains, with ZoneSpread, is the spread constraint's minDomains:
	// while fewer zones than that have nodes, the scheduler counts the
	// missing ones as holding none of the pods, so that a pod that would
	// crowd the zones left waits and the autoscaler brings a node back to a
	// missing zone. 0 leaves it unset: the pods spread over the zones that
	// have nodes only. At most the scenario's zones.
	MinDomains int32 `json:"minDomains,omitempty"`
}

// PDBSpec is a PodDisruptionBudget; exactly one field is set.
type PDBSpec struct {
	MinAvailable   *int32 `json:"minAvailable,omitempty"`
	MaxUnavailable *int32 `json:"maxUnavailable,omitempty"`
}

// LoadCycle scales each workload between Replicas and PeakReplicas over the
// day, as a cosine with its peak at PeakHour (UTC).
type LoadCycle struct {
	// PeakHour of the daily cycle, 0 to 23. Default 14; 0 is midnight.
	PeakHour int32 `json:"peakHour"`
}

//go:embed scenarios/default.yaml
var defaultScenarioYAML []byte

// The built-in scenarios, default.yaml among them.
//
//go:embed scenarios/*.yaml
var scenarioFS embed.FS

// BuiltinScenarios lists the built-in scenarios as --scenario names them:
// "builtin:<name>" (builtin:default is the one used without --scenario).
func BuiltinScenarios() []string {
	entries, _ := fs.ReadDir(scenarioFS, "scenarios")
	var out []string
	for _, e := range entries {
		if name, ok := strings.CutSuffix(e.Name(), ".yaml"); ok {
			out = append(out, BuiltinPrefix+name)
		}
	}
	return out
}

// Builtin reads a built-in scenario by name (without the prefix).
func Builtin(name string) (*Scenario, error) {
	data, err := fs.ReadFile(scenarioFS, path.Join("scenarios", name+".yaml"))
	if err != nil || strings.ContainsAny(name, "/\\") {
		return nil, fmt.Errorf("no such built-in scenario %q; built-in scenarios: %s", BuiltinPrefix+name, strings.Join(BuiltinScenarios(), ", "))
	}
	return ParseScenario(data, "")
}

// DefaultScenarioYAML is the built-in default scenario as a file.
func DefaultScenarioYAML() []byte { return defaultScenarioYAML }

// DefaultScenario returns the built-in default scenario, defaulted and valid.
func DefaultScenario() *Scenario {
	sc, err := ParseScenario(defaultScenarioYAML, "")
	if err != nil {
		panic(fmt.Sprintf("the built-in scenario is invalid: %v", err))
	}
	return sc
}

// maxListed bounds the problems InvalidScenarioError prints; the rest are
// counted.
const maxListed = 100

// InvalidScenarioError lists every problem of a scenario file, each with its
// field path.
type InvalidScenarioError struct {
	Path   string
	Errors field.ErrorList
}

func (e *InvalidScenarioError) Error() string {
	var b strings.Builder
	if e.Path != "" {
		fmt.Fprintf(&b, "%s: ", e.Path)
	}
	fmt.Fprintf(&b, "%d problem(s) in the scenario:", len(e.Errors))
	for i, fe := range e.Errors {
		if i == maxListed {
			fmt.Fprintf(&b, "\n  ... and %d more", len(e.Errors)-maxListed)
			break
		}
		fmt.Fprintf(&b, "\n  - %s", fe.Error())
	}
	return b.String()
}

// MaxScenarioBytes is the largest scenario file LoadScenario reads. The
// built-in scenario is about 5 KiB; a scenario at the limits of validation
// (thousands of node groups and workloads) is a few hundred KiB.
const MaxScenarioBytes = 1 << 20

// LoadScenario reads, defaults and validates a scenario file (at most
// MaxScenarioBytes), or the built-in scenario "builtin:<name>"
// (BuiltinScenarios). Trace paths in a file are relative to the file's
// folder. The error is an *InvalidScenarioError or a read error.
func LoadScenario(path string) (*Scenario, error) {
	if name, ok := strings.CutPrefix(path, BuiltinPrefix); ok {
		return Builtin(name)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading scenario: %w", err)
	}
	defer func() { _ = f.Close() }()
	data, err := v1alpha1.ReadLimited(f, MaxScenarioBytes, "the scenario file",
		"is it the right file? The built-in scenario (`spotter simulate --print-scenario`) is about 5 KiB")
	if err != nil {
		return nil, fmt.Errorf("reading scenario %s: %w", path, err)
	}
	// An absolute folder: trace paths resolve the same wherever the process
	// goes afterwards.
	dir := filepath.Dir(path)
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	sc, err := ParseScenario(data, dir)
	if ie, ok := errors.AsType[*InvalidScenarioError](err); ok {
		ie.Path = path
	}
	return sc, err
}

// ParseScenario decodes a scenario strictly (unknown fields and wrong types are
// errors with their paths), defaults it and validates it, including that each
// named trace can be read (relative paths from dir). It reports every problem.
func ParseScenario(data []byte, dir string) (*Scenario, error) {
	sc := &Scenario{}
	doc, errs := v1alpha1.DecodeStrict(data, sc)
	if doc == nil {
		return nil, &InvalidScenarioError{Errors: errs}
	}
	setScenarioDefaults(sc, doc.IsSet)
	errs = append(errs, doc.Annotate(ValidateScenario(sc, dir), nil)...)
	if len(errs) > 0 {
		return nil, &InvalidScenarioError{Errors: errs}
	}
	sc.dir = dir
	return sc, nil
}

// MarshalScenario writes a scenario as YAML.
func MarshalScenario(sc *Scenario) ([]byte, error) { return yaml.Marshal(sc) }

// SetScenarioDefaults fills every unset field with its default. In a scenario
// built in Go a zero number or duration is unset; in a file, a field left out
// or null is (ParseScenario), and a zero written there is kept.
func SetScenarioDefaults(sc *Scenario) { setScenarioDefaults(sc, nil) }

// setScenarioDefaults is SetScenarioDefaults; isSet, when not nil, says which
// fields (by path) the file gave a value: those keep it, zero included.
// Strings are unset when empty either way, as in Kubernetes objects.
func setScenarioDefaults(sc *Scenario, isSet func(path string) bool) {
	unset := func(path string, zero bool) bool {
		if isSet != nil {
			return !isSet(path)
		}
		return zero
	}
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	dur := func(path string, d *metav1.Duration, v time.Duration) {
		if unset(path, d.Duration == 0) {
			d.Duration = v
		}
	}
	def(&sc.APIVersion, ScenarioAPIVersion)
	def(&sc.Kind, ScenarioKind)
	def(&sc.Name, "scenario")
	if unset("seed", sc.Seed == 0) {
		sc.Seed = 1
	}
	def(&sc.Start, "2023-08-28T00:00:00Z")
	dur("duration", &sc.Duration, 7*24*time.Hour)
	dur("step", &sc.Step, time.Minute)
	def(&sc.Currency, "USD")
	c := &sc.Cluster
	dur("cluster.podStartup", &c.PodStartup, time.Minute)
	dur("cluster.gracePeriod", &c.GracePeriod, 30*time.Second)
	dur("cluster.nodeLossDetection", &c.NodeLossDetection, time.Minute)
	dur("cluster.scaleDownUnneededTime", &c.ScaleDownUnneededTime, 10*time.Minute)
	dur("cluster.scaleUpBackoff", &c.ScaleUpBackoff, 5*time.Minute)
	dur("cluster.maxScaleUpBackoff", &c.MaxScaleUpBackoff, 30*time.Minute)
	for i := range sc.Zones {
		z, p := &sc.Zones[i], fmt.Sprintf("zones[%d].spotCapacity.", i)
		def(&z.Cloud, "aws")
		if unset(p+"scale", z.SpotCapacity.Scale == 0) {
			z.SpotCapacity.Scale = 1
		}
		if z.SpotCapacity.ShortagesPerDay > 0 {
			dur(p+"shortageDuration", &z.SpotCapacity.ShortageDuration, time.Hour)
		}
	}
	for i := range sc.NodeGroups {
		g, p := &sc.NodeGroups[i], fmt.Sprintf("nodeGroups[%d].", i)
		if unset(p+"pods", g.Pods == 0) {
			g.Pods = 110
		}
		if unset(p+"max", g.Max == 0) {
			g.Max = 100
		}
		if g.Initial == nil {
			v := g.Min
			g.Initial = &v
		}
		def(&g.InstanceType, g.Name)
		dur(p+"provisioningTime", &g.ProvisioningTime, 2*time.Minute)
	}
	for i := range sc.Workloads {
		w, p := &sc.Workloads[i], fmt.Sprintf("workloads[%d].", i)
		if unset(p+"count", w.Count == 0) {
			w.Count = 1
		}
		def(&w.Namespace, "default")
		def(&w.Kind, Deployment)
		if unset(p+"peakReplicas", w.PeakReplicas == 0) {
			w.PeakReplicas = w.Replicas
		}
	}
	if unset("load.peakHour", sc.Load.PeakHour == 0) {
		sc.Load.PeakHour = 14
	}
}

// Notice returns the preemption notice of a cloud: AWS gives two minutes (spot
// instance interruption notice), GCP and Azure 30 seconds (preemption and
// Scheduled Events Preempt).
func Notice(cloud string) time.Duration {
	if cloud == "aws" {
		return 2 * time.Minute
	}
	return 30 * time.Second
}
