package testenv

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"spotter.dev/spotter/internal/lab"
)

// Eventually polls cond every 100 ms until it reports done, and fails the test
// after timeout with what it was waiting for and the last status cond gave.
// An error from cond is treated as "not yet" and shown if time runs out.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func(ctx context.Context) (done bool, status string, err error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var status string
	var lastErr error
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		done, s, err := cond(ctx)
		if err == nil {
			status = s
		} else if ctx.Err() == nil {
			lastErr = err // an error caused by the deadline itself says nothing
		}
		if err == nil && done {
			return
		}
		select {
		case <-ctx.Done():
			msg := fmt.Sprintf("timed out after %s waiting for %s", timeout, what)
			if status != "" {
				msg += "; last status: " + status
			}
			if lastErr != nil {
				msg += fmt.Sprintf("; last error: %v", lastErr)
			}
			t.Fatal(msg)
		case <-tick.C:
		}
	}
}

// CreateNodes creates kwok nodes and waits until they are Ready.
func (e *Env) CreateNodes(specs ...lab.NodeSpec) {
	e.t.Helper()
	ctx := Context(e.t, time.Minute)
	if err := lab.CreateNodes(ctx, e.Client, specs...); err != nil {
		e.t.Fatal(err)
	}
	for _, s := range specs {
		e.WaitForNodeReady(s.Name, time.Minute)
	}
}

// WaitForNodeReady waits until the node reports Ready.
func (e *Env) WaitForNodeReady(name string, timeout time.Duration) {
	e.t.Helper()
	Eventually(e.t, timeout, "node "+name+" Ready", func(ctx context.Context) (bool, string, error) {
		n, err := e.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue, fmt.Sprintf("Ready=%s (%s)", c.Status, c.Reason), nil
			}
		}
		return false, "no Ready condition yet", nil
	})
}

// WaitForPodsRunning waits until exactly n pods match selector in namespace and
// all of them are Running on a node, and returns them.
func (e *Env) WaitForPodsRunning(namespace, selector string, n int, timeout time.Duration) []corev1.Pod {
	e.t.Helper()
	var pods []corev1.Pod
	Eventually(e.t, timeout, fmt.Sprintf("%d pods %q Running in %s", n, selector, namespace), func(ctx context.Context) (bool, string, error) {
		list, err := e.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, "", err
		}
		running := 0
		var status []string
		for _, p := range list.Items {
			if p.Status.Phase == corev1.PodRunning && p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
				running++
			}
			status = append(status, fmt.Sprintf("%s=%s@%s", p.Name, p.Status.Phase, p.Spec.NodeName))
		}
		pods = list.Items
		return running == n && len(list.Items) == n, fmt.Sprint(status), nil
	})
	return pods
}
