// Package reference lists, in one place, every label, annotation and taint
// Spotter reads or writes, every Event reason it records and every metric it
// serves: docs/reference.md is generated from it (TestReferenceUpToDate), and
// TestEveryKeyListed fails when the code uses a spotter.dev key or an Event
// reason this file does not list. The names come from the constants of the
// packages that use them, so a renamed constant changes the document.
package reference

import (
	"spotter.dev/spotter/internal/agent/interrupt"
	"spotter.dev/spotter/internal/classify"
	awsprovider "spotter.dev/spotter/internal/cloud/aws"
	"spotter.dev/spotter/internal/cloud/kwok"
	"spotter.dev/spotter/internal/controller/labeler"
	"spotter.dev/spotter/internal/controller/migrator"
	"spotter.dev/spotter/internal/controller/preemptible"
	"spotter.dev/spotter/internal/controller/replacer"
	"spotter.dev/spotter/internal/controller/rescheduler"
	"spotter.dev/spotter/internal/controller/spotfirst"
	"spotter.dev/spotter/internal/drain"
	"spotter.dev/spotter/internal/plan"
)

// Kinds of keys.
const (
	Label      = "label"
	Annotation = "annotation"
	Taint      = "taint"
	Tag        = "AWS tag"
)

// Key is a label, annotation, taint or cloud tag Spotter reads or writes.
type Key struct {
	Name string
	Kind string
	// On is the object that carries it.
	On string
	// Access is "reads", "writes" or "reads, writes".
	Access string
	// By names the components.
	By string
	// Meaning says what it means to Spotter.
	Meaning string
}

// Keys lists the keys, grouped: Spotter's own first, then those of other
// tools it honours.
var Keys = []Key{
	{drain.DrainingAnnotation, Annotation, "Node", "reads, writes", "rescheduler, migrator, preemptible, agent",
		"a drain in progress: JSON with who drains, why, since when and whether the drain cordoned the node; the only state of a drain, so that a restart resumes or rolls it back"},
	{drain.DrainingTaintKey, Taint, "Node", "reads, writes", "rescheduler, migrator, preemptible, agent", "NoSchedule while a drain runs, so that no new pod lands on the node"},
	{drain.EvictedByLabel, Label, "Eviction", "writes", "rescheduler, migrator, preemptible, agent", "the component that asks for the eviction; the chart's admission policy holds the agent's evictions to pods of its own node by it"},
	{interrupt.TaintKey, Taint, "Node", "reads, writes", "agent", "an interruption notice: NoSchedule for a termination, PreferNoSchedule for a rebalance recommendation; the value is the notice's kind"},
	{interrupt.Annotation, Annotation, "Node", "reads, writes", "agent", "the agent's record of the notice it acts on (cloud, kind, deadline, boot ID), cleared when the notice ends"},
	{labeler.OnDemandTaintKey, Taint, "Node", "reads, writes", "labeler", "PreferNoSchedule on on-demand nodes (labeler.preferSpotTaint), so that new pods and replacements prefer spot"},
	{classify.LabeledByUsAnnotation, Annotation, "Node", "reads, writes", "labeler", "marks an interruptible label the labeler wrote; the labeler removes only those"},
	{migrator.SelectedForDeletionLabel, Label, "Node", "reads, writes", "migrator", "an on-demand node being replaced (the value is when it was selected); a restart finishes its replacement"},
	{preemptible.DrainedAnnotation, Annotation, "Node", "reads, writes", "preemptible",
		"a preemptible node drained before the end of its VM's run: JSON with when, the run's end, the node's boot ID and whether the cordon is Spotter's; the node is not drained again, and its cordon is lifted once another boot ID shows its VM was replaced"},
	{classify.ExcludeLabel, Label, "Node", "reads", "all", "=true: never drained, never a destination"},
	{plan.DoNotMoveKey, Label + ", " + Annotation, "Pod", "reads", "planner", "=true: the pod is never moved, and its node is not drained"},
	{spotfirst.GateName, "scheduling gate", "Pod", "reads, writes", "spot-first (the chart's admission policy puts it on)",
		"a new pod waiting for the spot-first controller, which takes it off, after adding a spot label to the node selector of a pod that can run on spot"},
	{spotfirst.SteeredAnnotation, Annotation, "Pod", "reads, writes", "spot-first", "when the pod was steered to spot; still unscheduled spotFirst.fallbackAfter later, it is deleted and its replacement may go anywhere"},
	{kwok.NodeGroupLabel, Label, "Node", "reads, writes", "kwok provider (lab)", "the lab node group a kwok node belongs to"},

	{classify.InterruptibleLabel, Label, "Node", "reads, writes", "labeler, planner, migrator",
		"Cluster API's mark of interruptible (spot) capacity, with any value but false: spot whatever other label the node has; the labeler writes it (=true) on spot nodes and never removes one it did not write"},
	{classify.KarpenterCapacityLabel, Label, "Node", "reads", "classification", "spot, on-demand or reserved"},
	{classify.EKSCapacityLabel, Label, "Node", "reads", "classification, aws provider (template nodes)", "SPOT, ON_DEMAND or CAPACITY_BLOCK"},
	{classify.GKESpotLabel, Label, "Node", "reads", "classification", "=true: spot"},
	{classify.GKEPreemptibleLabel, Label, "Node", "reads", "classification, preemptible", "=true: spot (preemptible); the preemptible controller's default nodeSelectors"},
	{classify.AKSPriorityLabel, Label, "Node", "reads", "classification", "spot or regular"},
	{classify.LifecycleLabel, Label, "Node", "reads", "classification", "spot, normal or on-demand"},
	{classify.SpotWorkerRoleLabel, Label, "Node", "reads", "classification", "present: spot"},
	{classify.WorkerRoleLabel, Label, "Node", "reads", "classification", "present, and no capacity label: on-demand"},
	{classify.ControlPlaneLabel, Label + ", " + Taint, "Node", "reads", "all", "a control-plane node: never drained, never a spot destination, never deleted"},
	{classify.MasterLabel, Label + ", " + Taint, "Node", "reads", "all", "the older name of the control-plane role"},
	{classify.ScaleDownDisabledAnnot, Annotation, "Node", "reads", "all", "=true: excluded, as the cluster autoscaler does"},
	{plan.KarpenterDoNotDisrupt, Annotation, "Pod", "reads", "planner", "=true: the pod is never moved"},
	{plan.SafeToEvictAnnotation, Annotation, "Pod", "reads", "planner", "false: never moved; true: moved even without a controller or with local storage"},
	{plan.SafeToEvictLocalVolumes, Annotation, "Pod", "reads", "planner", "the local volumes whose loss is acceptable"},
	{plan.InstanceTypeLabel, Label, "Node", "reads", "planner", "the instance type, for prices"},
	{migrator.ToBeDeletedTaint, Taint, "Node", "reads, writes", "migrator", "the cluster autoscaler's mark of a node being removed: the migrator replaces such on-demand nodes first (their pods are leaving anyway), and puts it on a node it deletes; spotter cleanup removes it only beside the migrator's selection label"},
	{migrator.DeletionCandidateTaint, Taint, "Node", "reads", "migrator", "the cluster autoscaler's scale-down candidate: the migrator replaces such on-demand nodes first"},
	{awsprovider.EnabledTag, Tag, "Auto Scaling group", "reads", "aws provider", "with " + awsprovider.ClusterTagPrefix + "<cluster>: a group Spotter may scale"},
	{awsprovider.NodeTemplateTagPrefix + "label/<key>, taint/<key>, resources/<name>", Tag, "Auto Scaling group", "reads", "aws provider", "what a new node of the group looks like (scale from zero)"},
}

// Reason is an Event reason Spotter records.
type Reason struct {
	Name string
	// On is the object the Event is about.
	On string
	// Type is Normal or Warning.
	Type    string
	By      string
	Meaning string
}

// Reasons lists every Event reason.
var Reasons = []Reason{
	{drain.ReasonDrainStarted, "Node", "Normal", "drain engine", "a drain started: why, how many pods, in how many waves"},
	{drain.ReasonDrainWave, "Node", "Normal", "drain engine", "a wave of a drain in waves started (one Event action per wave)"},
	{drain.ReasonDrainSucceeded, "Node", "Normal", "drain engine", "the node is empty"},
	{drain.ReasonDrainFailed, "Node", "Warning", "drain engine", "a drain failed: why, and the pods that blocked it"},
	{drain.ReasonDrainRolledBack, "Node", "Normal", "drain engine, rescheduler, preemptible", "the drain's taint, annotation and cordon were removed"},
	{drain.ReasonEvicted, "Pod", "Normal", "drain engine", "the pod was evicted to drain its node, or, displaced by a consolidation, to make room on its node for the pods of the node drained"},
	{drain.ReasonDeleted, "Pod", "Warning", "drain engine (deadline mode)", "the pod was deleted because the interruption's deadline came"},
	{drain.ReasonWouldDrain, "Node", "Normal", "drain engine, rescheduler, preemptible (dry run)", "what a drain would do"},
	{"SpotterDrainable", "Node", "Normal", "rescheduler", "the plan found all the node's pods fit on spot"},
	{"SpotterNotDrainable", "Node", "Normal", "rescheduler", "why the node stays on-demand, as spotter plan says it; recorded again when the reason changes"},
	{"SpotterReplacementsOnOnDemand", "Node", "Warning", "rescheduler", "replacements of evicted pods were scheduled on on-demand nodes; the rescheduler pauses"},
	{rescheduler.ReasonReplacementsReturned, "Node", "Warning", "rescheduler", "replacements of evicted pods (a StatefulSet's, recreated once the drain ended) were scheduled on the drained node again; the node is not drained again for a while, longer each time"},
	{rescheduler.ReasonEmptiedAgain, "Node", "Warning", "rescheduler", "the node had to be emptied again less than an hour after the rescheduler emptied it (pods came back); the node is not drained again for a while, longer each time"},
	{spotfirst.ReasonFallback, "Pod", "Normal", "spot-first", "a pod steered to spot waited spotFirst.fallbackAfter without a node and was deleted; its replacement may run on on-demand nodes"},
	{"SpotterLabeled", "Node", "Normal", "labeler", "labels or taints changed, and why"},
	{"SpotterWouldLabel", "Node", "Normal", "labeler (dry run)", "what the labeler would change"},
	{"SpotterControlPlaneOnSpot", "Node; KubeadmControlPlane (in the management cluster)", "Warning", "labeler; migrator (clusterapi provider)",
		"a control-plane node looks like spot, or a KubeadmControlPlane's machine template asks for spot capacity; Spotter never uses either as spot"},
	{migrator.ReasonSelected, "Node", "Normal", "migrator", "the node was selected for replacement"},
	{migrator.ReasonSpotRequested, "Node", "Normal", "migrator", "spot capacity was asked of a node group"},
	{migrator.ReasonSpotTopUp, "Node", "Normal", "migrator", "during the node's drain, a pod still to be evicted no longer fitted on spot (other pods took the room asked for): one more node was asked of the group, and the drain goes on"},
	{migrator.ReasonSpotUnavailable, "Node", "Warning", "migrator", "the spot group could not deliver (the cloud refused or reported a stock-out, or the nodes were not Ready in time); the request was cancelled, and nothing was drained (or, for a request made during a drain, the drain is rolled back)"},
	{migrator.ReasonSpotRequestFailed, "Node", "Warning", "migrator", "the spot group refused the request for another reason than a shortage (access denied, a malformed group, a size limit): nothing drained, the group not backed off, the next group tried"},
	{migrator.ReasonNodeGroupLeftOut, "Lease (the leader Lease, in Spotter's namespace)", "Warning", "migrator",
		"the cloud provider left a node group out because it cannot read or use it (a launch or instance template that cannot be read, a launch configuration), and why; recorded when it is left out or its reason changes; the other groups are used"},
	{migrator.ReasonSpotGivenBack, "Node", "Normal", "migrator",
		"a request for spot capacity ended short: the instances it brought that never became nodes, or that came too few for the node's pods and were not taken by any pod, were deleted through their group"},
	{migrator.ReasonMigrated, "Node", "Normal", "migrator", "the node was replaced by spot capacity"},
	{migrator.ReasonMigrationFailed, "Node", "Warning", "migrator", "a replacement failed, and why"},
	{migrator.ReasonWouldMigrate, "Node", "Normal", "migrator (dry run)", "what the migrator would do"},
	{preemptible.ReasonNotDrained, "Node", "Warning", "preemptible", "the run of a preemptible node's VM ended before Spotter drained it, and why; its pods were left to the preemption notice"},
	{preemptible.ReasonReplaced, "Node", "Normal", "preemptible", "the VM behind a drained preemptible node was replaced (another boot ID): its cordon and drain record were lifted"},
	{replacer.ReasonReplacementRequested, "Node", "Normal", "replacer (migrator, clusterapi)", "an interrupted node was drained: its Machine was deleted, and its group creates the replacement"},
	{replacer.ReasonWouldReplace, "Node", "Normal", "replacer (dry run)", "what the replacer would do"},
	{interrupt.ReasonNotice, "Node", "Warning (Normal when no action is configured, or when another component handles it)", "agent, interruption queue", "an interruption notice arrived: kind, deadline, what is done, or that the agent or the queue, which saw it first, handles it"},
	{interrupt.ReasonEnded, "Node", "Normal", "agent, interruption queue", "a notice ended, or the node booted again after it: the notice's taint and cordon are lifted"},
	{interrupt.ReasonAcknowledged, "Node", "Normal", "agent", "an Azure Scheduled Event was acknowledged after the drain"},
	{interrupt.ReasonWouldAct, "Node", "Warning for a notice, Normal for its end", "agent (dry run)", "what the agent would do"},
}
