package v1alpha1

import (
	"testing"

	"k8s.io/utils/ptr"
)

func TestComponentsOf(t *testing.T) {
	on := Component{Enabled: true}
	off := Component{}
	dry := Component{Enabled: true, DryRun: true}
	for _, tc := range []struct {
		name string
		edit func(*SpotterConfiguration)
		want Components
	}{
		{"defaults: no migrator", func(*SpotterConfiguration) {},
			Components{Rescheduler: on, Migrator: off, Labeler: on, Agent: on, PreferSpotTaint: true}},
		{"migrator on", func(c *SpotterConfiguration) { c.Migrator.Enabled = ptr.To(true) },
			Components{Rescheduler: on, Migrator: on, Labeler: on, Agent: on, PreferSpotTaint: true}},
		{"rescheduler and labeler off", func(c *SpotterConfiguration) {
			c.Rescheduler.Enabled, c.Labeler.Enabled = ptr.To(false), ptr.To(false)
		}, Components{Rescheduler: off, Migrator: off, Labeler: off, Agent: on}},
		{"no prefer-spot taint", func(c *SpotterConfiguration) { c.Labeler.PreferSpotTaint = ptr.To(false) },
			Components{Rescheduler: on, Migrator: off, Labeler: on, Agent: on}},
		{"labeler dry run: no taint", func(c *SpotterConfiguration) { c.Labeler.DryRun = true },
			Components{Rescheduler: on, Migrator: off, Labeler: dry, Agent: on}},
		{"one controller dry run", func(c *SpotterConfiguration) { c.Rescheduler.DryRun = true },
			Components{Rescheduler: dry, Migrator: off, Labeler: on, Agent: on, PreferSpotTaint: true}},
		{"dryRun: everything reports", func(c *SpotterConfiguration) {
			c.DryRun, c.Migrator.Enabled, c.Preemptible.Enabled, c.SpotFirst.Enabled = true, ptr.To(true), ptr.To(true), ptr.To(true)
		}, Components{Rescheduler: dry, Migrator: dry, Preemptible: dry, Labeler: dry, SpotFirst: dry, Agent: dry}},
		{"spot-first on", func(c *SpotterConfiguration) { c.SpotFirst.Enabled = ptr.To(true) },
			Components{Rescheduler: on, Migrator: off, Labeler: on, SpotFirst: on, Agent: on, PreferSpotTaint: true}},
		{"spot-first dry run", func(c *SpotterConfiguration) { c.SpotFirst.Enabled, c.SpotFirst.DryRun = ptr.To(true), true },
			Components{Rescheduler: on, Migrator: off, Labeler: on, SpotFirst: dry, Agent: on, PreferSpotTaint: true}},
		{"agent dry run", func(c *SpotterConfiguration) { c.Agent.DryRun = true },
			Components{Rescheduler: on, Migrator: off, Labeler: on, Agent: dry, PreferSpotTaint: true}},
		{"preemptible on", func(c *SpotterConfiguration) { c.Preemptible.Enabled = ptr.To(true) },
			Components{Rescheduler: on, Migrator: off, Preemptible: on, Labeler: on, Agent: on, PreferSpotTaint: true}},
		{"preemptible dry run", func(c *SpotterConfiguration) { c.Preemptible.Enabled, c.Preemptible.DryRun = ptr.To(true), true },
			Components{Rescheduler: on, Migrator: off, Preemptible: dry, Labeler: on, Agent: on, PreferSpotTaint: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewDefaults()
			tc.edit(c)
			if got := ComponentsOf(c); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
	// Unset switches count as their defaults.
	if got, want := ComponentsOf(&SpotterConfiguration{}), ComponentsOf(NewDefaults()); got != want {
		t.Errorf("not defaulted: %+v, want %+v", got, want)
	}
	if dry.Acts() || off.Acts() || !on.Acts() {
		t.Error("Acts: only an enabled component out of dry run acts")
	}
}
