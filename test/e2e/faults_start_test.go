package e2e

import (
	"os"
	"strings"
	"testing"
	"time"

	"spotter.dev/spotter/internal/testenv"
)

// An apiserver that fails requests while spotter controller starts: its
// first requests (discovery of the Node kind, among them) answered 500, and
// a share of every read after them. The controller asks again with backoff
// instead of ending, then drains od-1 as in the other fault tests: every
// drain completes or rolls back, no node is left marked, no budget broken,
// no tight retry loop.
func TestFaultAtStart(t *testing.T) {
	env := startFaultLab(t, 1)
	proxy := env.StartFaultProxy(faultSeed)
	budgets := watchBudgets(t, env)
	proxy.FailNext(testenv.InternalError, testenv.InternalError, testenv.InternalError, testenv.InternalError)
	proxy.SetFaults(testenv.Faults{InternalError: 0.2, Verbs: []string{"get", "list"}})
	ctrl := startFaultController(t, env, proxy.Kubeconfig, "controller", "")

	waitAllOnSpot(t, env, 3*time.Minute)
	assertNoMarks(t, env)
	proxy.SetFaults(testenv.Faults{})
	budgets.check(t)
	proxy.AssertRate(t, testenv.AllVerbs, maxRequestsPerSecond)
	log, err := os.ReadFile(ctrl.Log)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), "Asking the apiserver again") {
		t.Error("the controller never retried a failed request at start: the test proves nothing")
	}
	logDrains(t, ctrl)
}
