package drain

// The outcome label of the controllers' drains_total metrics
// (spotter_rescheduler_, spotter_migrator_ and spotter_preemptible_drains_total)
// and its values: every drain counts started, then succeeded or failed, and a
// failed drain whose marks were removed (Result.RolledBack) rolled_back too.
const (
	LabelOutcome      = "outcome"
	OutcomeStarted    = "started"
	OutcomeSucceeded  = "succeeded"
	OutcomeFailed     = "failed"
	OutcomeRolledBack = "rolled_back"
)
