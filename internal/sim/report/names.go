// Package report holds what a simulation measured, the rows of its table and
// the charts of report.html: the vocabulary the world, the strategies and the
// hindsight rows share, with nothing of theirs.
package report

import "time"

// The rows of a report that are not strategies.
const (
	// Baseline is the all-on-demand run the savings are measured against:
	// the scenario without its spot groups, autoscaler only.
	Baseline = "all-on-demand"
	// Packing is the hindsight packing heuristic: an achievable cost.
	Packing = "packing"
	// Bound is the lower bound no run can pay less than.
	Bound = "bound"
)

// The components whose evictions are not a strategy's choice: the node is
// taken back anyway, or every row has them.
const (
	// ComponentAgent is the spotter agent, the evicted-by label of its
	// drains ("spotter-" and the agent's component name).
	ComponentAgent = "spotter-agent"
	// ComponentHandler is the seed rows' termination handler.
	ComponentHandler = "termination-handler"
	// ComponentAutoscaler is the cluster autoscaler's scale-down.
	ComponentAutoscaler = "cluster-autoscaler"
)

// Involuntary reports whether a component's evictions are not the
// strategy's choice: the agent's and the termination handler's (the node is
// being taken back anyway), and the autoscaler's (every row has it).
func Involuntary(by string) bool {
	return by == ComponentAgent || by == ComponentHandler || by == ComponentAutoscaler
}

// SampleEvery is the spacing of the time series in the report.
const SampleEvery = 10 * time.Minute
