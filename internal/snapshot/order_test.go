package snapshot

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CompareKeys orders as the keys' strings do, without building them.
func TestCompareKeys(t *testing.T) {
	names := [][2]string{
		{"", "a"}, {"", "a-b"}, {"", "b"},
		{"a", "x"}, {"a", "y"}, {"a-b", "x"}, {"a.b", "x"}, {"ab", "x"}, {"a", "-x"}, {"b", ""}, {"a", "x/"},
		{"kube-system", "coredns"}, {"kube", "system"}, {"kube-", "a"},
	}
	for _, a := range names {
		for _, b := range names {
			want := cmp.Compare(key(a[0], a[1]), key(b[0], b[1]))
			if got := CompareKeys(a[0], a[1], b[0], b[1]); got != want {
				t.Errorf("%q against %q: %d, want %d", key(a[0], a[1]), key(b[0], b[1]), got, want)
			}
		}
	}
}

// InListOrder sorts every kind by its storage key, as a LIST returns it.
func TestInListOrder(t *testing.T) {
	var s Snapshot
	var want []string
	for _, ns := range []string{"a", "a-b", "b"} {
		for _, name := range []string{"x", "x-1", "y"} {
			s.Pods = append(s.Pods, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
			want = append(want, key(ns, name))
		}
	}
	slices.Sort(want)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(s.Pods), func(i, j int) { s.Pods[i], s.Pods[j] = s.Pods[j], s.Pods[i] })
	s.Nodes = []*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n2"}}, {ObjectMeta: metav1.ObjectMeta{Name: "n1"}}}
	InListOrder(&s)
	var got []string
	for _, p := range s.Pods {
		got = append(got, key(p.Namespace, p.Name))
	}
	if !slices.Equal(got, want) {
		t.Errorf("pods in the order %v, want %v", got, want)
	}
	if s.Nodes[0].Name != "n1" || s.Nodes[1].Name != "n2" {
		t.Errorf("nodes in the order %s, %s", s.Nodes[0].Name, s.Nodes[1].Name)
	}
}
