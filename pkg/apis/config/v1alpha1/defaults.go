package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// NewDefaults returns a configuration with every default set.
func NewDefaults() *SpotterConfiguration {
	c := &SpotterConfiguration{}
	SetDefaults(c)
	return c
}

// SetDefaults fills every unset field of c with its documented default. Fields
// already set are kept, so SetDefaults is idempotent.
func SetDefaults(c *SpotterConfiguration) {
	defaultString(&c.APIVersion, APIVersion)
	defaultString(&c.Kind, Kind)

	d := &c.Drain
	defaultDuration(&d.Timeout, 10*time.Minute)
	defaultInt(&d.MaxConcurrentEvictions, 5)
	defaultDuration(&d.EvictionBackoff, time.Second)
	defaultDuration(&d.MaxEvictionBackoff, 30*time.Second)
	if d.OnRestart == "" {
		d.OnRestart = RestartResume
	}
	defaultDurationPtr(&d.ShutdownGracePeriod, 15*time.Second)

	defaultInt(&c.Disruption.MaxConcurrentDrains, 1)
	for i := range c.Disruption.Windows {
		defaultString(&c.Disruption.Windows[i].TimeZone, "UTC")
	}

	r := &c.Rescheduler
	defaultBool(&r.Enabled, true)
	defaultDuration(&r.Interval, time.Minute)
	defaultDurationPtr(&r.DrainDelay, 5*time.Minute)
	defaultDuration(&r.ReplacementTimeout, 5*time.Minute)
	defaultDuration(&r.FailureBackoff, 10*time.Minute)
	defaultDuration(&r.MaxFailureBackoff, 6*time.Hour)

	m := &c.Migrator
	defaultBool(&m.Enabled, false)
	defaultString(&m.Schedule, "0 * * * *")
	defaultString(&m.TimeZone, "UTC")
	if m.Mode == "" {
		m.Mode = MigrationMakeBeforeBreak
	}
	defaultDuration(&m.NodeReadyTimeout, 10*time.Minute)
	defaultInt(&m.MaxNodesPerRun, 10)
	defaultDuration(&m.SpotUnavailableBackoff, 2*time.Minute)
	defaultDuration(&m.MaxSpotUnavailableBackoff, 4*time.Hour)
	defaultDurationPtr(&m.SpotReadyDelay, 30*time.Second)
	defaultDurationPtr(&m.InterruptionCost, 2*time.Hour)
	defaultDuration(&m.InterruptionWindow, 24*time.Hour)
	defaultInt(&m.MaxSpotSharePercent, 50)

	pl := &c.Planner.Consolidation
	defaultBool(&pl.Enabled, true)
	if pl.MinHourlySavingPerEviction == nil {
		pl.MinHourlySavingPerEviction = ptr.To(0.005)
	}

	pr := &c.Preemptible
	defaultBool(&pr.Enabled, false)
	if pr.NodeSelectors == nil {
		pr.NodeSelectors = []string{GKEPreemptibleSelector}
	}
	defaultDuration(&pr.MaxRunTime, 24*time.Hour)
	defaultDuration(&pr.DrainBefore, time.Hour)
	defaultDuration(&pr.ReplacementTimeout, 5*time.Minute)

	l := &c.Labeler
	defaultBool(&l.Enabled, true)
	defaultBool(&l.InterruptibleLabel, true)
	defaultBool(&l.PreferSpotTaint, true)

	sf := &c.SpotFirst
	defaultBool(&sf.Enabled, false)
	defaultDuration(&sf.FallbackAfter, 10*time.Minute)

	a := &c.Agent
	if a.Cloud == "" {
		a.Cloud = CloudAuto
	}
	defaultDuration(&a.PollInterval, time.Second)
	defaultDuration(&a.RequestTimeout, 2*time.Second)
	defaultDurationPtr(&a.DeadlineMargin, 5*time.Second)
	if a.RebalanceAction == "" {
		a.RebalanceAction = ActionTaint
	}
	if a.MaintenanceAction == "" {
		a.MaintenanceAction = ActionDrain
	}
	defaultBool(&a.AcknowledgeAzureEvents, true)
	defaultString(&a.MetricsBindAddress, ":9102")
	if a.MetricsAuthentication == "" {
		a.MetricsAuthentication = MetricsAuthKubernetes
	}
	defaultString(&a.HealthProbeBindAddress, ":9103")
	defaultInt(&a.ReadinessFailureThreshold, 3)

	if c.Cloud.Provider == "" {
		c.Cloud.Provider = ProviderKubernetes
	}
	defaultBool(&c.Cloud.ClusterAPI.ReplaceInterruptedMachines, true)
	if c.Cloud.RequestsPerSecond == 0 {
		c.Cloud.RequestsPerSecond = 10
	}
	defaultString(&c.Pricing.Currency, "USD")

	mg := &c.Manager
	defaultString(&mg.MetricsBindAddress, ":8443")
	if mg.MetricsAuthentication == "" {
		mg.MetricsAuthentication = MetricsAuthKubernetes
	}
	defaultString(&mg.HealthProbeBindAddress, ":8081")
	le := &mg.LeaderElection
	defaultBool(&le.Enabled, true)
	defaultString(&le.LeaseName, "spotter")
	defaultDuration(&le.LeaseDuration, 15*time.Second)
	defaultDuration(&le.RenewDeadline, 10*time.Second)
	defaultDuration(&le.RetryPeriod, 2*time.Second)
}

// Durations, counts and strings whose zero value means "unset": an explicit 0 is
// replaced by the default. Durations where 0 is meaningful are pointers
// (defaultDurationPtr), or have 0 as their default (Drain.MaxGracePeriod).

func defaultDuration(d *metav1.Duration, v time.Duration) {
	if d.Duration == 0 {
		d.Duration = v
	}
}

func defaultDurationPtr(d **metav1.Duration, v time.Duration) {
	if *d == nil {
		*d = &metav1.Duration{Duration: v}
	}
}

func defaultInt(i *int32, v int32) {
	if *i == 0 {
		*i = v
	}
}

func defaultString(s *string, v string) {
	if *s == "" {
		*s = v
	}
}

func defaultBool(b **bool, v bool) {
	if *b == nil {
		*b = ptr.To(v)
	}
}
