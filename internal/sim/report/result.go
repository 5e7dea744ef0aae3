package report

import "time"

// Result is what one strategy's run measured. Every figure is computed from
// the simulation; none is set by hand.
type Result struct {
	Strategy string `json:"strategy"`
	// Cost is the price of every node from its launch request to its
	// termination, in the scenario's currency.
	Cost float64 `json:"cost"`
	// Saving is the share of the all-on-demand baseline's cost saved (0.3 is
	// 30%); 0 for the baseline itself.
	Saving float64 `json:"saving"`
	// BoundShare is the share of the bound's saving this run achieved:
	// Saving divided by the bound's Saving (1 is all of it, which no run can
	// pass while it runs every pod). Absent for the baseline and the bound,
	// and when the bound saves nothing.
	BoundShare *float64 `json:"boundShare,omitempty"`
	// PackingShare is the share of the packing heuristic's saving this run
	// achieved: Saving divided by the packing's Saving. Absent for the
	// baseline, and when the packing saves nothing.
	PackingShare *float64 `json:"packingShare,omitempty"`
	// SpotShare is the share of pod-hours (pods bound to a node) on spot nodes.
	SpotShare float64 `json:"spotShare"`
	// Evictions counts voluntary evictions (Eviction API calls that succeeded)
	// by strategy components; EvictionsPerPodDay divides them by the average
	// number of pods and the days simulated.
	Evictions          int            `json:"evictions"`
	EvictionsBy        map[string]int `json:"evictionsBy,omitempty"`
	EvictionsPerPodDay float64        `json:"evictionsPerPodDay"`
	// EvictionsRefused counts evictions a PodDisruptionBudget refused (429),
	// EvictionsRefusedBy by strategy component (the agent's drains of nodes
	// being taken back included).
	EvictionsRefused   int            `json:"evictionsRefused"`
	EvictionsRefusedBy map[string]int `json:"evictionsRefusedBy,omitempty"`
	// WastedEvictions counts pods evicted by drains that were then abandoned,
	// leaving their node in place.
	WastedEvictions int `json:"wastedEvictions"`
	// PreemptedNodes are spot nodes the market took back; PreemptedPods the
	// pods running on them when the notice came.
	PreemptedNodes int `json:"preemptedNodes"`
	PreemptedPods  int `json:"preemptedPods"`
	// PendingPodMinutes adds up the minutes each pod spent Pending (unbound).
	PendingPodMinutes float64 `json:"pendingPodMinutes"`
	// LostPodMinutes adds up the minutes pods spent on a node that was gone
	// before their controller noticed (no drain on the notice).
	LostPodMinutes float64 `json:"lostPodMinutes"`
	// PDBBelowBudgetPodMinutes adds up, over the workloads with a
	// PodDisruptionBudget, the pods missing below what the budget demands
	// (desired healthy less healthy, as the disruption controller counts
	// them), minute by minute, whatever the cause: evictions, preemptions,
	// lost nodes, pods still starting after a scale-up. What a user feels,
	// where EvictionsRefused is what the budgets held back.
	PDBBelowBudgetPodMinutes float64 `json:"pdbBelowBudgetPodMinutes"`
	// PDBBelowBudgetVoluntaryPodMinutes is the part of
	// PDBBelowBudgetPodMinutes during which the workload had pods evicted
	// voluntarily (by the strategy, not the agent's drains before a node
	// goes) whose replacements were not Ready yet: at most as many pods as
	// those, minute by minute. The Eviction API refuses an eviction that
	// would take a budget below what it demands; the budget can still fall
	// below while a replacement starts, when something else (a preemption)
	// takes a pod too. An upper bound on what voluntary evictions caused.
	PDBBelowBudgetVoluntaryPodMinutes float64 `json:"pdbBelowBudgetVoluntaryPodMinutes"`
	// ZoneSpreadShortZoneMinutes adds up, over the workloads whose pods must
	// spread over zones (a topology spread constraint on the zone label,
	// DoNotSchedule), the zones missing from where their running pods are,
	// minute by minute: the zones where a node group takes their pods (or as
	// many as their pods, when fewer) less the zones their pods are in. The
	// scheduler spreads over the zones that have nodes only, and never moves
	// a running pod: a cluster whose nodes all leave a zone keeps such a
	// workload "spread" over the zones left, and pods placed while a zone had
	// no node stay where they are when it has one again. This counts the
	// resilience given up, in every row (a scale-down's order ignores zones
	// too).
	ZoneSpreadShortZoneMinutes float64 `json:"zoneSpreadShortZoneMinutes"`
	// PDBViolations counts voluntary evictions after which a
	// PodDisruptionBudget had fewer healthy pods than it demands. The
	// Eviction API refuses those, so it stays 0: a check of the model.
	PDBViolations int `json:"pdbViolations"`
	// BackToSpot measures how long spot capacity stayed unused while
	// spot-eligible pods ran on on-demand nodes of the same zone.
	BackToSpot BackToSpot `json:"backToSpot"`
	// NodesLaunched counts node launch requests that succeeded.
	NodesLaunched int `json:"nodesLaunched"`
	// SpotStockOuts counts spot node requests accepted by a cloud that
	// reports stock-outs late, and failed (see spotCapacity.stockOutDelay).
	SpotStockOuts int `json:"spotStockOuts,omitempty"`
	// Series holds the state every 10 simulated minutes, for the charts.
	Series []Sample `json:"series"`
	// Preemptions lists every preemption notice.
	Preemptions []Mark `json:"preemptions"`
}

// BackToSpot is the "time back to spot after a shortage": an episode opens
// when a zone has both spot capacity to spare and spot-eligible pods on its
// on-demand nodes, and closes when no zone has both.
type BackToSpot struct {
	Episodes    int     `json:"episodes"`
	MeanMinutes float64 `json:"meanMinutes"`
	MaxMinutes  float64 `json:"maxMinutes"`
	// OpenAtEnd is true when an episode was still open when the run ended (it
	// is counted with its length so far).
	OpenAtEnd bool `json:"openAtEnd"`
}

// Sample is the state at one time.
type Sample struct {
	// Hours since the start.
	Hours         float64 `json:"hours"`
	Cost          float64 `json:"cost"`
	SpotShare     float64 `json:"spotShare"`
	Pending       int     `json:"pending"`
	SpotNodes     int     `json:"spotNodes"`
	OnDemandNodes int     `json:"onDemandNodes"`
	// Capacity is each zone's spot capacity (market), in scenario order.
	Capacity []int `json:"capacity"`
}

// Mark is a preemption notice.
type Mark struct {
	Hours float64 `json:"hours"`
	Zone  string  `json:"zone"`
	Node  string  `json:"node"`
	Pods  int     `json:"pods"`
}

// Report is a simulation's outcome: one Result per strategy and the baseline.
type Report struct {
	Scenario    string   `json:"scenario"`
	Description string   `json:"description,omitempty"`
	Seed        int32    `json:"seed"`
	Start       string   `json:"start"`
	Days        float64  `json:"days"`
	Step        string   `json:"step"`
	Currency    string   `json:"currency"`
	Zones       []string `json:"zones"`
	// Traces names the traces the markets replay.
	Traces []string `json:"traces,omitempty"`
	// PricedZones are the zones whose spot price follows the prices of their
	// trace (docs/simulate.md, Traces).
	PricedZones []string `json:"pricedZones,omitempty"`
	// Warnings are what the scenario's input had that the simulator ignored
	// (Scenario.Warnings).
	Warnings []string `json:"warnings,omitempty"`
	// Baseline is the all-on-demand run.
	Baseline Result   `json:"baseline"`
	Results  []Result `json:"results"`
	// Packing is the hindsight packing heuristic (package hindsight): every pod the
	// workloads want packed on the cheapest capacity of each moment, an
	// achievable cost.
	Packing *Result `json:"packing,omitempty"`
	// Bound is the lower bound (package hindsight): the cheapest fractional capacity
	// that holds those pods at each moment, which no run can pay less than
	// while it runs them all.
	Bound *Result `json:"bound,omitempty"`
	// Elapsed is the wall-clock time the simulation took (not in the golden
	// summary: it varies).
	Elapsed time.Duration `json:"elapsedNanoseconds"`
}
