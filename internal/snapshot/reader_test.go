package snapshot_test

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"spotter.dev/spotter/internal/snapshot"
	"spotter.dev/spotter/internal/testenv"
	tu "spotter.dev/spotter/internal/testutil"
)

// From the manager's cache, as `spotter controller` reads it, a snapshot
// holds the cache's own objects, the same ones from one snapshot to the next
// (no list copies them), and the same as a List of the cache returns; a
// reader that is not such a cache is listed.
func TestFromReaderReadsTheCacheItself(t *testing.T) {
	env := testenv.StartAPIServer(t)
	ctx := testenv.Context(t, 2*time.Minute)
	mgr := env.StartCache(ctx, t, nil)
	_, err := env.Client.CoreV1().Nodes().Create(ctx, tu.Node("od-1", tu.OnDemand()), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"web-1", "web-2", "web-3"} {
		if _, err := env.Client.CoreV1().Pods("default").Create(ctx, tu.Pod(name, tu.OnNode("od-1"), tu.CPU("100m")), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var first *snapshot.Snapshot
	testenv.Eventually(t, 30*time.Second, "the pods and the node in a snapshot", func(ctx context.Context) (bool, string, error) {
		first, err = snapshot.FromReader(ctx, mgr.GetCache())
		if err != nil {
			return false, "", err
		}
		return len(first.Pods) == 3 && len(first.Nodes) == 1 && len(first.Namespaces) > 0, "", nil
	})
	second, err := snapshot.FromReader(ctx, mgr.GetCache())
	if err != nil {
		t.Fatal(err)
	}
	byName := func(pods []*corev1.Pod) []*corev1.Pod {
		return slices.SortedFunc(slices.Values(pods), func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	}
	p1, p2 := byName(first.Pods), byName(second.Pods)
	for i := range p1 {
		if p1[i] != p2[i] {
			t.Errorf("pod %s: two snapshots hold two objects: copies, not the cache's own", p1[i].Name)
		}
	}
	// A reader that only lists (the cache behind an interface that hides
	// its informers) gives the same objects, as copies.
	listed, err := snapshot.FromReader(ctx, listOnly{mgr.GetCache()})
	if err != nil {
		t.Fatal(err)
	}
	l := byName(listed.Pods)
	if len(l) != len(p1) {
		t.Fatalf("listed %d pods, the cache has %d", len(l), len(p1))
	}
	for i := range l {
		if l[i] == p1[i] || !reflect.DeepEqual(l[i], p1[i]) {
			t.Errorf("pod %s: listed %p %+v, from the cache %p %+v", l[i].Name, l[i], l[i], p1[i], p1[i])
		}
	}
}

type listOnly struct{ r client.Reader }

func (l listOnly) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return l.r.Get(ctx, key, obj, opts...)
}

func (l listOnly) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return l.r.List(ctx, list, opts...)
}
