package sim

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"
)

func TestQuickRun(t *testing.T) {
	sc := DefaultScenario()
	start := time.Now()
	rep, err := Run(context.Background(), sc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("took %s", time.Since(start))
	for _, r := range append([]Result{rep.Baseline}, rep.Results...) {
		r.Series = nil
		r.Preemptions = nil
		b, _ := json.Marshal(r)
		t.Logf("%s", b)
	}
	_ = os.Stdout
}
