package v1alpha1

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// GKEPreemptibleSelector selects the nodes GKE runs on preemptible VMs: the
// default of preemptible.nodeSelectors.
const GKEPreemptibleSelector = "cloud.google.com/gke-preemptible=true"

// Bounds of the preemptible section.
const (
	// MaxPreemptibleRunTime is Compute Engine's limit: it stops a
	// preemptible VM after 24 hours of running.
	MaxPreemptibleRunTime = 24 * time.Hour
	minPreemptibleRunTime = 10 * time.Minute
	minDrainBefore        = time.Minute
)

// validatePreemptible checks the preemptible section: selectors that parse
// (at least one when the controller is on), a run no longer than Compute
// Engine's, and a margin that leaves the node at least a minute of run
// before its drain.
func validatePreemptible(c *PreemptibleConfig, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if ptr.Deref(c.Enabled, false) && len(c.NodeSelectors) == 0 {
		errs = append(errs, field.Required(p.Child("nodeSelectors"),
			"the preemptible controller needs at least one selector of the nodes of preemptible VMs, such as "+GKEPreemptibleSelector))
	}
	for i, s := range c.NodeSelectors {
		if _, err := ParseSelector(s); err != nil {
			errs = append(errs, field.Invalid(p.Child("nodeSelectors").Index(i), s,
				fmt.Sprintf("not a label selector (use \"key\", \"key=value\" or selector syntax such as \"pool in (a,b)\"): %v", err)))
		}
	}
	if c.MaxRunTime.Duration > MaxPreemptibleRunTime {
		errs = append(errs, field.Invalid(p.Child("maxRunTime"), c.MaxRunTime.Duration.String(),
			"must be at most 24h: Compute Engine stops a preemptible VM after 24 hours of running, and a longer maxRunTime would put the drain after that; set 24h or less"))
	} else {
		errs = append(errs, durationIn(p.Child("maxRunTime"), c.MaxRunTime, minPreemptibleRunTime, MaxPreemptibleRunTime)...)
	}
	switch hi := c.MaxRunTime.Duration - time.Minute; {
	case c.DrainBefore.Duration < minDrainBefore:
		errs = append(errs, field.Invalid(p.Child("drainBefore"), c.DrainBefore.Duration.String(),
			"must be at least 1m: the drain, and the wait for a slot of the disruption budget, happen in it"))
	case c.DrainBefore.Duration > hi:
		errs = append(errs, field.Invalid(p.Child("drainBefore"), c.DrainBefore.Duration.String(),
			fmt.Sprintf("must be at most maxRunTime less 1m (%s), so that a node runs a while before it is drained; lower drainBefore or raise maxRunTime", hi)))
	}
	errs = append(errs, durationIn(p.Child("replacementTimeout"), c.ReplacementTimeout, 10*time.Second, time.Hour)...)
	return errs
}

// preemptibleWarnings says when the preemptible controller's margin is
// shorter than one drain may take.
func preemptibleWarnings(c *SpotterConfiguration) []string {
	if !ptr.Deref(c.Preemptible.Enabled, false) || c.Preemptible.DrainBefore.Duration >= c.Drain.Timeout.Duration {
		return nil
	}
	return []string{fmt.Sprintf("preemptible.drainBefore (%s) is shorter than drain.timeout (%s): a drain of a preemptible node that needs its full time "+
		"would still run when Compute Engine stops the VM; raise preemptible.drainBefore", c.Preemptible.DrainBefore.Duration, c.Drain.Timeout.Duration)}
}
