package rescheduler

import (
	"cmp"
	"testing"
)

// compareKeys orders as the keys' strings do, without building them.
func TestCompareKeys(t *testing.T) {
	names := [][2]string{
		{"", "a"}, {"", "a-b"}, {"", "b"},
		{"a", "x"}, {"a", "y"}, {"a-b", "x"}, {"a.b", "x"}, {"ab", "x"}, {"a", "-x"}, {"b", ""}, {"a", "x/"},
		{"kube-system", "coredns"}, {"kube", "system"}, {"kube-", "a"},
	}
	for _, a := range names {
		for _, b := range names {
			want := cmp.Compare(key(a[0], a[1]), key(b[0], b[1]))
			if got := compareKeys(a[0], a[1], b[0], b[1]); got != want {
				t.Errorf("%q against %q: %d, want %d", key(a[0], a[1]), key(b[0], b[1]), got, want)
			}
		}
	}
}
