// Package v1alpha1 is the versioned configuration file of Spotter:
// apiVersion spotter.dev/v1alpha1, kind SpotterConfiguration.
//
// A file is decoded strictly (an unknown or misspelt field is an error naming its
// path), then defaulted (SetDefaults), then validated (Validate). Every field is
// optional; `spotter config defaults` prints the fully defaulted file.
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Group, Version and Kind of the configuration file.
const (
	GroupName = "spotter.dev"
	Version   = "v1alpha1"
	Kind      = "SpotterConfiguration"
)

// APIVersion is the apiVersion a configuration file must carry.
const APIVersion = GroupName + "/" + Version

// SpotterConfiguration configures every Spotter component. The controller reads all
// of it; the node agent reads the agent section (and dryRun).
type SpotterConfiguration struct {
	metav1.TypeMeta `json:",inline"`

	// DryRun, when true, makes every controller and the agent log and record Events
	// of what they would do and change nothing. Each component also has its own
	// dryRun; either one switches dry-run on for that component.
	DryRun bool `json:"dryRun"`

	// Classification says how nodes are sorted into spot, on-demand and excluded.
	Classification ClassificationConfig `json:"classification"`

	// Planner holds the rules that decide which pods may be moved.
	Planner PlannerConfig `json:"planner"`

	// Drain configures the drain engine that the rescheduler, the migrator and the
	// agent share.
	Drain DrainConfig `json:"drain"`

	// Disruption is the budget that the rescheduler and the migrator share.
	Disruption DisruptionConfig `json:"disruption"`

	// Rescheduler moves pods from on-demand nodes to spot nodes when they all fit.
	Rescheduler ReschedulerConfig `json:"rescheduler"`

	// Migrator replaces on-demand nodes by spot nodes through node groups.
	Migrator MigratorConfig `json:"migrator"`

	// Preemptible drains the nodes of Compute Engine preemptible VMs before
	// their run ends (Compute Engine stops them after 24 hours).
	Preemptible PreemptibleConfig `json:"preemptible"`

	// Labeler marks spot nodes interruptible and, optionally, taints on-demand nodes
	// so that new pods prefer spot.
	Labeler LabelerConfig `json:"labeler"`

	// SpotFirst makes new pods wait for spot capacity for a while before they may
	// take room on on-demand nodes (docs/spot-first.md).
	SpotFirst SpotFirstConfig `json:"spotFirst"`

	// Agent configures spotter-agent, the interruption handler on each spot node.
	Agent AgentConfig `json:"agent"`

	// Cloud says where instances and node groups come from: the migrator adds
	// and deletes capacity through it.
	Cloud CloudConfig `json:"cloud"`

	// Pricing gives hourly prices, used to estimate savings.
	Pricing PricingConfig `json:"pricing"`

	// Manager configures the controller process: metrics, health probes and leader
	// election.
	Manager ManagerConfig `json:"manager"`
}

// ClassificationConfig adds selectors to the well-known labels Spotter reads
// (Karpenter, EKS, GKE, AKS, Cluster API). Configured selectors win over
// well-known labels. Each selector is a label key ("key"), a key and value
// ("key=value"), or any Kubernetes label selector ("tier in (spot,batch),!gpu").
type ClassificationConfig struct {
	// SpotSelectors: a node matching any of them is spot.
	SpotSelectors []string `json:"spotSelectors"`
	// OnDemandSelectors: a node matching any of them is on-demand.
	OnDemandSelectors []string `json:"onDemandSelectors"`
	// ExcludeSelectors: a node matching any of them is never touched, in addition
	// to nodes labelled spotter.dev/exclude=true.
	ExcludeSelectors []string `json:"excludeSelectors"`
}

// PlannerConfig holds the movability rules of the planner.
type PlannerConfig struct {
	// AllowUnreplicatedPods lets the planner move pods that no controller owns
	// (they are deleted, not recreated). Default false: such a pod blocks its node.
	AllowUnreplicatedPods bool `json:"allowUnreplicatedPods"`
	// AllowLocalStorage lets the planner move pods with local storage (non-memory
	// emptyDir, hostPath); their data is lost. Default false.
	AllowLocalStorage bool `json:"allowLocalStorage"`
	// Consolidation lets the rescheduler empty an on-demand node whose pods do
	// not all fit on spot: each pod goes to a spot node if one fits it, else
	// to another on-demand node that stays, so that pods that must run on
	// on-demand capacity (a node selector, a required affinity) are packed
	// onto fewer on-demand nodes. It needs the node's price (the pricing
	// section, by instance type).
	Consolidation ConsolidationConfig `json:"consolidation"`
}

// ConsolidationConfig configures consolidations (see PlannerConfig).
type ConsolidationConfig struct {
	// Enabled turns consolidations on. Default true (they need prices).
	Enabled *bool `json:"enabled"`
	// MinHourlySavingPerEviction is the least saving a consolidation must buy
	// with each eviction: the on-demand price per hour of the node it empties
	// (pricing.instanceTypes), divided by the pods it evicts, in the pricing
	// currency. A node whose price is unknown is never consolidated. Default
	// 0.005 (a node at 0.20 per hour is consolidated when it evicts at most 40
	// pods); 0 to 1000.
	MinHourlySavingPerEviction *float64 `json:"minHourlySavingPerEviction"`
}

// DrainConfig configures the drain engine.
type DrainConfig struct {
	// Cordon marks the node unschedulable while it drains, in addition to the
	// spotter.dev/draining:NoSchedule taint. Default false.
	Cordon bool `json:"cordon"`
	// Timeout bounds one node's drain, all its waves included (a node whose
	// pods a PodDisruptionBudget lets go only a few at a time drains in waves,
	// each once the previous wave's replacements are Ready); when it passes,
	// the drain is rolled back.
	// Default 10m; at least 10s.
	Timeout metav1.Duration `json:"timeout"`
	// MaxGracePeriod caps each pod's termination grace period. Zero (the default)
	// keeps every pod's own grace period.
	MaxGracePeriod metav1.Duration `json:"maxGracePeriod"`
	// MaxConcurrentEvictions bounds the evictions in flight on one node. Default 5
	// (also when 0); 1 to 100.
	MaxConcurrentEvictions int32 `json:"maxConcurrentEvictions"`
	// EvictionBackoff is the first wait after an eviction refused by a
	// PodDisruptionBudget (HTTP 429); it doubles, with jitter, up to
	// MaxEvictionBackoff. Default 1s.
	EvictionBackoff metav1.Duration `json:"evictionBackoff"`
	// MaxEvictionBackoff caps the wait between two eviction attempts of one pod.
	// Default 30s.
	MaxEvictionBackoff metav1.Duration `json:"maxEvictionBackoff"`
	// OnRestart says what a starting controller does with a drain its component
	// left unfinished (found by Spotter's marks on the node): Resume or Rollback.
	// Default Resume.
	OnRestart RestartPolicy `json:"onRestart"`
	// ShutdownGracePeriod is how long a drain in flight when Spotter is asked to
	// stop (SIGTERM, SIGINT) may go on to finish; when it passes, the drain is
	// rolled back. Give the controller's pod a terminationGracePeriodSeconds of at
	// least this plus 30s, so that the rollback has time; a process killed before
	// either leaves marks that the next start resumes or rolls back (OnRestart).
	// Default 15s; 0s to 10m (0s rolls back at once).
	ShutdownGracePeriod *metav1.Duration `json:"shutdownGracePeriod"`
}

// RestartPolicy says what to do with an unfinished drain found at start.
type RestartPolicy string

// Restart policies.
const (
	RestartResume   RestartPolicy = "Resume"
	RestartRollback RestartPolicy = "Rollback"
)

// DisruptionConfig is the one budget shared by every controller that drains.
type DisruptionConfig struct {
	// MaxConcurrentDrains is how many nodes may drain at once, cluster-wide, by the
	// rescheduler and the migrator together. Default 1 (also when 0); 1 to 100.
	// To stop voluntary drains, disable the controllers or use Windows.
	MaxConcurrentDrains int32 `json:"maxConcurrentDrains"`
	// Windows, when set, restrict voluntary drains to these periods. Empty (the
	// default) allows drains at any time. Interruption handling ignores windows.
	Windows []Window `json:"windows"`
}

// Window is a recurring period: it opens at each time the cron Schedule names and
// stays open for Duration.
type Window struct {
	// Schedule is a standard five-field cron expression ("0 22 * * 1-5"), or a
	// descriptor such as "@daily". It must fire at least once in every calendar
	// year ("0 0 30 2 *" never fires and "0 0 29 2 *" only in leap years: both
	// are refused).
	Schedule string `json:"schedule"`
	// Duration is how long the window stays open. Required; 1m to 168h.
	Duration metav1.Duration `json:"duration"`
	// TimeZone is the IANA time zone the schedule is read in. Default "UTC".
	TimeZone string `json:"timeZone"`
}

// ReschedulerConfig configures the rescheduler controller.
type ReschedulerConfig struct {
	// Enabled switches the rescheduler on. Default true.
	Enabled *bool `json:"enabled"`
	// DryRun logs and records what the rescheduler would do and changes nothing.
	DryRun bool `json:"dryRun"`
	// Interval between two planning cycles. Default 1m; at least 10s.
	Interval metav1.Duration `json:"interval"`
	// DrainDelay is the pause after one node's evicted pods are running again
	// before the next node is drained. Default 5m; 0s for no pause.
	DrainDelay *metav1.Duration `json:"drainDelay"`
	// ReplacementTimeout bounds the wait for the evicted pods' replacements to be
	// Running. Default 5m; at least 10s.
	ReplacementTimeout metav1.Duration `json:"replacementTimeout"`
	// CordonAfterDrain leaves a drained node cordoned. Default false: the node is
	// left schedulable and the autoscaler removes it once it is empty.
	CordonAfterDrain bool `json:"cordonAfterDrain"`
	// FailureBackoff is the first cooldown of a node whose drain failed; it doubles
	// up to MaxFailureBackoff. Default 10m.
	FailureBackoff metav1.Duration `json:"failureBackoff"`
	// MaxFailureBackoff caps a failed node's cooldown. Default 6h.
	MaxFailureBackoff metav1.Duration `json:"maxFailureBackoff"`
}

// MigratorConfig configures the migrator controller.
type MigratorConfig struct {
	// Enabled switches the migrator on. Default false: it needs node groups from a
	// cloud provider.
	Enabled *bool `json:"enabled"`
	// DryRun logs and records what the migrator would do and changes nothing.
	DryRun bool `json:"dryRun"`
	// Schedule is the cron expression of migration runs, at fixed clock times so
	// that restarts do not push a run back. Default "0 * * * *" (hourly). It must
	// fire at least once in every calendar year.
	Schedule string `json:"schedule"`
	// TimeZone is the IANA time zone the schedule is read in. Default "UTC".
	TimeZone string `json:"timeZone"`
	// Mode is MakeBeforeBreak (add spot capacity, wait until it is Ready, then drain
	// and delete the on-demand node) or DrainFirst (drain and delete first, let an
	// autoscaler provision spot). Default MakeBeforeBreak.
	Mode MigrationMode `json:"mode"`
	// NodeReadyTimeout bounds the wait for new spot nodes to be Ready; when it
	// passes, the request is cancelled and nothing is drained. Default 10m.
	NodeReadyTimeout metav1.Duration `json:"nodeReadyTimeout"`
	// MaxNodesPerRun bounds the on-demand nodes replaced in one run. Default 10
	// (also when 0); 1 to 1000.
	MaxNodesPerRun int32 `json:"maxNodesPerRun"`
	// SpotUnavailableBackoff is the first pause of a spot node group that could not
	// deliver capacity. The migrator tries the group again when the pause ends
	// (not only at the next scheduled run); the pause doubles only while the
	// shortage lasts (each try soon after the previous pause, failing again), up
	// to MaxSpotUnavailableBackoff, and is forgotten when the group delivers or
	// a spot node of its instance type and zone becomes Ready. Default 2m.
	SpotUnavailableBackoff metav1.Duration `json:"spotUnavailableBackoff"`
	// MaxSpotUnavailableBackoff caps that pause. Default 4h.
	MaxSpotUnavailableBackoff metav1.Duration `json:"maxSpotUnavailableBackoff"`
	// SpotReadyDelay is how long after a spot node became Ready (spot capacity
	// returning) the migrator runs, between scheduled runs; news within the
	// delay joins the same run. 0 turns these runs off: only the schedule and
	// the retries after a shortage start runs. Default 30s; at most 1h.
	SpotReadyDelay *metav1.Duration `json:"spotReadyDelay"`
	// InterruptionCost weighs a spot node group's observed interruptions
	// against its price: the migrator grows the group with the lowest expected
	// price, price × (1 + interruptions per node-hour × InterruptionCost in
	// hours), as if each interruption cost this much of the node's running
	// time. Interruptions are the spot nodes of the group's instance type and
	// zone that the agent tainted with a termination notice. 0 orders by price
	// alone. Default 2h; at most 1000h.
	InterruptionCost *metav1.Duration `json:"interruptionCost"`
	// InterruptionWindow is how far back interruptions and node-hours are
	// counted. Default 24h; 1h to 30 days.
	InterruptionWindow metav1.Duration `json:"interruptionWindow"`
	// MaxSpotSharePercent spreads spot capacity: a group whose instance type
	// and zone already hold more than this share of the cluster's spot nodes
	// is tried after every group that holds less, so that one preemption wave
	// cannot take all of the spot capacity. Groups of equal expected price
	// are tried in order of their share, lowest first. 100 turns the cap off.
	// Default 50; 1 to 100.
	MaxSpotSharePercent int32 `json:"maxSpotSharePercent"`
}

// PreemptibleConfig configures the preemptible controller. Compute Engine
// stops a preemptible VM (scheduling.preemptible; not a Spot VM) after 24
// hours of running, with 30 seconds of notice. The controller drains each
// preemptible node from drainBefore ahead of the end of its run, through the
// drain engine (PodDisruptionBudgets honoured), one node at a time with a
// slot of the disruption budget and inside its windows, oldest first, and
// leaves it cordoned until its VM is stopped or replaced. A run is taken to
// start when the node registered (its creationTimestamp); see
// docs/preemptible.md.
type PreemptibleConfig struct {
	// Enabled switches the controller on. Default false.
	Enabled *bool `json:"enabled"`
	// DryRun logs and records what the controller would drain and changes
	// nothing.
	DryRun bool `json:"dryRun"`
	// NodeSelectors: a node matching any of them runs on a preemptible VM.
	// Default ["cloud.google.com/gke-preemptible=true"], the label GKE puts on
	// the nodes of preemptible node pools. Same syntax as
	// classification.spotSelectors. Control-plane and excluded nodes are never
	// drained.
	NodeSelectors []string `json:"nodeSelectors"`
	// MaxRunTime is how long a preemptible VM runs before it is stopped.
	// Default 24h, Compute Engine's limit; 10m to 24h. A shorter time
	// replaces preemptible nodes sooner than Compute Engine would.
	MaxRunTime metav1.Duration `json:"maxRunTime"`
	// DrainBefore is how long before the end of its run a node is drained.
	// It must cover the drain itself and the wait for a slot of the
	// disruption budget or for a drain window. Default 1h; from 1m to
	// maxRunTime less 1m.
	DrainBefore metav1.Duration `json:"drainBefore"`
	// ReplacementTimeout bounds the wait, after a drain, for the evicted
	// pods' replacements to be Running before the next node is drained.
	// Default 5m; 10s to 1h.
	ReplacementTimeout metav1.Duration `json:"replacementTimeout"`
}

// CloudConfig chooses the cloud provider.
type CloudConfig struct {
	// Provider is kubernetes (labels only: no node groups, deleting an instance
	// deletes its Node object), aws (EC2 instances and Auto Scaling groups, see
	// docs/cloud-aws.md), clusterapi (Cluster API MachineDeployments,
	// MachineSets and MachinePools that carry the cluster autoscaler's min and
	// max size annotations), gcp (Compute Engine instances and managed instance groups,
	// see docs/cloud-gcp.md), azure (Azure VM scale sets, Uniform and
	// Flexible, and AKS node pools, see docs/cloud-azure.md) or kwok (node
	// groups of kwok Nodes, for the lab and tests). Default kubernetes.
	Provider CloudProvider `json:"provider"`
	// KwokConfigFile is the kwok provider's node groups (see
	// internal/cloud/kwok.Config). Required with provider kwok.
	KwokConfigFile string `json:"kwokConfigFile"`
	// AWS configures provider aws.
	AWS AWSConfig `json:"aws"`
	// ClusterAPI configures provider clusterapi.
	ClusterAPI ClusterAPIConfig `json:"clusterAPI"`
	// GCP configures provider gcp.
	GCP GCPConfig `json:"gcp"`
	// Azure configures provider azure.
	Azure AzureConfig `json:"azure"`
	// RequestsPerSecond is the most requests a second Spotter sends to the
	// cloud's API (providers aws, gcp and azure; all their clients together),
	// in bursts of up to twice that. The clouds throttle far higher (EC2's
	// and Resource Manager's token buckets refill 20 or more a second), so
	// that Spotter's calls leave room for the other clients of the account.
	// Default 10; 1 to 1000.
	RequestsPerSecond int32 `json:"requestsPerSecond"`
}

// AzureConfig configures the azure provider. Credentials come from Microsoft
// Entra workload identity (the AZURE_FEDERATED_TOKEN_FILE, AZURE_CLIENT_ID and
// AZURE_TENANT_ID the AKS workload identity webhook sets) or, without it, from
// a managed identity; Spotter stores no secret.
type AzureConfig struct {
	// SubscriptionID is the subscription of the scale sets. Required with
	// provider azure.
	SubscriptionID string `json:"subscriptionID"`
	// ResourceGroup is the resource group of the scale sets (on AKS, the
	// cluster's node resource group, MC_...), for the nodeGroups entries
	// that name none. Required with provider azure unless every entry names
	// its own.
	ResourceGroup string `json:"resourceGroup"`
	// NodeGroups says which VM scale sets Spotter may scale and their sizes;
	// a scale set two entries select takes the first one's sizes. At least
	// one with provider azure.
	NodeGroups []AzureNodeGroup `json:"nodeGroups"`
	// ManagedIdentityClientID is the client ID of the user-assigned managed
	// identity to use when workload identity is not set up. Empty: the
	// system-assigned identity (or the only user-assigned one).
	ManagedIdentityClientID string `json:"managedIdentityClientID"`
	// Endpoint overrides the Azure Resource Manager endpoint, for tests and
	// proxies; the public Retail Prices API (prices) is read at the same
	// address, without credentials. An http:// endpoint is spoken to without
	// credentials; an https:// one with them. Empty (the default): Azure's
	// public cloud.
	Endpoint string `json:"endpoint"`
}

// AzureNodeGroup selects VM scale sets of a resource group by exactly one of
// scaleSet, namePrefix or nodePool, and gives their sizes: a scale set has no
// minimum or maximum of its own.
type AzureNodeGroup struct {
	// ResourceGroup is the scale sets' resource group. Empty: the
	// configuration's resourceGroup.
	ResourceGroup string `json:"resourceGroup"`
	// ScaleSet names one scale set.
	ScaleSet string `json:"scaleSet"`
	// NamePrefix selects every scale set of the resource group whose name
	// starts with it.
	NamePrefix string `json:"namePrefix"`
	// NodePool selects the scale set of an AKS node pool (the tag
	// aks-managed-poolName AKS puts on it).
	NodePool string `json:"nodePool"`
	// MinSize is the smallest capacity of each selected scale set. At least
	// 0.
	MinSize int32 `json:"minSize"`
	// MaxSize is the largest capacity of each selected scale set. At least 1
	// and at least minSize.
	MaxSize int32 `json:"maxSize"`
}

// GCPConfig configures the gcp provider. Credentials come from Application
// Default Credentials only (workload identity on GKE, a service account's
// key file named by GOOGLE_APPLICATION_CREDENTIALS, the metadata server).
type GCPConfig struct {
	// Project is the ID of the project whose instances and managed instance
	// groups Spotter reads. Required with provider gcp.
	Project string `json:"project"`
	// ClusterName keeps, of the groups a nodePool entry selects, those of
	// this GKE cluster (instance template label goog-k8s-cluster-name).
	// Empty: any cluster's.
	ClusterName string `json:"clusterName"`
	// NodeGroups says which managed instance groups Spotter may scale and
	// their sizes; a group two entries select takes the first one's sizes.
	// At least one with provider gcp.
	NodeGroups []GCPNodeGroup `json:"nodeGroups"`
	// Endpoint overrides the base URL of the Compute Engine API and of the
	// Cloud Billing Catalog API (prices), for tests and proxies. An http://
	// endpoint is spoken to without credentials; an https:// one with them.
	// Empty (the default): Google's.
	Endpoint string `json:"endpoint"`
}

// GCPNodeGroup selects managed instance groups (zonal or regional) by exactly
// one of instanceGroupManager, namePrefix or nodePool, and gives their sizes:
// a managed instance group has no minimum or maximum of its own.
type GCPNodeGroup struct {
	// InstanceGroupManager names one group:
	// zones/<zone>/instanceGroupManagers/<name>,
	// regions/<region>/instanceGroupManagers/<name>, or its full URL.
	InstanceGroupManager string `json:"instanceGroupManager"`
	// NamePrefix selects every group of the project whose name starts with
	// it (as the cluster autoscaler's mig:namePrefix= auto-discovery does).
	NamePrefix string `json:"namePrefix"`
	// NodePool selects the groups of a GKE node pool, one per zone (instance
	// template label goog-k8s-node-pool-name).
	NodePool string `json:"nodePool"`
	// MinSize is the smallest target size of each selected group. At least 0.
	MinSize int32 `json:"minSize"`
	// MaxSize is the largest target size of each selected group. At least 1
	// and at least minSize.
	MaxSize int32 `json:"maxSize"`
}

// ClusterAPIConfig configures the clusterapi provider. Its node groups are the
// MachineDeployments, the MachineSets no MachineDeployment owns and the
// MachinePools, annotated
// cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size and
// cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size, as for the
// cluster autoscaler's clusterapi provider; the fields below narrow them down.
type ClusterAPIConfig struct {
	// ManagementKubeconfig is the path of a kubeconfig for the management
	// cluster, where the Cluster API objects live. Empty (the default): they
	// live in the cluster Spotter runs in.
	ManagementKubeconfig string `json:"managementKubeconfig"`
	// ClusterName keeps the node groups of the Cluster of this name
	// (spec.clusterName). Empty: every Cluster's.
	ClusterName string `json:"clusterName"`
	// Namespace keeps the node groups of this namespace of the management
	// cluster. Empty: every namespace.
	Namespace string `json:"namespace"`
	// LabelSelector keeps the MachineDeployments, MachineSets and MachinePools
	// whose labels it selects (Kubernetes label selector syntax, e.g.
	// "spotter.dev/managed=true,tier!=gpu"). Empty: all.
	LabelSelector string `json:"labelSelector"`
	// ReplaceInterruptedMachines deletes the Machine of a node drained for a
	// termination notice (by the agent or the interruption queue) once its
	// pods are gone, so that its MachineSet or MachinePool creates the
	// replacement at once rather than when a MachineHealthCheck notices the
	// node is gone. Runs with the migrator. Default true.
	ReplaceInterruptedMachines *bool `json:"replaceInterruptedMachines"`
}

// AWSConfig configures the aws provider. Credentials and the region come from
// the AWS SDK's standard chain (environment, shared files, web identity, the
// instance metadata service).
type AWSConfig struct {
	// Region overrides the region of the standard chain.
	Region string `json:"region"`
	// ClusterName selects the Auto Scaling groups tagged
	// k8s.io/cluster-autoscaler/<clusterName> and
	// k8s.io/cluster-autoscaler/enabled, as the cluster autoscaler's
	// auto-discovery does. Provider aws needs it or autoScalingGroups.
	ClusterName string `json:"clusterName"`
	// AutoScalingGroups names the groups to use instead of discovering them.
	AutoScalingGroups []string `json:"autoScalingGroups"`
	// TerminateInstancesOutsideGroups lets Spotter replace an on-demand
	// node whose instance is in no Auto Scaling group, terminating it with
	// ec2:TerminateInstances. Default false: such a node is never drained
	// for replacement, and the IAM policy needs no TerminateInstances.
	TerminateInstancesOutsideGroups bool `json:"terminateInstancesOutsideGroups"`
	// InterruptionQueueURL is the SQS queue to which EventBridge rules send
	// the cluster's spot interruption warnings, rebalance recommendations,
	// instance state changes, scheduled changes and Auto Scaling terminating
	// lifecycle actions (docs/queue.md). With it set, the controller's leader
	// reads the queue and handles each event for the node of its instance as
	// the agent handles a notice; the agent is then optional on AWS. Empty
	// (the default): no queue.
	InterruptionQueueURL string `json:"interruptionQueueURL"`
}

// CloudProvider names a cloud provider.
type CloudProvider string

// Cloud providers.
const (
	ProviderKubernetes CloudProvider = "kubernetes"
	ProviderKwok       CloudProvider = "kwok"
	ProviderAWS        CloudProvider = "aws"
	ProviderClusterAPI CloudProvider = "clusterapi"
	ProviderGCP        CloudProvider = "gcp"
	ProviderAzure      CloudProvider = "azure"
)

// MigrationMode is the order in which the migrator replaces a node.
type MigrationMode string

// Migration modes.
const (
	MigrationMakeBeforeBreak MigrationMode = "MakeBeforeBreak"
	MigrationDrainFirst      MigrationMode = "DrainFirst"
)

// LabelerConfig configures the labeler controller.
type LabelerConfig struct {
	// Enabled switches the labeler on. Default true.
	Enabled *bool `json:"enabled"`
	// DryRun logs and records what the labeler would do and changes nothing.
	DryRun bool `json:"dryRun"`
	// InterruptibleLabel keeps cluster.x-k8s.io/interruptible=true on spot nodes
	// (and removes it from nodes that are no longer spot, where the labeler put
	// it; a label Cluster API put is never removed). Default true.
	InterruptibleLabel *bool `json:"interruptibleLabel"`
	// PreferSpotTaint keeps the taint spotter.dev/on-demand=true:PreferNoSchedule on
	// on-demand nodes, so that new pods, and the replacements of the pods the
	// rescheduler evicts, prefer spot nodes over emptier on-demand ones. Default
	// true; without it the scheduler tends to put replacements back on the
	// emptiest on-demand node.
	PreferSpotTaint *bool `json:"preferSpotTaint"`
}

// SpotFirstConfig configures the spot-first controller. The chart's admission
// policy puts the scheduling gate spotter.dev/spot-first on new pods of the
// namespaces it selects; the controller takes it off at once from pods that
// cannot run on spot or that their workload needs now, and from the others
// after adding the spot label of the cluster's spot nodes to their node
// selector, so that they wait for spot (the cluster autoscaler adds spot nodes
// for them) instead of taking room on on-demand nodes; a pod still waiting
// after fallbackAfter is deleted, and its replacement may go anywhere.
type SpotFirstConfig struct {
	// Enabled switches the spot-first controller on. Default false. With it on,
	// new pods of the namespaces the chart's admission policy selects wait for
	// this controller: while it is down they are not scheduled.
	Enabled *bool `json:"enabled"`
	// DryRun logs what the controller would do and changes nothing.
	DryRun bool `json:"dryRun"`
	// FallbackAfter is how long a pod steered to spot may stay unscheduled
	// before it is deleted and its replacement may run on on-demand nodes.
	// Only pods their workload does without for now are steered (its owner
	// has a Ready pod, and no PodDisruptionBudget that selects the pod is
	// short), and a steered pod falls back at once when its workload comes to
	// need it. Default 10m; 1m to 24h. Longer saves more and evicts less, for
	// more pending pods (docs/spot-first.md).
	FallbackAfter metav1.Duration `json:"fallbackAfter"`
}

// AgentConfig configures spotter-agent.
type AgentConfig struct {
	// DryRun logs and records what the agent would do and changes nothing.
	DryRun bool `json:"dryRun"`
	// Cloud is the metadata service to watch: aws, gcp, azure, or auto (probe each
	// with a short timeout). Default auto.
	Cloud Cloud `json:"cloud"`
	// MetadataEndpoint overrides the base URL of the metadata service (tests,
	// proxies). Empty (the default) uses the cloud's link-local address.
	MetadataEndpoint string `json:"metadataEndpoint"`
	// PollInterval between two polls of a metadata endpoint. Default 1s; 100ms to 1m.
	PollInterval metav1.Duration `json:"pollInterval"`
	// TerminationPollInterval between two reads of what carries a
	// termination notice, when smaller than PollInterval: on AWS
	// spot/instance-action and autoscaling/target-lifecycle-state, on Azure
	// the Scheduled Events document (IMDS allows a VM 5 requests a second).
	// GCP answers its long polls at once and does not use it. Empty (the
	// default): 200ms on AWS, 250ms on Azure; 50ms to 1m.
	TerminationPollInterval *metav1.Duration `json:"terminationPollInterval,omitempty"`
	// RequestTimeout bounds one metadata request. Default 2s; 100ms to 1m.
	RequestTimeout metav1.Duration `json:"requestTimeout"`
	// DeadlineMargin is kept free before a notice's deadline: pods must be gone by
	// notice time minus this margin. Default 5s; 0s to 1m.
	DeadlineMargin *metav1.Duration `json:"deadlineMargin"`
	// RebalanceAction is what an AWS rebalance recommendation does: None, Taint
	// (PreferNoSchedule), Cordon or Drain. Default Taint.
	RebalanceAction NoticeAction `json:"rebalanceAction"`
	// MaintenanceAction is what a scheduled maintenance event (AWS scheduled
	// events; Azure Reboot, Redeploy and Freeze) does: None, Taint, Cordon or Drain.
	// Default Drain.
	MaintenanceAction NoticeAction `json:"maintenanceAction"`
	// AcknowledgeAzureEvents approves an Azure scheduled event once the node is
	// drained, so that the platform can go ahead early. Default true.
	AcknowledgeAzureEvents *bool `json:"acknowledgeAzureEvents"`
	// MetricsBindAddress is where the agent serves Prometheus metrics, host:port;
	// "0" turns them off. Default ":9102".
	MetricsBindAddress string `json:"metricsBindAddress"`
	// MetricsAuthentication says who may read the agent's metrics: Kubernetes
	// (HTTPS, callers authenticated and authorized by the apiserver) or None
	// (plain HTTP, anyone who can connect). Default Kubernetes.
	MetricsAuthentication MetricsAuthentication `json:"metricsAuthentication"`
	// MetricsCertDir holds tls.crt and tls.key for the agent's metrics endpoint
	// (re-read when they change). Empty (the default): a self-signed certificate.
	// Only with MetricsAuthentication Kubernetes.
	MetricsCertDir string `json:"metricsCertDir"`
	// HealthProbeBindAddress is where the agent serves /healthz and /readyz,
	// host:port; "0" turns them off. Plain HTTP, no authentication: the kubelet
	// probes it, and it says only "ok" or which metadata path fails. /readyz
	// fails until each notice path of the metadata service has been read, and
	// while a path fails ReadinessFailureThreshold reads in a row
	// (docs/agent.md). Default ":9103".
	HealthProbeBindAddress string `json:"healthProbeBindAddress"`
	// ReadinessFailureThreshold is how many reads in a row of one path of the
	// metadata service must fail for /readyz to fail: the agent is blind to
	// notices then. A good read of the path makes it ready again. Default 3; at
	// least 1.
	ReadinessFailureThreshold int32 `json:"readinessFailureThreshold"`
}

// Cloud names a metadata service.
type Cloud string

// Clouds the agent understands.
const (
	CloudAuto  Cloud = "auto"
	CloudAWS   Cloud = "aws"
	CloudGCP   Cloud = "gcp"
	CloudAzure Cloud = "azure"
)

// NoticeAction is what the agent does on an advisory notice.
type NoticeAction string

// Notice actions, mildest first.
const (
	ActionNone   NoticeAction = "None"
	ActionTaint  NoticeAction = "Taint"
	ActionCordon NoticeAction = "Cordon"
	ActionDrain  NoticeAction = "Drain"
)

// PricingConfig gives hourly prices per instance type, used for savings estimates
// (metrics, `spotter plan`, `spotter simulate --from-cluster`). The instance type of
// a node is its node.kubernetes.io/instance-type label.
type PricingConfig struct {
	// Currency is the unit of every price, for display only. Default "USD".
	Currency string `json:"currency"`
	// InstanceTypes maps an instance type to its hourly prices.
	InstanceTypes map[string]InstancePrice `json:"instanceTypes"`
}

// InstancePrice is the hourly price of one instance type.
type InstancePrice struct {
	// OnDemand is the on-demand price per hour. At least 0.
	OnDemand float64 `json:"onDemand"`
	// Spot is the typical spot price per hour. At least 0, at most OnDemand.
	Spot float64 `json:"spot"`
}

// ManagerConfig configures the controller process.
type ManagerConfig struct {
	// MetricsBindAddress is where Prometheus metrics are served, host:port; "0"
	// turns them off. Default ":8443".
	MetricsBindAddress string `json:"metricsBindAddress"`
	// MetricsAuthentication says who may read the metrics: Kubernetes (HTTPS,
	// callers authenticated and authorized by the apiserver) or None (plain HTTP,
	// anyone who can connect). Default Kubernetes.
	MetricsAuthentication MetricsAuthentication `json:"metricsAuthentication"`
	// MetricsCertDir holds tls.crt and tls.key for the metrics endpoint (re-read
	// when they change). Empty (the default): a self-signed certificate. Only
	// with MetricsAuthentication Kubernetes.
	MetricsCertDir string `json:"metricsCertDir"`
	// HealthProbeBindAddress is where /healthz and /readyz are served, host:port;
	// "0" turns them off. Plain HTTP, no authentication: the kubelet probes it,
	// and it says only "ok" or which check fails. Default ":8081".
	HealthProbeBindAddress string `json:"healthProbeBindAddress"`
	// LeaderElection makes one replica act at a time.
	LeaderElection LeaderElectionConfig `json:"leaderElection"`
}

// LeaderElectionConfig configures leader election on a coordination.k8s.io Lease.
type LeaderElectionConfig struct {
	// Enabled switches leader election on. Default true.
	Enabled *bool `json:"enabled"`
	// LeaseName is the name of the Lease. Default "spotter".
	LeaseName string `json:"leaseName"`
	// LeaseNamespace is the namespace of the Lease. Empty (the default) means the
	// namespace Spotter runs in (POD_NAMESPACE), else kube-system.
	LeaseNamespace string `json:"leaseNamespace"`
	// LeaseDuration is how long a lease is valid without renewal. Default 15s.
	LeaseDuration metav1.Duration `json:"leaseDuration"`
	// RenewDeadline is how long the leader keeps trying to renew before it gives
	// up leadership. Default 10s; below LeaseDuration.
	RenewDeadline metav1.Duration `json:"renewDeadline"`
	// RetryPeriod is the wait between two attempts to acquire or renew. Default 2s;
	// below RenewDeadline.
	RetryPeriod metav1.Duration `json:"retryPeriod"`
}

// MetricsAuthentication says who may read a metrics endpoint.
type MetricsAuthentication string

// Ways of guarding a metrics endpoint.
const (
	// MetricsAuthKubernetes serves HTTPS and lets a request through only when
	// its bearer token passes a TokenReview and a SubjectAccessReview allows its
	// identity to get the non-resource URL /metrics. The serving process needs
	// create on tokenreviews and subjectaccessreviews.
	MetricsAuthKubernetes MetricsAuthentication = "Kubernetes"
	// MetricsAuthNone serves plain HTTP to anyone who can connect: for a
	// loopback address, or a network you restrict otherwise.
	MetricsAuthNone MetricsAuthentication = "None"
)
