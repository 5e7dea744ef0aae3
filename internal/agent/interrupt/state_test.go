package interrupt

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"spotter.dev/spotter/internal/agent/notice"
	tu "spotter.dev/spotter/internal/testutil"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

func TestApply(t *testing.T) {
	termination := Entry{Kind: notice.Termination, Action: "terminate", Level: v1alpha1.ActionDrain}
	rebalance := Entry{Kind: notice.Rebalance, Action: "rebalance", Level: v1alpha1.ActionTaint}
	maintenance := Entry{Kind: notice.Maintenance, Action: "system-reboot", Level: v1alpha1.ActionCordon}
	otherTaint := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}

	cases := []struct {
		name        string
		node        *corev1.Node
		notices     map[string]Entry
		wasCordoned bool
		wantTaint   *corev1.Taint
		wantCordon  bool
		wantRecord  bool // annotation present
		wantCordRec bool // State.Cordoned recorded
		wantChanged bool
	}{
		{
			name: "termination: NoSchedule taint and cordon, recorded as ours", node: tu.Node("n"),
			notices:   map[string]Entry{"aws/spot": termination},
			wantTaint: &corev1.Taint{Key: TaintKey, Value: "termination", Effect: corev1.TaintEffectNoSchedule}, wantCordon: true,
			wantRecord: true, wantCordRec: true, wantChanged: true,
		},
		{
			name: "rebalance with Taint: PreferNoSchedule only", node: tu.Node("n"),
			notices:    map[string]Entry{"aws/rebalance": rebalance},
			wantTaint:  &corev1.Taint{Key: TaintKey, Value: "rebalance", Effect: corev1.TaintEffectPreferNoSchedule},
			wantRecord: true, wantChanged: true,
		},
		{
			name: "the strongest notice wins", node: tu.Node("n"),
			notices:   map[string]Entry{"aws/rebalance": rebalance, "aws/ev-1": maintenance},
			wantTaint: &corev1.Taint{Key: TaintKey, Value: "maintenance", Effect: corev1.TaintEffectNoSchedule}, wantCordon: true,
			wantRecord: true, wantCordRec: true, wantChanged: true,
		},
		{
			name: "a node cordoned by someone else is not recorded as ours", node: tu.Node("n", tu.Cordoned()),
			notices:   map[string]Entry{"aws/ev-1": maintenance},
			wantTaint: &corev1.Taint{Key: TaintKey, Value: "maintenance", Effect: corev1.TaintEffectNoSchedule}, wantCordon: true,
			wantRecord: true, wantChanged: true,
		},
		{
			name: "no notice left: our cordon lifted, taint and record removed", node: tu.Node("n", tu.Cordoned(),
				tu.Taint(TaintKey, "maintenance", corev1.TaintEffectNoSchedule), tu.Taint(otherTaint.Key, otherTaint.Value, otherTaint.Effect)),
			notices: map[string]Entry{}, wasCordoned: true, wantChanged: true,
		},
		{
			name: "no notice left: a cordon that was not ours stays", node: tu.Node("n", tu.Cordoned(),
				tu.Taint(TaintKey, "maintenance", corev1.TaintEffectNoSchedule)),
			notices: map[string]Entry{}, wantCordon: true, wantChanged: true,
		},
		{
			name: "None level: nothing on the node but the record", node: tu.Node("n"),
			notices:    map[string]Entry{"aws/rebalance": {Kind: notice.Rebalance, Level: v1alpha1.ActionNone}},
			wantRecord: true, wantChanged: true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, changed, err := apply(tc.node, State{Notices: tc.notices, Cordoned: tc.wasCordoned})
			if err != nil {
				t.Fatal(err)
			}
			if changed != tc.wantChanged {
				t.Errorf("changed %v, want %v", changed, tc.wantChanged)
			}
			var got *corev1.Taint
			for i, taint := range out.Spec.Taints {
				if taint.Key == TaintKey {
					if got != nil {
						t.Errorf("two %s taints: %v", TaintKey, out.Spec.Taints)
					}
					got = &out.Spec.Taints[i]
				}
			}
			switch {
			case tc.wantTaint == nil && got != nil:
				t.Errorf("taint %v, want none", got)
			case tc.wantTaint != nil && (got == nil || *got != *tc.wantTaint):
				t.Errorf("taint %v, want %v", got, tc.wantTaint)
			}
			for _, taint := range tc.node.Spec.Taints {
				if taint.Key != TaintKey && !hasTaint(out, taint) {
					t.Errorf("taint %v of someone else removed", taint)
				}
			}
			if out.Spec.Unschedulable != tc.wantCordon {
				t.Errorf("unschedulable %v, want %v", out.Spec.Unschedulable, tc.wantCordon)
			}
			s, err := stateOf(out)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := out.Annotations[Annotation]; ok != tc.wantRecord {
				t.Errorf("record present %v, want %v", ok, tc.wantRecord)
			}
			if tc.wantRecord && s.Cordoned != tc.wantCordRec {
				t.Errorf("recorded cordoned %v, want %v", s.Cordoned, tc.wantCordRec)
			}
			// Applying the same state again changes nothing: repeated notices are idempotent.
			if _, again, _ := apply(out, s); again {
				t.Error("a second apply of the same state changed the node")
			}
		})
	}
}

func hasTaint(n *corev1.Node, want corev1.Taint) bool {
	for _, t := range n.Spec.Taints {
		if t == want {
			return true
		}
	}
	return false
}
