package drain

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	tu "spotter.dev/spotter/internal/testutil"
)

func TestInWaves(t *testing.T) {
	pods := []*corev1.Pod{}
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		pods = append(pods, tu.Pod(name))
	}
	show := func(waves [][]*corev1.Pod) string {
		out := ""
		for _, w := range waves {
			out += "["
			for _, p := range w {
				out += p.Name
			}
			out += "]"
		}
		return out
	}
	for _, tc := range []struct {
		waves map[string]int
		want  string
	}{
		{nil, "[abcde]"},
		{map[string]int{"default/a": 1, "default/b": 1, "default/c": 1, "default/d": 1, "default/e": 1}, "[abcde]"},
		{map[string]int{"default/a": 3, "default/b": 1, "default/c": 2, "default/d": 1}, "[bd][c][ae]"},
		// Gaps in the numbers (pods of a wave gone since the plan) close up.
		{map[string]int{"default/a": 1, "default/b": 4, "default/c": 4, "default/d": 1, "default/e": 1}, "[ade][bc]"},
		{map[string]int{"other/a": 2}, "[abcde]"},
	} {
		if got := show(inWaves(pods, tc.waves)); got != tc.want {
			t.Errorf("waves %v: got %s, want %s", tc.waves, got, tc.want)
		}
	}
	if got := inWaves(nil, map[string]int{"default/a": 1}); len(got) != 1 || len(got[0]) != 0 {
		t.Errorf("no pods: %v", fmt.Sprint(got))
	}
}
