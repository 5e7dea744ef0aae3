// Package sim is Spotter's simulator (`spotter simulate`): a simulated
// Kubernetes cluster (nodes, pods, a scheduler on the planner's fit engine, a
// node-group autoscaler, spot capacity and preemptions replayed from real
// traces), driven through simulated time by a clock, in which several
// strategies for keeping workloads on spot run side by side, with the same
// world and the same seed. See docs/simulate.md.
package sim
