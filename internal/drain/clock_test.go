package drain_test

// Unit tests of the drain's timing on a fake clock: its timeout, its retry
// backoff and the deadline mode's tiers fire when the injected clock says so.
// The API server is a fake clientset whose answers the tests script (a refused
// eviction is the 429 a PodDisruptionBudget answers); TestDrain runs the same
// drain against a real API server.

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"

	"spotter.dev/spotter/internal/backoff"
	"spotter.dev/spotter/internal/drain"
	tu "spotter.dev/spotter/internal/testutil"
)

// recordingClock records the waits of the eviction retries.
type recordingClock struct {
	*testingclock.FakeClock
	mu    sync.Mutex
	waits []time.Duration
}

func (c *recordingClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	c.waits = append(c.waits, d)
	c.mu.Unlock()
	return c.FakeClock.After(d)
}

// call is one request the fake API server answered.
type call struct {
	pod   string
	at    time.Time
	grace *int64
}

// apiServer is a fake clientset holding nodes and pods, on which evicting a
// pod in refuse answers 429 and any other eviction deletes the pod, as the
// API server does once the pod has terminated. It records evictions and
// deletes with the clock's time.
type apiServer struct {
	*k8sfake.Clientset
	mu        sync.Mutex
	evictions []call
	deletes   []call
}

func newAPIServer(clk *testingclock.FakeClock, refuse map[string]bool, objs ...runtime.Object) *apiServer {
	s := &apiServer{Clientset: k8sfake.NewClientset(objs...)}
	s.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		name := a.(k8stesting.CreateAction).GetObject().(metav1.Object).GetName()
		key := a.GetNamespace() + "/" + name
		s.mu.Lock()
		s.evictions = append(s.evictions, call{pod: key, at: clk.Now()})
		s.mu.Unlock()
		if refuse[key] {
			return true, nil, apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
		}
		return true, nil, s.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), a.GetNamespace(), name)
	})
	s.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		d := a.(k8stesting.DeleteActionImpl)
		s.mu.Lock()
		s.deletes = append(s.deletes, call{pod: d.GetNamespace() + "/" + d.GetName(), at: clk.Now(), grace: d.DeleteOptions.GracePeriodSeconds})
		s.mu.Unlock()
		return false, nil, nil
	})
	return s
}

func (s *apiServer) calls() (evictions, deletes []call) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]call(nil), s.evictions...), append([]call(nil), s.deletes...)
}

// drive steps clk a second at a time whenever the drain waits on it (parked
// waiters) until done is closed, and returns the clock's time then. It fails
// the test if the clock passes limit first.
func drive(t *testing.T, clk *testingclock.FakeClock, done <-chan struct{}, parked int, limit time.Time) time.Time {
	t.Helper()
	stuck := time.Now()
	for {
		select {
		case <-done:
			return clk.Now()
		default:
		}
		if clk.Waiters() != parked {
			if time.Since(stuck) > 10*time.Second {
				t.Fatalf("the drain neither ends nor waits on the clock (%d waiters, want %d)", clk.Waiters(), parked)
			}
			time.Sleep(time.Millisecond)
			continue
		}
		if !clk.Now().Before(limit) {
			t.Fatalf("the drain still runs at %s", clk.Now())
		}
		clk.Step(time.Second)
		stuck = time.Now()
	}
}

func pod(namespace, name, node string, opts ...tu.PodOption) *corev1.Pod {
	p := tu.Pod(name, append([]tu.PodOption{tu.InNamespace(namespace), tu.WithUID(), tu.OnNode(node), tu.OwnedBy("ReplicaSet", name)}, opts...)...)
	p.Status = tu.RunningReady()
	return p
}

// A drain whose pod a PodDisruptionBudget keeps ends when the injected clock
// reaches its timeout, not before and not by the wall clock, and is rolled
// back. Meanwhile the refused eviction is retried with a backoff that doubles
// from Backoff, never waits longer than MaxBackoff nor less than half of it.
func TestTimeoutOnTheClock(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := &recordingClock{FakeClock: testingclock.NewFakeClock(start)}
	api := newAPIServer(clk.FakeClock, map[string]bool{"shop/db": true}, tu.Node("n1"), pod("shop", "db", "n1"))
	d := drain.New(api, clk, nil, drain.Options{Component: "rescheduler", Cordon: true, Timeout: 10 * time.Minute,
		Backoff: time.Second, MaxBackoff: 8 * time.Second})

	var res *drain.Result
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		res, err = d.Drain(context.Background(), drain.Request{Node: "n1", Reason: "test"})
	}()
	// Waiting: the drain's timeout and the next retry.
	end := drive(t, clk.FakeClock, done, 2, start.Add(11*time.Minute))

	if end.Before(start.Add(10 * time.Minute)) {
		t.Fatalf("the drain ended at %s, before its timeout of 10m on the clock (%v)", end.Sub(start), err)
	}
	if err == nil || !strings.Contains(err.Error(), "timed out") || !strings.Contains(err.Error(), "blocked by shop/db") || !res.RolledBack {
		t.Errorf("got %v (%+v), want a timeout blocked by shop/db, rolled back", err, res)
	}
	node, gerr := api.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
	if gerr != nil {
		t.Fatal(gerr)
	}
	if _, marked, _ := drain.MarkOf(node); marked || node.Spec.Unschedulable {
		t.Errorf("rollback left marks: %v, unschedulable %v", node.Annotations, node.Spec.Unschedulable)
	}

	evictions, _ := api.calls()
	clk.mu.Lock()
	waits := clk.waits
	clk.mu.Unlock()
	// A retry every 8s at most, over ten minutes.
	if len(evictions) < 75 {
		t.Errorf("%d eviction attempts in 10m, want one at least every 8s", len(evictions))
	}
	for i, w := range waits {
		longest := backoff.Delay(time.Second, 8*time.Second, i+1)
		if w > longest || w < longest/2 {
			t.Fatalf("wait %d before a retry is %s, want within [%s, %s]", i+1, w, longest/2, longest)
		}
	}
}

// In deadline mode, ordinary pods go first with two thirds of the time; a pod
// a PodDisruptionBudget keeps is deleted once half of its tier's time is spent,
// with its grace period capped by what is left of the tier; critical pods go
// after. Every step is taken on the injected clock.
func TestDeadlineTiersOnTheClock(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := testingclock.NewFakeClock(start)
	api := newAPIServer(clk, map[string]bool{"shop/db": true}, tu.Node("n1"),
		pod("shop", "db", "n1", tu.GracePeriod(120)),
		pod("kube-system", "dns", "n1", func(p *corev1.Pod) { p.Spec.PriorityClassName = "system-cluster-critical" }))
	d := drain.New(api, clk, nil, drain.Options{Component: "agent", Cordon: true})

	var res *drain.Result
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		res, err = d.Drain(context.Background(), drain.Request{Node: "n1", Reason: "preempted", Deadline: start.Add(90 * time.Second), KeepMarks: true})
	}()
	// Waiting: the drain's deadline, the ordinary tier's end, the end of its
	// evictions and the next retry.
	end := drive(t, clk, done, 4, start.Add(90*time.Second))
	if err != nil {
		t.Fatalf("drain: %v (%+v)", err, res)
	}
	if strings.Join(res.Deleted, ",") != "shop/db" || strings.Join(res.Evicted, ",") != "kube-system/dns" {
		t.Errorf("deleted %v and evicted %v, want shop/db deleted and kube-system/dns evicted", res.Deleted, res.Evicted)
	}
	evictions, deletes := api.calls()
	// The ordinary tier has 60s; evictions until 30s, then the delete, with
	// the 30s left of the tier as grace period.
	if len(deletes) != 1 || !deletes[0].at.Equal(start.Add(30*time.Second)) || deletes[0].grace == nil || *deletes[0].grace != 30 {
		t.Fatalf("deletes %+v, want shop/db deleted at 30s with a grace period of 30s", deletes)
	}
	var dbTries int
	for _, e := range evictions {
		switch e.pod {
		case "shop/db":
			dbTries++
			if e.at.After(deletes[0].at) {
				t.Errorf("shop/db evicted at %s, after it was deleted", e.at.Sub(start))
			}
		case "kube-system/dns":
			if e.at.Before(deletes[0].at) {
				t.Errorf("the critical pod was evicted at %s, before the ordinary tier ended", e.at.Sub(start))
			}
		}
	}
	// Retries from 200ms, doubling up to 2s (jittered over the upper half):
	// at least one every 2s of the clock, fewer than one a step of 1s.
	if dbTries < 15 || dbTries > 25 {
		t.Errorf("shop/db's eviction was tried %d times in 30s, want 15 to 25: retries backing off to 2s", dbTries)
	}
	if end.After(start.Add(31 * time.Second)) {
		t.Errorf("the drain ended at %s, want as soon as both pods were gone (30s)", end.Sub(start))
	}
}

// A drain whose context ends before it tried every pod fails and is rolled
// back: it used to report success, leaving the pods on the node.
func TestDrainStoppedBeforeEvictingFails(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	api := newAPIServer(clk, nil, tu.Node("n1"), pod("shop", "web", "n1"))
	d := drain.New(api, clk, nil, drain.Options{Component: "rescheduler", Cordon: true})
	// Stopped as Outlive stops a drain at shutdown.
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(drain.ErrShutdown)
	res, err := d.Drain(ctx, drain.Request{Node: "n1", Reason: "test"})
	if !errors.Is(err, drain.ErrShutdown) || !res.RolledBack || len(res.Evicted) != 0 {
		t.Fatalf("got %v (%+v), want ErrShutdown, nothing evicted, rolled back", err, res)
	}
	if strings.Count(err.Error(), drain.ErrShutdown.Error()) != 1 {
		t.Errorf("error %q should name the shutdown once", err)
	}
}
