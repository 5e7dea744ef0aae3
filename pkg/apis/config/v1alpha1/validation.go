package v1alpha1

import (
	"fmt"
	"math"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// cronParser reads the five-field cron expressions of Kubernetes CronJobs, and the
// @hourly / @daily / @every descriptors.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ParseSchedule parses a cron expression as Validate accepts it: valid syntax,
// and at least one run in every calendar year (see firesEveryYear).
func ParseSchedule(expr string) (cron.Schedule, error) {
	s, err := cronParser.Parse(expr)
	if err != nil {
		return nil, err
	}
	if err := firesEveryYear(s); err != nil {
		return nil, err
	}
	return s, nil
}

// firesEveryYear checks that s runs at least once in every calendar year.
//
// The cron library answers a schedule that matches no date ("0 0 30 2 *") with
// a zero time, which a controller waiting for the next run would take as a
// moment long past: it would run without pause. A schedule that fires in some
// years only ("0 0 29 2 *", once in four years) is refused too: a drain window
// or migration run years apart is a mistake, and the library looks at most five
// years ahead. Every year with a Friday the 13th, an annual date, or any
// weekday passes.
//
// Which dates exist and which weekday they fall on depends only on whether the
// year is a leap year and on the weekday of January 1st: 14 kinds of year, all
// of which occur in the 28 years from 2001 to 2028. Probing each of them makes
// the answer exact, and the same whenever it is asked.
func firesEveryYear(s cron.Schedule) error {
	for year := 2001; year <= 2028; year++ {
		start := time.Date(year, time.January, 1, 0, 0, 0, 0, time.UTC)
		next := s.Next(start.Add(-time.Second)) // a run at midnight on January 1st counts
		switch {
		case next.IsZero() && year == 2001:
			return fmt.Errorf("never fires: no date matches it (February has no 30th, April, June, September and November no 31st); " +
				"choose days of the month that exist in the month")
		case next.IsZero() || next.Year() != year:
			return fmt.Errorf("does not fire in every year (none in %d): a schedule must run at least once a year, "+
				"so a day that exists in some years only, such as February 29, or an interval over a year, is refused", year)
		}
	}
	return nil
}

// Validate returns every problem of a defaulted configuration, each with its field
// path. An empty list means the configuration is valid.
func Validate(c *SpotterConfiguration) field.ErrorList {
	var errs field.ErrorList
	if c.APIVersion != APIVersion {
		errs = append(errs, field.NotSupported(field.NewPath("apiVersion"), c.APIVersion, []string{APIVersion}))
	}
	if c.Kind != Kind {
		errs = append(errs, field.NotSupported(field.NewPath("kind"), c.Kind, []string{Kind}))
	}
	errs = append(errs, validateClassification(&c.Classification, field.NewPath("classification"))...)
	errs = append(errs, validateDrain(&c.Drain, field.NewPath("drain"))...)
	errs = append(errs, validateCloud(&c.Cloud, field.NewPath("cloud"))...)
	errs = append(errs, validateDisruption(&c.Disruption, field.NewPath("disruption"))...)
	errs = append(errs, validateRescheduler(&c.Rescheduler, field.NewPath("rescheduler"))...)
	errs = append(errs, validateMigrator(&c.Migrator, field.NewPath("migrator"))...)
	errs = append(errs, validatePreemptible(&c.Preemptible, field.NewPath("preemptible"))...)
	errs = append(errs, durationIn(field.NewPath("spotFirst", "fallbackAfter"), c.SpotFirst.FallbackAfter, time.Minute, 24*time.Hour)...)
	errs = append(errs, ValidateAgent(&c.Agent, field.NewPath("agent"))...)
	errs = append(errs, validatePricing(&c.Pricing, field.NewPath("pricing"))...)
	errs = append(errs, validatePlanner(&c.Planner, field.NewPath("planner"))...)
	errs = append(errs, validateManager(&c.Manager, field.NewPath("manager"))...)
	return errs
}

// ParseSelector reads a node selector as ClassificationConfig documents it: "key",
// "key=value" or a label selector; all three are label selector syntax.
func ParseSelector(s string) (labels.Selector, error) {
	if s == "" {
		return nil, fmt.Errorf("must not be empty")
	}
	return labels.Parse(s)
}

func validateClassification(c *ClassificationConfig, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for name, list := range map[string][]string{
		"spotSelectors":     c.SpotSelectors,
		"onDemandSelectors": c.OnDemandSelectors,
		"excludeSelectors":  c.ExcludeSelectors,
	} {
		for i, s := range list {
			if _, err := ParseSelector(s); err != nil {
				errs = append(errs, field.Invalid(p.Child(name).Index(i), s,
					fmt.Sprintf("not a label selector (use \"key\", \"key=value\" or selector syntax such as \"tier in (a,b)\"): %v", err)))
			}
		}
	}
	// The map above is unordered; keep messages in a stable order.
	sortErrors(errs)
	return errs
}

func validateCloud(c *CloudConfig, p *field.Path) field.ErrorList {
	errs := oneOf(p.Child("provider"), c.Provider, ProviderKubernetes, ProviderAWS, ProviderKwok, ProviderClusterAPI, ProviderGCP, ProviderAzure)
	errs = append(errs, intIn(p.Child("requestsPerSecond"), c.RequestsPerSecond, 1, 1000)...)
	if c.Provider == ProviderKwok && c.KwokConfigFile == "" {
		errs = append(errs, field.Required(p.Child("kwokConfigFile"), "the kwok provider needs its node groups file"))
	}
	if c.Provider == ProviderAWS && c.AWS.ClusterName == "" && len(c.AWS.AutoScalingGroups) == 0 {
		errs = append(errs, field.Required(p.Child("aws", "clusterName"),
			"the aws provider needs the cluster's name (to find its Auto Scaling groups by the cluster autoscaler's tags) or cloud.aws.autoScalingGroups"))
	}
	for i, name := range c.AWS.AutoScalingGroups {
		if strings.TrimSpace(name) == "" || len(name) > 255 {
			errs = append(errs, field.Invalid(p.Child("aws", "autoScalingGroups").Index(i), name, "an Auto Scaling group name has 1 to 255 characters"))
		}
	}
	if q := c.AWS.InterruptionQueueURL; q != "" {
		if u, err := url.Parse(q); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || strings.Count(strings.Trim(u.Path, "/"), "/") != 1 {
			errs = append(errs, field.Invalid(p.Child("aws", "interruptionQueueURL"), q,
				"an SQS queue URL, https://sqs.<region>.amazonaws.com/<account>/<queue> (aws sqs get-queue-url --queue-name <queue>)"))
		}
	}
	errs = append(errs, validateClusterAPI(&c.ClusterAPI, p.Child("clusterAPI"))...)
	errs = append(errs, validateGCP(&c.GCP, c.Provider == ProviderGCP, p.Child("gcp"))...)
	errs = append(errs, validateAzure(&c.Azure, c.Provider == ProviderAzure, p.Child("azure"))...)
	return errs
}

// validateClusterAPI checks the clusterapi provider's scope: names Kubernetes
// accepts and a selector that parses.
func validateClusterAPI(c *ClusterAPIConfig, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.ManagementKubeconfig != "" && strings.TrimSpace(c.ManagementKubeconfig) == "" {
		errs = append(errs, field.Invalid(p.Child("managementKubeconfig"), c.ManagementKubeconfig,
			"a path to the management cluster's kubeconfig, or empty for the cluster Spotter runs in"))
	}
	if c.ClusterName != "" {
		for _, msg := range validation.IsDNS1123Subdomain(c.ClusterName) {
			errs = append(errs, field.Invalid(p.Child("clusterName"), c.ClusterName, "the name of a Cluster API Cluster: "+msg))
		}
	}
	if c.Namespace != "" {
		for _, msg := range validation.IsDNS1123Label(c.Namespace) {
			errs = append(errs, field.Invalid(p.Child("namespace"), c.Namespace, "a namespace of the management cluster: "+msg))
		}
	}
	if c.LabelSelector != "" {
		if _, err := labels.Parse(c.LabelSelector); err != nil {
			errs = append(errs, field.Invalid(p.Child("labelSelector"), c.LabelSelector, "a label selector of MachineDeployments, MachineSets and MachinePools: "+err.Error()))
		}
	}
	return errs
}

// Warnings returns what is valid but probably not meant in a defaulted
// configuration: settings that can never take effect.
func Warnings(c *SpotterConfiguration) []string {
	var out []string
	if c.Migrator.Enabled != nil && *c.Migrator.Enabled && c.Cloud.Provider == ProviderKubernetes {
		if c.Migrator.Mode == MigrationDrainFirst {
			out = append(out, "migrator.enabled is true but cloud.provider is kubernetes, which has no node groups: "+
				"in DrainFirst mode the migrator drains on-demand nodes onto the spot nodes already there and deletes their Node objects, "+
				"but it cannot ask for spot capacity nor remove the machines; set cloud.provider to aws, gcp, azure or clusterapi for that")
		} else {
			out = append(out, "migrator.enabled is true but cloud.provider is kubernetes, which has no node groups: "+
				"in MakeBeforeBreak mode the migrator can never replace a node; set cloud.provider to aws, gcp, azure or clusterapi (or kwok in the lab), or migrator.mode to DrainFirst")
		}
	}
	out = append(out, preemptibleWarnings(c)...)
	return out
}

func validateDrain(c *DrainConfig, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, durationIn(p.Child("timeout"), c.Timeout, 10*time.Second, 24*time.Hour)...)
	errs = append(errs, durationIn(p.Child("maxGracePeriod"), c.MaxGracePeriod, 0, 24*time.Hour)...)
	errs = append(errs, intIn(p.Child("maxConcurrentEvictions"), c.MaxConcurrentEvictions, 1, 100)...)
	errs = append(errs, durationIn(p.Child("evictionBackoff"), c.EvictionBackoff, 100*time.Millisecond, 10*time.Minute)...)
	errs = append(errs, durationIn(p.Child("maxEvictionBackoff"), c.MaxEvictionBackoff, c.EvictionBackoff.Duration, time.Hour)...)
	errs = append(errs, oneOf(p.Child("onRestart"), c.OnRestart, RestartResume, RestartRollback)...)
	if c.ShutdownGracePeriod != nil {
		errs = append(errs, durationIn(p.Child("shutdownGracePeriod"), *c.ShutdownGracePeriod, 0, 10*time.Minute)...)
	}
	return errs
}

func validateDisruption(c *DisruptionConfig, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, intIn(p.Child("maxConcurrentDrains"), c.MaxConcurrentDrains, 1, 100)...)
	for i := range c.Windows {
		w := &c.Windows[i]
		wp := p.Child("windows").Index(i)
		errs = append(errs, schedule(wp.Child("schedule"), w.Schedule)...)
		errs = append(errs, durationIn(wp.Child("duration"), w.Duration, time.Minute, 168*time.Hour)...)
		errs = append(errs, timeZone(wp.Child("timeZone"), w.TimeZone)...)
	}
	return errs
}

func validateRescheduler(c *ReschedulerConfig, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, durationIn(p.Child("interval"), c.Interval, 10*time.Second, 24*time.Hour)...)
	if c.DrainDelay != nil {
		errs = append(errs, durationIn(p.Child("drainDelay"), *c.DrainDelay, 0, 24*time.Hour)...)
	}
	errs = append(errs, durationIn(p.Child("replacementTimeout"), c.ReplacementTimeout, 10*time.Second, 24*time.Hour)...)
	errs = append(errs, durationIn(p.Child("failureBackoff"), c.FailureBackoff, time.Second, 24*time.Hour)...)
	errs = append(errs, durationIn(p.Child("maxFailureBackoff"), c.MaxFailureBackoff, c.FailureBackoff.Duration, 7*24*time.Hour)...)
	return errs
}

func validateMigrator(c *MigratorConfig, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, schedule(p.Child("schedule"), c.Schedule)...)
	errs = append(errs, timeZone(p.Child("timeZone"), c.TimeZone)...)
	errs = append(errs, oneOf(p.Child("mode"), c.Mode, MigrationMakeBeforeBreak, MigrationDrainFirst)...)
	errs = append(errs, durationIn(p.Child("nodeReadyTimeout"), c.NodeReadyTimeout, 10*time.Second, 24*time.Hour)...)
	errs = append(errs, intIn(p.Child("maxNodesPerRun"), c.MaxNodesPerRun, 1, 1000)...)
	errs = append(errs, durationIn(p.Child("spotUnavailableBackoff"), c.SpotUnavailableBackoff, time.Second, 24*time.Hour)...)
	errs = append(errs, durationIn(p.Child("maxSpotUnavailableBackoff"), c.MaxSpotUnavailableBackoff, c.SpotUnavailableBackoff.Duration, 7*24*time.Hour)...)
	if c.SpotReadyDelay != nil {
		errs = append(errs, durationIn(p.Child("spotReadyDelay"), *c.SpotReadyDelay, 0, time.Hour)...)
	}
	if c.InterruptionCost != nil {
		errs = append(errs, durationIn(p.Child("interruptionCost"), *c.InterruptionCost, 0, 1000*time.Hour)...)
	}
	errs = append(errs, durationIn(p.Child("interruptionWindow"), c.InterruptionWindow, time.Hour, 30*24*time.Hour)...)
	errs = append(errs, intIn(p.Child("maxSpotSharePercent"), c.MaxSpotSharePercent, 1, 100)...)
	return errs
}

// ValidateAgent validates the agent section alone, as spotter-agent reads it.
func ValidateAgent(c *AgentConfig, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, oneOf(p.Child("cloud"), c.Cloud, CloudAuto, CloudAWS, CloudGCP, CloudAzure)...)
	if strings.Contains(c.MetadataEndpoint, "@") {
		// It may hold a password: say where, never what.
		errs = append(errs, field.Invalid(p.Child("metadataEndpoint"), "<redacted>",
			"must not hold credentials (user:password@) nor any '@': the metadata services take none"))
	} else if c.MetadataEndpoint != "" {
		u, err := url.Parse(c.MetadataEndpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, field.Invalid(p.Child("metadataEndpoint"), c.MetadataEndpoint,
				"must be an absolute http:// or https:// URL such as http://169.254.169.254, or empty for the cloud's default"))
		}
	}
	errs = append(errs, durationIn(p.Child("pollInterval"), c.PollInterval, 100*time.Millisecond, time.Minute)...)
	if c.TerminationPollInterval != nil {
		errs = append(errs, durationIn(p.Child("terminationPollInterval"), *c.TerminationPollInterval, 50*time.Millisecond, time.Minute)...)
	}
	errs = append(errs, durationIn(p.Child("requestTimeout"), c.RequestTimeout, 100*time.Millisecond, time.Minute)...)
	if c.DeadlineMargin != nil {
		errs = append(errs, durationIn(p.Child("deadlineMargin"), *c.DeadlineMargin, 0, time.Minute)...)
	}
	errs = append(errs, oneOf(p.Child("rebalanceAction"), c.RebalanceAction, ActionNone, ActionTaint, ActionCordon, ActionDrain)...)
	errs = append(errs, oneOf(p.Child("maintenanceAction"), c.MaintenanceAction, ActionNone, ActionTaint, ActionCordon, ActionDrain)...)
	errs = append(errs, bindAddress(p.Child("metricsBindAddress"), c.MetricsBindAddress)...)
	errs = append(errs, validateMetricsServing(p, c.MetricsBindAddress, c.MetricsAuthentication, c.MetricsCertDir)...)
	errs = append(errs, bindAddress(p.Child("healthProbeBindAddress"), c.HealthProbeBindAddress)...)
	if c.ReadinessFailureThreshold < 1 {
		errs = append(errs, field.Invalid(p.Child("readinessFailureThreshold"), c.ReadinessFailureThreshold,
			"must be at least 1: the failed reads in a row of one metadata path that make the agent not ready"))
	}
	return errs
}

func validatePricing(c *PricingConfig, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.Currency == "" {
		errs = append(errs, field.Required(p.Child("currency"), "a currency name such as USD"))
	}
	for name, price := range c.InstanceTypes {
		ip := p.Child("instanceTypes").Key(name)
		if name == "" {
			errs = append(errs, field.Invalid(ip, name, "instance type must not be empty"))
		}
		errs = append(errs, priceIn(ip.Child("onDemand"), price.OnDemand)...)
		errs = append(errs, priceIn(ip.Child("spot"), price.Spot)...)
		if price.OnDemand > 0 && price.Spot > price.OnDemand {
			errs = append(errs, field.Invalid(ip.Child("spot"), price.Spot,
				fmt.Sprintf("must not exceed the on-demand price %v", price.OnDemand)))
		}
	}
	sortErrors(errs)
	return errs
}

func validatePlanner(c *PlannerConfig, p *field.Path) field.ErrorList {
	min := c.Consolidation.MinHourlySavingPerEviction
	mp := p.Child("consolidation", "minHourlySavingPerEviction")
	if min != nil && (*min < 0 || *min > 1000 || math.IsNaN(*min)) {
		return field.ErrorList{field.Invalid(mp, *min, "must be a price per hour from 0 to 1000, in the pricing currency, such as 0.005")}
	}
	return nil
}

func validateManager(c *ManagerConfig, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, bindAddress(p.Child("metricsBindAddress"), c.MetricsBindAddress)...)
	errs = append(errs, bindAddress(p.Child("healthProbeBindAddress"), c.HealthProbeBindAddress)...)
	errs = append(errs, validateMetricsServing(p, c.MetricsBindAddress, c.MetricsAuthentication, c.MetricsCertDir)...)
	le := &c.LeaderElection
	lp := p.Child("leaderElection")
	for _, msg := range validation.IsDNS1123Subdomain(le.LeaseName) {
		errs = append(errs, field.Invalid(lp.Child("leaseName"), le.LeaseName, msg))
	}
	if le.LeaseNamespace != "" {
		for _, msg := range validation.IsDNS1123Label(le.LeaseNamespace) {
			errs = append(errs, field.Invalid(lp.Child("leaseNamespace"), le.LeaseNamespace, msg))
		}
	}
	errs = append(errs, durationIn(lp.Child("retryPeriod"), le.RetryPeriod, 100*time.Millisecond, time.Minute)...)
	errs = append(errs, durationIn(lp.Child("renewDeadline"), le.RenewDeadline, le.RetryPeriod.Duration+time.Nanosecond, 5*time.Minute)...)
	errs = append(errs, durationIn(lp.Child("leaseDuration"), le.LeaseDuration, le.RenewDeadline.Duration+time.Nanosecond, 10*time.Minute)...)
	return errs
}

func durationIn(p *field.Path, d metav1.Duration, lo, hi time.Duration) field.ErrorList {
	if d.Duration < lo || d.Duration > hi {
		return field.ErrorList{field.Invalid(p, d.Duration.String(),
			fmt.Sprintf("must be between %s and %s", roundDuration(lo), hi))}
	}
	return nil
}

// roundDuration prints a bound computed as "above X" (X+1ns) as X.
func roundDuration(d time.Duration) time.Duration {
	if d%time.Millisecond == time.Nanosecond {
		return d - time.Nanosecond
	}
	return d
}

func intIn(p *field.Path, v, lo, hi int32) field.ErrorList {
	if v < lo || v > hi {
		return field.ErrorList{field.Invalid(p, v, fmt.Sprintf("must be between %d and %d", lo, hi))}
	}
	return nil
}

func priceIn(p *field.Path, v float64) field.ErrorList {
	if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return field.ErrorList{field.Invalid(p, v, "must be a price per hour of 0 or more")}
	}
	return nil
}

func oneOf[T ~string](p *field.Path, v T, allowed ...T) field.ErrorList {
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	names := make([]string, len(allowed))
	for i, a := range allowed {
		names[i] = string(a)
	}
	return field.ErrorList{field.NotSupported(p, v, names)}
}

func schedule(p *field.Path, expr string) field.ErrorList {
	s, err := cronParser.Parse(expr)
	if err != nil {
		return field.ErrorList{field.Invalid(p, expr,
			fmt.Sprintf("not a cron schedule (five fields \"minute hour day-of-month month day-of-week\", e.g. \"0 * * * *\", or @hourly/@daily/@weekly): %v", err))}
	}
	if err := firesEveryYear(s); err != nil {
		return field.ErrorList{field.Invalid(p, expr, err.Error())}
	}
	return nil
}

func timeZone(p *field.Path, tz string) field.ErrorList {
	if _, err := time.LoadLocation(tz); err != nil || tz == "" {
		return field.ErrorList{field.Invalid(p, tz, "not an IANA time zone name such as UTC or Europe/Berlin")}
	}
	return nil
}

func bindAddress(p *field.Path, addr string) field.ErrorList {
	if addr == "0" {
		return nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err == nil {
		var n int
		n, err = strconv.Atoi(port)
		if err == nil && (n < 0 || n > 65535) {
			err = fmt.Errorf("port out of range")
		}
	}
	if err != nil {
		return field.ErrorList{field.Invalid(p, addr, "must be host:port (such as :8080 or 127.0.0.1:8080), or \"0\" to turn it off")}
	}
	return nil
}
