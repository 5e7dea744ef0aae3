package world

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"spotter.dev/spotter/internal/agent/interrupt"
	"spotter.dev/spotter/internal/drain"
	"spotter.dev/spotter/internal/sim/report"
	"spotter.dev/spotter/internal/sim/scenario"
	"spotter.dev/spotter/internal/sim/simtest"
)

// The simulated nodes carry the taints the product puts: the agent's on a
// notice (interrupt.TaintKey, the notice's kind, NoSchedule), the drain
// engine's while draining (drain.DrainingTaintKey, the component).
func TestTaintsAreTheProducts(t *testing.T) {
	w, err := New(scenario.DefaultScenario(), 1, false)
	if err != nil {
		t.Fatal(err)
	}
	n := w.Nodes()[0]
	w.TaintNotice(n)
	w.SetDraining(n, report.ComponentAgent)
	want := []corev1.Taint{
		{Key: drain.DrainingTaintKey, Value: report.ComponentAgent, Effect: corev1.TaintEffectNoSchedule},
		{Key: interrupt.TaintKey, Value: "termination", Effect: corev1.TaintEffectNoSchedule},
	}
	for _, taint := range want {
		found := false
		for _, got := range n.Obj.Spec.Taints {
			found = found || got == taint
		}
		if !found {
			t.Errorf("node %s lacks the taint %v: %v", n.Name, taint, n.Obj.Spec.Taints)
		}
	}
	if !n.Obj.Spec.Unschedulable {
		t.Errorf("a noticed node is cordoned, as the agent does")
	}
}

// A preempted node terminates when its notice ends, on the clock: a 30 s
// notice lasts 30 s, not until the next step. A node still provisioning can
// be preempted too: it never registers, and no handler hears of it.
func TestNoticesEndOnTime(t *testing.T) {
	w := constructedWorld(t, simtest.App("web", 2, "500m", "spot-0002"))
	n := w.NodeByName("spot-0002")
	z := n.Group.zone
	z.Notice = 30 * time.Second
	var heard []string
	w.OnNotice = func(n *Node) { heard = append(heard, n.Name) }
	w.notice(n, z)
	w.Clock.Step(29 * time.Second)
	if !Alive(w, n) {
		t.Fatalf("the node ended %s before its notice did", time.Second)
	}
	w.Clock.Step(time.Second)
	if Alive(w, n) {
		t.Errorf("the node outlived its 30 s notice")
	}
	fresh, err := w.Launch(n.Group)
	if err != nil {
		t.Fatal(err)
	}
	w.notice(fresh, z)
	w.Clock.Step(time.Hour)
	w.Advance()
	if Alive(w, fresh) || fresh.Ready() {
		t.Errorf("the node preempted while provisioning is %v", fresh.state)
	}
	if len(heard) != 1 || heard[0] != "spot-0002" {
		t.Errorf("handlers heard of %v; want spot-0002 only", heard)
	}
}
