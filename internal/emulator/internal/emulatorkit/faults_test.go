package emulatorkit

import (
	"maps"
	"testing"
)

func TestFaults(t *testing.T) {
	var c Counter
	var f Faults[string]
	never := func() float64 { t.Fatal("drew without a fraction set"); return 0 }
	admit := func(class, method string, draw func() float64) string {
		throttled, err, failed := f.Admit(&c, class, method, draw)
		switch {
		case throttled && failed:
			t.Fatalf("%s: throttled and failed", method)
		case throttled:
			return "throttled"
		case failed:
			return "failed " + err
		}
		return "ok"
	}

	if got := admit("a", "m", never); got != "ok" {
		t.Errorf("no fault: %s", got)
	}
	f.ThrottleNext("a", 2)
	f.FailNext("m", "e1")
	f.FailNext("m", "e2")
	for i, want := range []string{"throttled", "throttled", "failed e1", "failed e2", "ok"} {
		if got := admit("a", "m", never); got != want {
			t.Errorf("call %d: %s, want %s", i, got, want)
		}
	}
	// A throttle of one class leaves the others alone; a queued error is
	// the method's.
	f.ThrottleNext("b", 1)
	f.FailNext("n", "e3")
	if got := admit("a", "m", never); got != "ok" {
		t.Errorf("class a with b throttled: %s", got)
	}
	if got := admit("b", "n", never); got != "throttled" {
		t.Errorf("class b: %s", got)
	}
	if got := admit("b", "n", never); got != "failed e3" {
		t.Errorf("class b after its throttle: %s", got)
	}

	// A fraction: throttled when the draw is below it.
	f.SetThrottleFraction("a", 0.5)
	draws := []float64{0.1, 0.9}
	draw := func() float64 { d := draws[0]; draws = draws[1:]; return d }
	if got := admit("a", "m", draw); got != "throttled" {
		t.Errorf("draw 0.1 at 0.5: %s", got)
	}
	if got := admit("a", "m", draw); got != "ok" {
		t.Errorf("draw 0.9 at 0.5: %s", got)
	}
	f.SetThrottleFraction("a", 0)
	if got := admit("a", "m", never); got != "ok" {
		t.Errorf("fraction off: %s", got)
	}

	want := map[string]int{"m": 10, "n": 2}
	if got := c.AllCalls(); !maps.Equal(got, want) {
		t.Errorf("calls %v, want %v", got, want)
	}
	if c.Calls("m") != 10 || c.Throttled("m") != 3 || c.Throttled("n") != 1 {
		t.Errorf("m: %d calls, %d throttled; n: %d throttled", c.Calls("m"), c.Throttled("m"), c.Throttled("n"))
	}
	c.ResetCalls()
	if got := c.AllCalls(); got == nil || len(got) != 0 || c.Throttled("m") != 0 {
		t.Errorf("after reset: %v, %d throttled", got, c.Throttled("m"))
	}
}
