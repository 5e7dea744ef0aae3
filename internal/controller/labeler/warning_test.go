package labeler

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"spotter.dev/spotter/internal/classify"
	tu "spotter.dev/spotter/internal/testutil"
)

// logLine is one call to a logger: Error or Info, its message and values.
type logLine struct {
	err  bool
	msg  string
	kvs  []any
	verb int
}

// captureSink records every log call.
type captureSink struct {
	mu    *sync.Mutex
	lines *[]logLine
	kvs   []any
}

func (s captureSink) Init(logr.RuntimeInfo)        {}
func (s captureSink) Enabled(int) bool             { return true }
func (s captureSink) WithName(string) logr.LogSink { return s }
func (s captureSink) WithValues(kvs ...any) logr.LogSink {
	s.kvs = append(append([]any{}, s.kvs...), kvs...)
	return s
}
func (s captureSink) Info(level int, msg string, kvs ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	*s.lines = append(*s.lines, logLine{msg: msg, kvs: append(append([]any{}, s.kvs...), kvs...), verb: level})
}
func (s captureSink) Error(_ error, msg string, kvs ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	*s.lines = append(*s.lines, logLine{err: true, msg: msg, kvs: append(append([]any{}, s.kvs...), kvs...)})
}

type nopRecorder struct{}

func (nopRecorder) Eventf(runtime.Object, runtime.Object, string, string, string, string, ...any) {}

// A control plane on spot is a warning, not an error (an error-level line
// carries a stack trace in production logs): one line at V(0) that starts
// with WARNING and names every such node, however many reconciles see them.
func TestControlPlaneOnSpotWarnsOnce(t *testing.T) {
	nodes := []runtime.Object{
		tu.Node("cp-b", tu.NodeLabel(classify.ControlPlaneLabel, ""), tu.Spot()),
		tu.Node("cp-a", tu.NodeLabel(classify.ControlPlaneLabel, ""), tu.Spot()),
		tu.Node("cp-ok", tu.NodeLabel(classify.ControlPlaneLabel, "")),
		tu.Node("spot-1", tu.Spot()),
	}
	client := crfake.NewClientBuilder().WithRuntimeObjects(nodes...).Build()
	var lines []logLine
	logger := logr.New(captureSink{mu: &sync.Mutex{}, lines: &lines})
	ctx := klog.NewContext(context.Background(), logger)
	c := New(client, &classify.Classifier{}, nopRecorder{}, Options{DryRun: true})
	for range 3 {
		for _, name := range []string{"cp-b", "cp-a", "cp-ok", "spot-1"} {
			if _, err := c.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: name}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	var warnings []string
	for _, l := range lines {
		text := fmt.Sprint(l.msg, l.kvs)
		if l.err {
			t.Errorf("logged at error level: %s", text)
		}
		if strings.Contains(strings.ToLower(text), "control-plane") || strings.Contains(strings.ToLower(text), "control plane") {
			if !strings.HasPrefix(l.msg, "WARNING") || l.verb != 0 {
				t.Errorf("control plane on spot said as %q at V(%d), want a WARNING at V(0)", l.msg, l.verb)
			}
			warnings = append(warnings, text)
		}
	}
	if len(warnings) != 1 {
		t.Fatalf("%d lines about the control plane on spot, want 1: %q", len(warnings), warnings)
	}
	if !strings.Contains(warnings[0], "[cp-a cp-b]") || strings.Contains(warnings[0], "cp-ok") {
		t.Errorf("the warning %q should name cp-a and cp-b, in order, and no other node", warnings[0])
	}
}
