package scenario

import (
	"fmt"
	"math"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Limits of a scenario as a whole: every field within its range can still add
// up to more than a machine simulates (the product of counts is the size of
// the world, and every strategy runs in its own).
const (
	// MaxPods bounds the pods of all workloads at their peak.
	MaxPods = 50000
	// MaxNodes bounds the nodes all node groups can grow to.
	MaxNodes = 10000
	// MaxZones, MaxNodeGroups and MaxWorkloads bound the lists.
	MaxZones      = 100
	MaxNodeGroups = 1000
	MaxWorkloads  = 5000
	// MaxOffset bounds the offset into a trace (traces repeat, so a longer
	// one says nothing more); it keeps the trace arithmetic far from overflow.
	MaxOffset = 365 * 24 * time.Hour
)

// ValidateScenario returns every problem of a defaulted scenario, each with its
// field path. Traces are read to check them: relative paths from dir, or, when
// dir is empty, from the folder of the file the scenario was loaded from
// (none for a scenario built in Go), so that a loaded scenario changed
// afterwards (`--seed`, `--duration`) validates as it runs.
func ValidateScenario(sc *Scenario, dir string) field.ErrorList {
	if dir == "" {
		dir = sc.dir
	}
	var errs field.ErrorList
	if sc.APIVersion != ScenarioAPIVersion {
		errs = append(errs, field.NotSupported(field.NewPath("apiVersion"), sc.APIVersion, []string{ScenarioAPIVersion}))
	}
	if sc.Kind != ScenarioKind {
		errs = append(errs, field.NotSupported(field.NewPath("kind"), sc.Kind, []string{ScenarioKind}))
	}
	if sc.Seed < 1 {
		errs = append(errs, field.Invalid(field.NewPath("seed"), sc.Seed, "must be 1 or more"))
	}
	if _, err := time.Parse(time.RFC3339, sc.Start); err != nil {
		errs = append(errs, field.Invalid(field.NewPath("start"), sc.Start, "must be an RFC 3339 time such as 2023-08-28T00:00:00Z"))
	}
	errs = append(errs, durationIn(field.NewPath("duration"), sc.Duration, time.Hour, 720*time.Hour)...)
	errs = append(errs, durationIn(field.NewPath("step"), sc.Step, 10*time.Second, 10*time.Minute)...)
	if sc.Step.Duration > 0 && sc.Duration.Duration%sc.Step.Duration != 0 {
		errs = append(errs, field.Invalid(field.NewPath("duration"), sc.Duration.Duration.String(), "must be a whole number of steps"))
	}
	c, cp := &sc.Cluster, field.NewPath("cluster")
	errs = append(errs, durationIn(cp.Child("podStartup"), c.PodStartup, 0, time.Hour)...)
	errs = append(errs, durationIn(cp.Child("gracePeriod"), c.GracePeriod, 0, time.Hour)...)
	errs = append(errs, durationIn(cp.Child("nodeLossDetection"), c.NodeLossDetection, 0, time.Hour)...)
	errs = append(errs, durationIn(cp.Child("scaleDownUnneededTime"), c.ScaleDownUnneededTime, time.Minute, 24*time.Hour)...)
	errs = append(errs, durationIn(cp.Child("scaleUpBackoff"), c.ScaleUpBackoff, time.Second, 24*time.Hour)...)
	errs = append(errs, durationIn(cp.Child("maxScaleUpBackoff"), c.MaxScaleUpBackoff, c.ScaleUpBackoff.Duration, 24*time.Hour)...)

	zones := map[string]bool{}
	zp := field.NewPath("zones")
	if len(sc.Zones) == 0 {
		errs = append(errs, field.Required(zp, "at least one zone"))
	}
	errs = append(errs, listOf(zp, len(sc.Zones), MaxZones)...)
	for i := range sc.Zones {
		z, p := &sc.Zones[i], zp.Index(i)
		errs = append(errs, name(p.Child("name"), z.Name)...)
		if zones[z.Name] {
			errs = append(errs, field.Duplicate(p.Child("name"), z.Name))
		}
		zones[z.Name] = true
		errs = append(errs, oneOf(p.Child("cloud"), z.Cloud, "aws", "gcp", "azure")...)
		errs = append(errs, validateCapacity(&z.SpotCapacity, p.Child("spotCapacity"), dir)...)
		errs = append(errs, validatePreemptions(&z.Preemptions, p.Child("preemptions"), dir)...)
	}

	groups := map[string]bool{}
	gp := field.NewPath("nodeGroups")
	errs = append(errs, listOf(gp, len(sc.NodeGroups), MaxNodeGroups)...)
	onDemand := false
	nodes := int64(0)
	for i := range sc.NodeGroups {
		g, p := &sc.NodeGroups[i], gp.Index(i)
		errs = append(errs, name(p.Child("name"), g.Name)...)
		if groups[g.Name] {
			errs = append(errs, field.Duplicate(p.Child("name"), g.Name))
		}
		groups[g.Name] = true
		if !zones[g.Zone] {
			errs = append(errs, field.NotFound(p.Child("zone"), g.Zone))
		}
		errs = append(errs, oneOf(p.Child("capacityType"), g.CapacityType, OnDemand, Spot)...)
		onDemand = onDemand || g.CapacityType == OnDemand
		if g.CPU.Sign() <= 0 {
			errs = append(errs, field.Invalid(p.Child("cpu"), g.CPU.String(), "must be more than 0, such as 4 or 3920m"))
		}
		if g.Memory.Sign() <= 0 {
			errs = append(errs, field.Invalid(p.Child("memory"), g.Memory.String(), "must be more than 0, such as 16Gi"))
		}
		if g.Pods < 1 {
			errs = append(errs, field.Invalid(p.Child("pods"), g.Pods, "must be 1 or more"))
		}
		if g.PricePerHour < 0 || math.IsNaN(g.PricePerHour) || math.IsInf(g.PricePerHour, 0) {
			errs = append(errs, field.Invalid(p.Child("pricePerHour"), g.PricePerHour, "must be a price per hour of 0 or more"))
		}
		if g.Min < 0 || g.Max < g.Min || g.Max > 1000 {
			errs = append(errs, field.Invalid(p.Child("max"), g.Max, fmt.Sprintf("must be between min (%d) and 1000", g.Min)))
		}
		nodes += int64(max(g.Max, 0))
		if g.Initial != nil && (*g.Initial < g.Min || *g.Initial > g.Max) {
			errs = append(errs, field.Invalid(p.Child("initial"), *g.Initial, "must be between min and max"))
		}
		errs = append(errs, durationIn(p.Child("provisioningTime"), g.ProvisioningTime, 0, time.Hour)...)
	}
	if len(sc.NodeGroups) > 0 && !onDemand {
		errs = append(errs, field.Required(gp, "at least one on-demand node group: the all-on-demand baseline needs one"))
	}
	if len(sc.NodeGroups) == 0 {
		errs = append(errs, field.Required(gp, "at least one node group"))
	}
	if nodes > MaxNodes {
		errs = append(errs, field.Invalid(gp, nodes, fmt.Sprintf("the node groups can grow to %d nodes (max, summed): at most %d; lower max", nodes, MaxNodes)))
	}

	names := map[string]bool{}
	wp := field.NewPath("workloads")
	errs = append(errs, listOf(wp, len(sc.Workloads), MaxWorkloads)...)
	pods := int64(0)
	for i := range sc.Workloads {
		w, p := &sc.Workloads[i], wp.Index(i)
		errs = append(errs, name(p.Child("name"), w.Name)...)
		if names[w.Namespace+"/"+w.Name] {
			errs = append(errs, field.Duplicate(p.Child("name"), w.Name))
		}
		names[w.Namespace+"/"+w.Name] = true
		if w.Count < 1 || w.Count > 1000 {
			errs = append(errs, field.Invalid(p.Child("count"), w.Count, "must be between 1 and 1000"))
		}
		for _, msg := range validation.IsDNS1123Label(w.Namespace) {
			errs = append(errs, field.Invalid(p.Child("namespace"), w.Namespace, msg))
		}
		errs = append(errs, oneOf(p.Child("kind"), w.Kind, Deployment, StatefulSet)...)
		if w.Replicas < 0 || w.Replicas > 1000 {
			errs = append(errs, field.Invalid(p.Child("replicas"), w.Replicas, "must be between 0 and 1000"))
		}
		if w.PeakReplicas < w.Replicas || w.PeakReplicas > 1000 {
			errs = append(errs, field.Invalid(p.Child("peakReplicas"), w.PeakReplicas, fmt.Sprintf("must be between replicas (%d) and 1000", w.Replicas)))
		}
		pods += int64(max(w.Count, 0)) * int64(max(w.Replicas, w.PeakReplicas, 0))
		if w.CPU.Sign() < 0 {
			errs = append(errs, field.Invalid(p.Child("cpu"), w.CPU.String(), "must not be negative"))
		}
		if w.Memory.Sign() < 0 {
			errs = append(errs, field.Invalid(p.Child("memory"), w.Memory.String(), "must not be negative"))
		}
		switch {
		case w.MinDomains < 0 || int(w.MinDomains) > len(sc.Zones):
			errs = append(errs, field.Invalid(p.Child("minDomains"), w.MinDomains, fmt.Sprintf("must be between 0 (unset) and the number of zones (%d)", len(sc.Zones))))
		case w.MinDomains > 0 && !w.ZoneSpread:
			errs = append(errs, field.Invalid(p.Child("minDomains"), w.MinDomains, "applies to the zone spread constraint: set zoneSpread: true, or remove minDomains"))
		}
		if w.PDB != nil {
			pp := p.Child("pdb")
			switch {
			case (w.PDB.MinAvailable == nil) == (w.PDB.MaxUnavailable == nil):
				errs = append(errs, field.Invalid(pp, "", "set exactly one of minAvailable and maxUnavailable"))
			case w.PDB.MinAvailable != nil && *w.PDB.MinAvailable < 0:
				errs = append(errs, field.Invalid(pp.Child("minAvailable"), *w.PDB.MinAvailable, "must not be negative"))
			case w.PDB.MaxUnavailable != nil && *w.PDB.MaxUnavailable < 0:
				errs = append(errs, field.Invalid(pp.Child("maxUnavailable"), *w.PDB.MaxUnavailable, "must not be negative"))
			}
		}
	}
	if pods > MaxPods {
		errs = append(errs, field.Invalid(wp, pods, fmt.Sprintf("the workloads have %d pods at their peak (count × peakReplicas, summed): at most %d; lower count or replicas", pods, MaxPods)))
	}
	if sc.Load.PeakHour < 0 || sc.Load.PeakHour > 23 {
		errs = append(errs, field.Invalid(field.NewPath("load", "peakHour"), sc.Load.PeakHour, "must be between 0 and 23"))
	}
	return errs
}

func validateCapacity(c *CapacitySource, p *field.Path, dir string) field.ErrorList {
	var errs field.ErrorList
	switch {
	case c.Trace != "" && c.Nodes != nil:
		errs = append(errs, field.Invalid(p, "", "set trace or nodes, not both"))
	case c.Trace == "" && c.Nodes == nil:
		errs = append(errs, field.Required(p, "trace (an availability trace: builtin:<path> or a file) or nodes (a synthetic capacity)"))
	case c.Trace != "":
		if _, err := LoadTrace(c.Trace, dir); err != nil {
			errs = append(errs, field.Invalid(p.Child("trace"), c.Trace, err.Error()))
		}
		if c.ShortagesPerDay != 0 {
			errs = append(errs, field.Invalid(p.Child("shortagesPerDay"), c.ShortagesPerDay, "only with a synthetic capacity (nodes)"))
		}
	default:
		if *c.Nodes < 0 || *c.Nodes > 1000 {
			errs = append(errs, field.Invalid(p.Child("nodes"), *c.Nodes, "must be between 0 and 1000"))
		}
	}
	if c.Scale < 0 || c.Scale > 100 || math.IsNaN(c.Scale) {
		errs = append(errs, field.Invalid(p.Child("scale"), c.Scale, "must be between 0 and 100"))
	}
	if c.ShortagesPerDay < 0 || c.ShortagesPerDay > 100 || math.IsNaN(c.ShortagesPerDay) {
		errs = append(errs, field.Invalid(p.Child("shortagesPerDay"), c.ShortagesPerDay, "must be between 0 and 100"))
	}
	if c.ShortagesPerDay > 0 {
		errs = append(errs, durationIn(p.Child("shortageDuration"), c.ShortageDuration, time.Minute, 720*time.Hour)...)
	}
	errs = append(errs, durationIn(p.Child("offset"), c.Offset, 0, MaxOffset)...)
	errs = append(errs, durationIn(p.Child("stockOutDelay"), c.StockOutDelay, 0, time.Hour)...)
	return errs
}

func validatePreemptions(ps *PreemptionSource, p *field.Path, dir string) field.ErrorList {
	var errs field.ErrorList
	if ps.Trace != "" && ps.RatePerNodeHour != 0 {
		errs = append(errs, field.Invalid(p, "", "set trace or ratePerNodeHour, not both"))
	}
	if ps.Trace != "" {
		if _, err := LoadTrace(ps.Trace, dir); err != nil {
			errs = append(errs, field.Invalid(p.Child("trace"), ps.Trace, err.Error()))
		}
	}
	if ps.Hazard && ps.Trace == "" {
		errs = append(errs, field.Invalid(p.Child("hazard"), ps.Hazard, "only with a trace: a synthetic ratePerNodeHour is already a per-node hazard"))
	}
	if ps.RatePerNodeHour < 0 || ps.RatePerNodeHour > 1 || math.IsNaN(ps.RatePerNodeHour) {
		errs = append(errs, field.Invalid(p.Child("ratePerNodeHour"), ps.RatePerNodeHour, "must be a probability per hour between 0 and 1"))
	}
	errs = append(errs, durationIn(p.Child("offset"), ps.Offset, 0, MaxOffset)...)
	return errs
}

func listOf(p *field.Path, n, limit int) field.ErrorList {
	if n > limit {
		return field.ErrorList{field.TooMany(p, n, limit)}
	}
	return nil
}

func name(p *field.Path, n string) field.ErrorList {
	if n == "" {
		return field.ErrorList{field.Required(p, "a name")}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(n) {
		errs = append(errs, field.Invalid(p, n, msg))
	}
	return errs
}

func durationIn(p *field.Path, d metav1.Duration, lo, hi time.Duration) field.ErrorList {
	if d.Duration < lo || d.Duration > hi {
		return field.ErrorList{field.Invalid(p, d.Duration.String(), fmt.Sprintf("must be between %s and %s", lo, hi))}
	}
	return nil
}

func oneOf(p *field.Path, v string, allowed ...string) field.ErrorList {
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return field.ErrorList{field.NotSupported(p, v, allowed)}
}
