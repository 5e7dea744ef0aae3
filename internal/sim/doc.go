// Package sim is Spotter's simulator (`spotter simulate`): it runs each
// strategy (package strategy) in a world of its own (package world) built
// from a scenario (package scenario), on spot markets replayed from real
// traces (package market), all with the same seed, beside the all-on-demand
// baseline and the hindsight rows (package hindsight), and reports what each
// cost and disrupted (package report). It also runs the out-of-sample matrix
// and builds scenarios from a live cluster (--from-cluster). See
// docs/simulate.md.
package sim
