package v1alpha1

import "k8s.io/utils/ptr"

// Component says whether one of Spotter's components runs under a
// configuration, and whether it only reports what it would do.
type Component struct {
	// Enabled: the component runs (for a controller: `spotter controller`
	// starts it).
	Enabled bool
	// DryRun: it logs and records Events of what it would do and changes
	// nothing (the top-level dryRun or its own).
	DryRun bool
}

// Acts reports whether the component changes the cluster: it runs and is not
// in dry run.
func (c Component) Acts() bool { return c.Enabled && !c.DryRun }

// Components is what a configuration runs. It is the one place where the
// switches are read: `spotter controller` (internal/controller.Setup) starts
// exactly these controllers with these dry-run settings, and the spotter
// strategy of `spotter simulate` runs exactly these.
type Components struct {
	// Rescheduler, Migrator, Preemptible, Labeler and SpotFirst are the
	// controllers.
	Rescheduler, Migrator, Preemptible, Labeler, SpotFirst Component
	// Agent is spotter-agent. It runs wherever its DaemonSet puts it, so it is
	// always Enabled here; the configuration says whether it acts.
	Agent Component
	// PreferSpotTaint: the labeler keeps its PreferNoSchedule taint on
	// on-demand nodes (the labeler acts and labeler.preferSpotTaint is set).
	PreferSpotTaint bool
}

// ComponentsOf reads the switches of c. A switch left unset (c not defaulted)
// counts as its default.
func ComponentsOf(c *SpotterConfiguration) Components {
	def := NewDefaults()
	on := func(b, d *bool) bool { return ptr.Deref(b, *d) }
	out := Components{
		Rescheduler: Component{Enabled: on(c.Rescheduler.Enabled, def.Rescheduler.Enabled), DryRun: c.DryRun || c.Rescheduler.DryRun},
		Migrator:    Component{Enabled: on(c.Migrator.Enabled, def.Migrator.Enabled), DryRun: c.DryRun || c.Migrator.DryRun},
		Preemptible: Component{Enabled: on(c.Preemptible.Enabled, def.Preemptible.Enabled), DryRun: c.DryRun || c.Preemptible.DryRun},
		Labeler:     Component{Enabled: on(c.Labeler.Enabled, def.Labeler.Enabled), DryRun: c.DryRun || c.Labeler.DryRun},
		SpotFirst:   Component{Enabled: on(c.SpotFirst.Enabled, def.SpotFirst.Enabled), DryRun: c.DryRun || c.SpotFirst.DryRun},
		Agent:       Component{Enabled: true, DryRun: c.DryRun || c.Agent.DryRun},
	}
	out.PreferSpotTaint = out.Labeler.Acts() && on(c.Labeler.PreferSpotTaint, def.Labeler.PreferSpotTaint)
	return out
}
