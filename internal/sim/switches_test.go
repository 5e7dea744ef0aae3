package sim

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"spotter.dev/spotter/internal/sim/report"
	"spotter.dev/spotter/internal/sim/scenario"
	"spotter.dev/spotter/internal/sim/simtest"
	"spotter.dev/spotter/internal/sim/strategy"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// config writes a configuration file and loads it as `spotter simulate
// --config` does.
func config(t *testing.T, body string) *v1alpha1.SpotterConfiguration {
	t.Helper()
	file := filepath.Join(t.TempDir(), "spotter.yaml")
	if err := os.WriteFile(file, []byte("apiVersion: spotter.dev/v1alpha1\nkind: SpotterConfiguration\n"+body), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := v1alpha1.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func runWith(t *testing.T, sc *scenario.Scenario, cfg *v1alpha1.SpotterConfiguration, strategies ...string) *report.Report {
	t.Helper()
	rep, err := Run(context.Background(), sc, Options{Strategies: strategies, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// The spotter row runs what `spotter controller` would start from the same
// configuration (v1alpha1.ComponentsOf): the migrator only when
// migrator.enabled, the rescheduler only when rescheduler.enabled, the
// labeler's taint only with the labeler, and nothing that changes the cluster
// in dry run.
func TestSpotterHonoursTheSwitches(t *testing.T) {
	sc := simtest.Short(t, 36*time.Hour)
	byDefault := result(t, runWith(t, sc, nil, strategy.Spotter), strategy.Spotter)
	off := result(t, runWith(t, sc, config(t, "migrator: {enabled: false}\n"), strategy.Spotter), strategy.Spotter)
	on := result(t, runWith(t, sc, config(t, "migrator: {enabled: true}\n"), strategy.Spotter), strategy.Spotter)

	if !reflect.DeepEqual(byDefault, off) {
		t.Errorf("without --config the row differs from migrator.enabled: false, the default:\n%+v\n%+v", summaryLine(byDefault), summaryLine(off))
	}
	if off.EvictionsBy[strategy.ComponentMigrator] != 0 {
		t.Errorf("migrator disabled, yet it evicted %d pods", off.EvictionsBy[strategy.ComponentMigrator])
	}
	if on.EvictionsBy[strategy.ComponentMigrator] == 0 {
		t.Errorf("migrator enabled, yet it evicted nothing in %s", sc.Duration.Duration)
	}
	if off.Cost == on.Cost || reflect.DeepEqual(off, on) {
		t.Errorf("the migrator switched on and off gives the same row: %s", summaryLine(on))
	}

	noResched := result(t, runWith(t, sc, config(t, "rescheduler: {enabled: false}\n"), strategy.Spotter), strategy.Spotter)
	if noResched.EvictionsBy[strategy.ComponentRescheduler] != 0 || noResched.Cost == off.Cost {
		t.Errorf("rescheduler disabled: %s", summaryLine(noResched))
	}
	if off.EvictionsBy[strategy.ComponentRescheduler] == 0 {
		t.Errorf("rescheduler enabled, yet it evicted nothing: %s", summaryLine(off))
	}

	// Everything in dry run (the migrator switched on too): the spotter row is
	// the none row, figure for figure.
	for _, body := range []string{
		"dryRun: true\nmigrator: {enabled: true}\n",
		"migrator: {enabled: true, dryRun: true}\nrescheduler: {dryRun: true}\nlabeler: {dryRun: true}\nagent: {dryRun: true}\n",
	} {
		rep := runWith(t, sc, config(t, body), strategy.None, strategy.Spotter)
		none, dry := result(t, rep, strategy.None), result(t, rep, strategy.Spotter)
		dry.Strategy = none.Strategy
		if !reflect.DeepEqual(none, dry) {
			t.Errorf("%severything in dry run, yet the spotter row differs from none:\n%s\n%s", body, summaryLine(dry), summaryLine(none))
		}
	}
}

// summaryLine is one result's line of Report.Summary.
func summaryLine(r report.Result) string {
	_, line, _ := strings.Cut((&report.Report{Baseline: r}).Summary(), "\n")
	return line
}
