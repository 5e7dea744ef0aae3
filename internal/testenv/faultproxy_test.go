package testenv_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"spotter.dev/spotter/internal/testenv"
)

// The proxy's faults as a client-go client sees them, its counts, and an
// apiserver restart behind it.
func TestFaultProxy(t *testing.T) {
	env := testenv.StartAPIServer(t)
	ctx := testenv.Context(t, 3*time.Minute)
	proxy := env.StartFaultProxy(1)
	cfg, err := clientcmd.BuildConfigFromFlags("", proxy.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = -1, 0 // no client-side limit: the proxy counts what is sent
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	get := func() error {
		_, err := client.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
		return err
	}
	if err := get(); err != nil {
		t.Fatalf("through the proxy, without faults: %v", err)
	}

	// client-go waits out a 429's Retry-After and tries again.
	proxy.SetFaults(testenv.Faults{RetryAfter: time.Second})
	proxy.FailNext(testenv.TooManyRequests)
	start := time.Now()
	if err := get(); err != nil {
		t.Errorf("after a 429 with Retry-After: %v, want client-go's retry to succeed", err)
	}
	if waited := time.Since(start); waited < 900*time.Millisecond {
		t.Errorf("the retry came %s after the 429, before its Retry-After of 1s", waited)
	}
	proxy.FailNext(testenv.InternalError)
	if err := get(); !apierrors.IsInternalError(err) {
		t.Errorf("injected 500: got %v", err)
	}
	proxy.SetFaults(testenv.Faults{Hold: 1, HoldFor: 200 * time.Millisecond})
	if err := get(); !apierrors.IsTimeout(err) {
		t.Errorf("held request: got %v, want a 504 Timeout", err)
	}
	// Verbs limit the draws.
	proxy.SetFaults(testenv.Faults{InternalError: 1, Verbs: []string{"create"}})
	if err := get(); err != nil {
		t.Errorf("a get with faults on creates only: %v", err)
	}
	_, err = client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
	if !apierrors.IsInternalError(err) {
		t.Errorf("a create with faults on creates: got %v", err)
	}
	proxy.SetFaults(testenv.Faults{})
	got := proxy.Injected()
	if got[testenv.TooManyRequests] != 1 || got[testenv.InternalError] != 2 || got[testenv.Hold] != 1 {
		t.Errorf("injected %v", got)
	}

	// A fault scheduled on a request meets that request, not the ones before
	// it, whatever the draws say.
	proxy.FailNextOn("update configmaps", testenv.Unavailable)
	if err := get(); err != nil {
		t.Errorf("a get with a fault scheduled on updates: %v", err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "y"}}
	if _, err := env.Client.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// (client-go retries a 503 with Retry-After.)
	if _, err := client.CoreV1().ConfigMaps("default").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Errorf("update with a 503 scheduled: %v, want client-go's retry to succeed", err)
	}
	if on := proxy.InjectedOn(); on["update configmaps"] != 1 || on["get namespaces"] != 3 || on["create configmaps"] != 1 || len(on) != 3 {
		t.Errorf("injected by request %v, want 1 on update configmaps, 3 on get namespaces and 1 on create configmaps", on)
	}

	// A cut watch ends with an error, not a clean end.
	proxy.SetFaults(testenv.Faults{WatchLifetime: 500 * time.Millisecond})
	w, err := client.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	for range w.ResultChan() {
	}
	if d := time.Since(began); d < 400*time.Millisecond || d > 10*time.Second {
		t.Errorf("the watch ended after %s, want about 500ms", d)
	}
	proxy.SetFaults(testenv.Faults{})
	if proxy.Injected()[testenv.CutWatch] != 1 || proxy.InjectedOn()["watch configmaps"] != 1 {
		t.Errorf("injected %v (by request %v), want one cut watch of configmaps", proxy.Injected(), proxy.InjectedOn())
	}

	// Rates: 20 gets at once are 20 within one second.
	proxy.ResetRates()
	for range 20 {
		if err := get(); err != nil {
			t.Fatal(err)
		}
	}
	if r := proxy.Rates()["get"]; r.Total != 20 || r.Peak != 20 {
		t.Errorf("rates %+v, want 20 gets, 20 in one second", r)
	}
	if r := proxy.Rates()[testenv.AllVerbs]; r.Total != 20 {
		t.Errorf("all verbs %+v, want 20", r)
	}

	// A restart behind the proxy: requests fail while it is down, and pass
	// again once it is back, on the same port with the same objects.
	if _, err := env.Client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kept"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	restarted := make(chan error, 1)
	go func() { restarted <- env.RestartAPIServer(ctx, 2*time.Second) }()
	testenv.Eventually(t, 30*time.Second, "a request to fail while the apiserver is down", func(context.Context) (bool, string, error) {
		return get() != nil, "", nil
	})
	if err := <-restarted; err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the object through the proxy after the restart", func(ctx context.Context) (bool, string, error) {
		_, err := client.CoreV1().ConfigMaps("default").Get(ctx, "kept", metav1.GetOptions{})
		return err == nil, "", err
	})
}
