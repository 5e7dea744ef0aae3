package interrupt

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"spotter.dev/spotter/internal/agent/notice"
	"spotter.dev/spotter/internal/drain"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// The marks the agent keeps on its node. The taint keeps new pods off (or, for
// advisory notices, makes them prefer other nodes); the annotation records the
// notices in effect and whether the agent cordoned the node, so that a
// restarted agent, or the end of an event, undoes exactly what the agent did.
const (
	// TaintKey is the key of the taint the agent puts on a node under notice;
	// its value is the notice's kind (termination, rebalance, maintenance).
	TaintKey = "spotter.dev/interruption"
	// Annotation holds a State as JSON.
	Annotation = "spotter.dev/interruption"
)

// State is what the agent has done to its node, kept in Annotation.
type State struct {
	// Notices in effect, by key (cloud/ID).
	Notices map[string]Entry `json:"notices"`
	// Cordoned is true when the agent cordoned the node (it was schedulable).
	Cordoned bool `json:"cordoned,omitempty"`
	// BootID is the node's boot (node.status.nodeInfo.bootID) when the
	// notices were recorded. A record from an earlier boot is stale: the
	// instance survived its notices (see Handler.ClearEarlierBoot).
	BootID string `json:"bootID,omitempty"`
}

// Entry is one notice in effect.
type Entry struct {
	Kind   notice.Kind           `json:"kind"`
	Action string                `json:"action"`
	Level  v1alpha1.NoticeAction `json:"level"`
	// By is the component that handles the notice (drains the node for it):
	// the agent (Component), or the controller's interruption queue when it
	// saw the event first. Empty, in a record of an agent that did not say,
	// means the agent.
	By string `json:"by,omitempty"`
}

// handler is who handles e.
func (e Entry) handler() string {
	if e.By == "" {
		return Component
	}
	return e.By
}

// stateOf reads the agent's annotation from node.
func stateOf(node *corev1.Node) (State, error) {
	s := State{Notices: map[string]Entry{}}
	raw, ok := node.Annotations[Annotation]
	if !ok {
		return s, nil
	}
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		return State{Notices: map[string]Entry{}}, fmt.Errorf("annotation %s on node %s is not the agent's state: %w", Annotation, node.Name, err)
	}
	if s.Notices == nil {
		s.Notices = map[string]Entry{}
	}
	return s, nil
}

// TerminationOf returns the termination notice node's record holds (the
// agent's or the interruption queue's), if any: the node's instance is
// going.
func TerminationOf(node *corev1.Node) (Entry, bool) {
	s, err := stateOf(node)
	if err != nil {
		return Entry{}, false
	}
	for _, k := range slices.Sorted(maps.Keys(s.Notices)) {
		if e := s.Notices[k]; e.Kind == notice.Termination {
			return e, true
		}
	}
	return Entry{}, false
}

// CordonedByAgent reports whether the agent's record on node says the agent
// cordoned it (an unreadable record says no).
func CordonedByAgent(node *corev1.Node) bool {
	s, err := stateOf(node)
	return err == nil && s.Cordoned
}

// Marked returns a copy of node with every mark the agent puts on it for a
// termination notice, in one object: the taint TaintKey (NoSchedule), the
// cordon and the annotation Annotation (as apply makes them), and the drain's
// taint and annotation (drain.Marked, by Component, at). `spotter-agent
// --check` sends it as a server-side dry-run update, so that RBAC, the
// admission policies and the token's node claim judge the very change a
// notice makes.
func Marked(node *corev1.Node, at time.Time) (*corev1.Node, error) {
	s := State{Notices: map[string]Entry{
		"check/check": {Kind: notice.Termination, Action: "check", Level: v1alpha1.ActionDrain},
	}, BootID: node.Status.NodeInfo.BootID}
	out, _, err := apply(node, s)
	if err != nil {
		return nil, err
	}
	return drain.Marked(out, drain.Mark{By: Component, Reason: "spotter-agent --check", At: metav1.NewTime(at)})
}

// rank orders notice levels, mildest first.
var rank = map[v1alpha1.NoticeAction]int{
	v1alpha1.ActionNone:   0,
	v1alpha1.ActionTaint:  1,
	v1alpha1.ActionCordon: 2,
	v1alpha1.ActionDrain:  3,
}

// strongest returns the entry with the highest level, and its level; ties go
// to the first key in order, so that the result is stable.
func (s State) strongest() (Entry, v1alpha1.NoticeAction) {
	keys := make([]string, 0, len(s.Notices))
	for k := range s.Notices {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	best, level := Entry{}, v1alpha1.ActionNone
	for _, k := range keys {
		e := s.Notices[k]
		if rank[e.Level] > rank[level] {
			best, level = e, e.Level
		}
	}
	return best, level
}

// apply returns a copy of node as State s wants it: the taint (PreferNoSchedule
// for Taint, NoSchedule from Cordon up, none otherwise), the cordon (set when
// a notice calls for it, lifted only if the agent set it), and the annotation
// (removed when no notice is in effect). changed says whether anything differs.
func apply(node *corev1.Node, s State) (out *corev1.Node, changed bool, err error) {
	out = node.DeepCopy()
	entry, level := s.strongest()

	var want *corev1.Taint
	switch {
	case rank[level] >= rank[v1alpha1.ActionCordon]:
		want = &corev1.Taint{Key: TaintKey, Value: string(entry.Kind), Effect: corev1.TaintEffectNoSchedule}
	case level == v1alpha1.ActionTaint:
		want = &corev1.Taint{Key: TaintKey, Value: string(entry.Kind), Effect: corev1.TaintEffectPreferNoSchedule}
	}
	var taints []corev1.Taint
	for _, t := range node.Spec.Taints {
		if t.Key == TaintKey {
			if want != nil && t.Value == want.Value && t.Effect == want.Effect {
				want = nil // already there
				taints = append(taints, t)
			} else {
				changed = true
			}
			continue
		}
		taints = append(taints, t)
	}
	if want != nil {
		taints = append(taints, *want)
		changed = true
	}
	out.Spec.Taints = taints

	cordon := rank[level] >= rank[v1alpha1.ActionCordon]
	switch {
	case cordon && !node.Spec.Unschedulable:
		out.Spec.Unschedulable = true
		s.Cordoned = true
		changed = true
	case !cordon && s.Cordoned:
		if node.Spec.Unschedulable {
			out.Spec.Unschedulable = false
			changed = true
		}
		s.Cordoned = false
	}

	if len(s.Notices) == 0 {
		if _, ok := out.Annotations[Annotation]; ok {
			delete(out.Annotations, Annotation)
			changed = true
		}
		return out, changed, nil
	}
	data, err := json.Marshal(s)
	if err != nil {
		return nil, false, err
	}
	if out.Annotations[Annotation] != string(data) {
		if out.Annotations == nil {
			out.Annotations = map[string]string{}
		}
		out.Annotations[Annotation] = string(data)
		changed = true
	}
	return out, changed, nil
}
