package reference

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"spotter.dev/spotter/internal/agent/interrupt"
	"spotter.dev/spotter/internal/controller/spotfirst"
	"spotter.dev/spotter/internal/drain"
)

// The chart's admission policies name, as CEL strings, the keys the code
// writes: the agent's own taints and annotations (admission-policy.yaml), the
// spot-first gate and annotation (spot-first-policy.yaml). A key renamed in
// the code and not in a policy would have the policy refuse the agent's or
// the controller's every write; a key added to a policy and not written by
// the code would let a compromised node change it.
func TestAdmissionPoliciesNameTheKeysTheCodeWrites(t *testing.T) {
	for _, tc := range []struct {
		file, variable string
		want           []string
	}{
		{"admission-policy.yaml", "own", []string{interrupt.TaintKey, drain.DrainingTaintKey, interrupt.Annotation, drain.DrainingAnnotation}},
		{"spot-first-policy.yaml", "gate", []string{spotfirst.GateName}},
		{"spot-first-policy.yaml", "steered", []string{spotfirst.SteeredAnnotation}},
	} {
		b, err := os.ReadFile("../../charts/spotter/templates/" + tc.file)
		if err != nil {
			t.Fatal(err)
		}
		// - name: VAR
		//   expression: "['a', 'b']"  or  "'a'"
		m := regexp.MustCompile(`(?m)^  - name: ` + tc.variable + `\n    expression: "(.*)"$`).FindSubmatch(b)
		if m == nil {
			t.Errorf("%s: no variable %q", tc.file, tc.variable)
			continue
		}
		var got []string
		for _, q := range regexp.MustCompile(`'([^']*)'`).FindAllSubmatch(m[1], -1) {
			got = append(got, string(q[1]))
		}
		want := slices.Clone(tc.want)
		slices.Sort(want)
		want = slices.Compact(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s: variables.%s is %s, the code writes %s", tc.file, tc.variable, strings.Join(got, ", "), strings.Join(want, ", "))
		}
	}
}
