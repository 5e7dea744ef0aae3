// Package classify sorts nodes into spot, on-demand, control-plane, excluded and
// unknown, and says why. It is pure: a function of the Node object, the
// configured selectors and, for nodes whose labels say nothing, a cloud lookup.
//
// Precedence, first match wins:
//
//  1. control-plane: label or taint node-role.kubernetes.io/control-plane or
//     node-role.kubernetes.io/master. Never drained, never a spot target; if the
//     node also looks like spot, the result carries a warning.
//  2. excluded: label spotter.dev/exclude=true, annotation
//     cluster-autoscaler.kubernetes.io/scale-down-disabled=true, or a configured
//     exclude selector.
//  3. configured spot and on-demand selectors (matching both is a conflict:
//     unknown).
//  4. the Cluster API label cluster.x-k8s.io/interruptible (Cluster API writes
//     it with an empty value; any value but "false" counts), when Cluster API
//     (or anyone but Spotter) put it there: the node is spot, whatever other
//     label it has. Cluster API sets it from the infrastructure machine's
//     status.interruptible, and Spotter must never fight it over the label.
//  5. well-known labels (WellKnownLabels); when several speak and disagree, the
//     node is unknown and the reason names the conflict. The interruptible label
//     that Spotter's labeler wrote itself (annotation
//     spotter.dev/interruptible-labeled=true beside it) counts only when no
//     other well-known label speaks.
//  6. the cloud provider (CloudLookup), when one is given.
//  7. otherwise unknown.
package classify

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// Class is the kind of capacity behind a node.
type Class string

// Node classes.
const (
	Spot         Class = "spot"
	OnDemand     Class = "on-demand"
	ControlPlane Class = "control-plane"
	Excluded     Class = "excluded"
	Unknown      Class = "unknown"
)

// Labels, annotations and taints that classification reads.
const (
	ExcludeLabel           = "spotter.dev/exclude"
	ScaleDownDisabledAnnot = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
	ControlPlaneLabel      = "node-role.kubernetes.io/control-plane"
	MasterLabel            = "node-role.kubernetes.io/master"
	InterruptibleLabel     = "cluster.x-k8s.io/interruptible"
	// LabeledByUsAnnotation marks an interruptible label that Spotter's
	// labeler wrote: the labeler removes only those.
	LabeledByUsAnnotation   = "spotter.dev/interruptible-labeled"
	KarpenterCapacityLabel  = "karpenter.sh/capacity-type"
	EKSCapacityLabel        = "eks.amazonaws.com/capacityType"
	GKESpotLabel            = "cloud.google.com/gke-spot"
	GKEPreemptibleLabel     = "cloud.google.com/gke-preemptible"
	AKSPriorityLabel        = "kubernetes.azure.com/scalesetpriority"
	LifecycleLabel          = "node.kubernetes.io/lifecycle"
	SpotWorkerRoleLabel     = "node-role.kubernetes.io/spot-worker"
	WorkerRoleLabel         = "node-role.kubernetes.io/worker"
	labelReasonFormat       = "label %s=%s"
	selectorReasonFormat    = "%s selector %q"
	cloudReasonPrefix       = "cloud provider: "
	controlPlaneSpotWarning = "control-plane node looks like spot (%s); Spotter never uses it as spot"
)

// WellKnownLabels maps a label key to the class each of its values means. A
// value not listed says nothing.
var WellKnownLabels = map[string]map[string]Class{
	KarpenterCapacityLabel: {"spot": Spot, "on-demand": OnDemand, "reserved": OnDemand},
	EKSCapacityLabel:       {"SPOT": Spot, "ON_DEMAND": OnDemand, "CAPACITY_BLOCK": OnDemand},
	GKESpotLabel:           {"true": Spot},
	GKEPreemptibleLabel:    {"true": Spot},
	AKSPriorityLabel:       {"spot": Spot, "regular": OnDemand},
	LifecycleLabel:         {"spot": Spot, "normal": OnDemand, "on-demand": OnDemand},
}

// wellKnownKeys orders WellKnownLabels for stable reasons.
var wellKnownKeys = sortedKeys(WellKnownLabels)

// Result is a node's class and the reason for it.
type Result struct {
	Class Class
	// Reason says which source decided, e.g. "label karpenter.sh/capacity-type=spot".
	Reason string
	// Warning is set when the node is inconsistent, e.g. a control-plane node
	// that also looks like spot.
	Warning string
}

// CloudLookup answers for nodes whose labels say nothing, from the cloud
// provider's instance data. Lookups should be batched and cached by the
// implementation; Classify calls it once per such node.
type CloudLookup interface {
	// IsSpot reports whether the node's instance is spot, and whether the
	// provider knows the node at all.
	IsSpot(node *corev1.Node) (spot, known bool)
}

// Classifier classifies nodes. The zero value uses only built-in rules.
type Classifier struct {
	spot, onDemand, exclude []namedSelector
	cloud                   CloudLookup
	// IgnoreInterruptibleLabel makes the classifier disregard the
	// cluster.x-k8s.io/interruptible label Spotter's labeler wrote, so that the
	// labeler can tell whether a node it once labelled is still spot. The label
	// Cluster API wrote still counts.
	IgnoreInterruptibleLabel bool
}

type namedSelector struct {
	text string
	sel  labels.Selector
}

// New returns a classifier for the configured selectors (validated already by
// the configuration, but parsed again here) and an optional cloud lookup.
func New(cfg v1alpha1.ClassificationConfig, cloud CloudLookup) (*Classifier, error) {
	c := &Classifier{cloud: cloud}
	for _, group := range []struct {
		name string
		in   []string
		out  *[]namedSelector
	}{
		{"spotSelectors", cfg.SpotSelectors, &c.spot},
		{"onDemandSelectors", cfg.OnDemandSelectors, &c.onDemand},
		{"excludeSelectors", cfg.ExcludeSelectors, &c.exclude},
	} {
		for i, s := range group.in {
			sel, err := v1alpha1.ParseSelector(s)
			if err != nil {
				return nil, fmt.Errorf("classification.%s[%d] %q: %w", group.name, i, s, err)
			}
			*group.out = append(*group.out, namedSelector{text: s, sel: sel})
		}
	}
	return c, nil
}

// Classify returns the class of node and why.
func (c *Classifier) Classify(node *corev1.Node) Result {
	set := labels.Set(node.Labels)
	if reason, ok := controlPlane(node); ok {
		r := Result{Class: ControlPlane, Reason: reason}
		if spot := c.spotEvidence(node, set); spot != "" {
			r.Warning = fmt.Sprintf(controlPlaneSpotWarning, spot)
		}
		return r
	}
	if node.Labels[ExcludeLabel] == "true" {
		return Result{Class: Excluded, Reason: fmt.Sprintf(labelReasonFormat, ExcludeLabel, "true")}
	}
	if node.Annotations[ScaleDownDisabledAnnot] == "true" {
		return Result{Class: Excluded, Reason: fmt.Sprintf("annotation %s=true", ScaleDownDisabledAnnot)}
	}
	if s := match(c.exclude, set); s != "" {
		return Result{Class: Excluded, Reason: fmt.Sprintf(selectorReasonFormat, "exclude", s)}
	}

	spotSel, odSel := match(c.spot, set), match(c.onDemand, set)
	switch {
	case spotSel != "" && odSel != "":
		return Result{Class: Unknown, Reason: fmt.Sprintf("matches both spot selector %q and on-demand selector %q", spotSel, odSel)}
	case spotSel != "":
		return Result{Class: Spot, Reason: fmt.Sprintf(selectorReasonFormat, "spot", spotSel)}
	case odSel != "":
		return Result{Class: OnDemand, Reason: fmt.Sprintf(selectorReasonFormat, "on-demand", odSel)}
	}

	if foreignInterruptible(node) {
		return Result{Class: Spot, Reason: fmt.Sprintf(labelReasonFormat, InterruptibleLabel, node.Labels[InterruptibleLabel])}
	}
	if r, ok := c.fromLabels(node); ok {
		return r
	}
	if c.cloud != nil {
		if spot, known := c.cloud.IsSpot(node); known {
			if spot {
				return Result{Class: Spot, Reason: cloudReasonPrefix + "spot instance"}
			}
			return Result{Class: OnDemand, Reason: cloudReasonPrefix + "on-demand instance"}
		}
	}
	return Result{Class: Unknown, Reason: "no capacity-type label, selector or cloud provider answer"}
}

// fromLabels applies the well-known labels.
func (c *Classifier) fromLabels(node *corev1.Node) (Result, bool) {
	var votes []string
	classes := map[Class]string{}
	for _, key := range wellKnownKeys {
		v, ok := node.Labels[key]
		if !ok {
			continue
		}
		if class, ok := WellKnownLabels[key][v]; ok {
			reason := fmt.Sprintf(labelReasonFormat, key, v)
			votes = append(votes, reason)
			if _, seen := classes[class]; !seen {
				classes[class] = reason
			}
		}
	}
	// The older role convention: node-role.kubernetes.io/spot-worker marks spot
	// nodes, node-role.kubernetes.io/worker on-demand ones.
	if _, ok := node.Labels[SpotWorkerRoleLabel]; ok {
		reason := "label " + SpotWorkerRoleLabel
		votes = append(votes, reason)
		if _, seen := classes[Spot]; !seen {
			classes[Spot] = reason
		}
	} else if _, ok := node.Labels[WorkerRoleLabel]; ok && len(classes) == 0 {
		// "worker" alone is too common a role to contradict a capacity label.
		classes[OnDemand] = "label " + WorkerRoleLabel
	}
	if len(classes) == 0 && !c.IgnoreInterruptibleLabel && ourInterruptible(node) {
		classes[Spot] = fmt.Sprintf(labelReasonFormat, InterruptibleLabel, "true")
	}
	switch len(classes) {
	case 0:
		return Result{}, false
	case 1:
		for class, reason := range classes {
			return Result{Class: class, Reason: reason}, true
		}
	}
	return Result{Class: Unknown, Reason: "conflicting labels: " + strings.Join(votes, ", ")}, true
}

// spotEvidence names what makes a node look like spot, or "".
func (c *Classifier) spotEvidence(node *corev1.Node, set labels.Set) string {
	if s := match(c.spot, set); s != "" {
		return fmt.Sprintf(selectorReasonFormat, "spot", s)
	}
	for _, key := range wellKnownKeys {
		if v, ok := node.Labels[key]; ok && WellKnownLabels[key][v] == Spot {
			return fmt.Sprintf(labelReasonFormat, key, v)
		}
	}
	if _, ok := node.Labels[SpotWorkerRoleLabel]; ok {
		return "label " + SpotWorkerRoleLabel
	}
	if foreignInterruptible(node) || ourInterruptible(node) && !c.IgnoreInterruptibleLabel {
		return fmt.Sprintf(labelReasonFormat, InterruptibleLabel, node.Labels[InterruptibleLabel])
	}
	return ""
}

// ourInterruptible reports whether the node carries the interruptible label
// that Spotter's labeler wrote.
func ourInterruptible(node *corev1.Node) bool {
	return node.Labels[InterruptibleLabel] == "true" && node.Annotations[LabeledByUsAnnotation] == "true"
}

// foreignInterruptible reports whether the node carries the interruptible
// label, written by someone other than Spotter: Cluster API, which writes it
// with an empty value. Only "false" says no.
func foreignInterruptible(node *corev1.Node) bool {
	v, ok := node.Labels[InterruptibleLabel]
	return ok && v != "false" && node.Annotations[LabeledByUsAnnotation] != "true"
}

// controlPlane reports whether the node is part of the control plane.
func controlPlane(node *corev1.Node) (string, bool) {
	for _, key := range []string{ControlPlaneLabel, MasterLabel} {
		if _, ok := node.Labels[key]; ok {
			return "label " + key, true
		}
	}
	for _, t := range node.Spec.Taints {
		if t.Key == ControlPlaneLabel || t.Key == MasterLabel {
			return "taint " + t.Key, true
		}
	}
	return "", false
}

func match(sels []namedSelector, set labels.Set) string {
	for _, s := range sels {
		if s.sel.Matches(set) {
			return s.text
		}
	}
	return ""
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
