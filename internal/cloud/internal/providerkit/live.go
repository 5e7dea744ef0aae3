package providerkit

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"spotter.dev/spotter/internal/cloud"
)

// LiveTemplateTTL is how long a node group's template copied from one of
// its Nodes serves before the group's Nodes are looked at again: what a new
// node of a group looks like changes with its launch template or machine
// image, rarely.
const LiveTemplateTTL = 5 * time.Minute

// LiveTemplates keeps, per node group, the group's template copied from one
// of its live Nodes (cloud.TemplateFromNode), read at most once per
// LiveTemplateTTL: a Get of the Node that served last time, and only when
// it no longer can, one read of the group's instances (which may list the
// cluster's Nodes) and a Get per Node tried. A group without a usable Node
// is remembered as such for as long.
type LiveTemplates struct {
	kube  kubernetes.Interface
	clock clock.Clock

	mu      sync.Mutex
	byGroup map[string]liveTemplate
}

type liveTemplate struct {
	node *corev1.Node // nil: the group had no usable Node
	at   time.Time
}

// NewLiveTemplates returns an empty cache that reads Nodes through kube (nil:
// never a live template).
func NewLiveTemplates(kube kubernetes.Interface, clk clock.Clock) *LiveTemplates {
	return &LiveTemplates{kube: kube, clock: clk, byGroup: map[string]liveTemplate{}}
}

// Template returns a copy of group's template taken from one of its Nodes,
// named name, or nil when the group has no Node that can serve
// (cloud.LiveCandidate) or the cache has no kube. instances reads the
// group's instances (its NodeGroup.Nodes); the running ones with a Node are
// tried in the order of their Node names. An error reading them is returned;
// the caller's own template is then no better informed.
func (l *LiveTemplates) Template(ctx context.Context, group, name string, instances func(context.Context) ([]cloud.Instance, error)) (*corev1.Node, error) {
	if l == nil || l.kube == nil {
		return nil, nil
	}
	now := l.clock.Now()
	l.mu.Lock()
	e, ok := l.byGroup[group]
	l.mu.Unlock()
	if !ok || now.Sub(e.at) >= LiveTemplateTTL {
		node, err := l.again(ctx, e.node)
		if node == nil && err == nil {
			node, err = l.read(ctx, instances)
		}
		if err != nil {
			return nil, fmt.Errorf("reading a Node of node group %s for its template: %w", group, err)
		}
		e = liveTemplate{node: node, at: now}
		l.mu.Lock()
		l.byGroup[group] = e
		l.mu.Unlock()
	}
	if e.node == nil {
		return nil, nil
	}
	return cloud.TemplateFromNode(e.node, name), nil
}

// again reads the Node that served last time, and returns it when it still
// can serve (a Node stays in its group for its life); nil when there was none,
// or it is gone or no longer a candidate.
func (l *LiveTemplates) again(ctx context.Context, last *corev1.Node) (*corev1.Node, error) {
	if last == nil {
		return nil, nil
	}
	node, err := l.kube.CoreV1().Nodes().Get(ctx, last.Name, metav1.GetOptions{})
	if err = cloud.FromAPIError(err); cloud.IsNotFound(err) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("reading Node %s: %w", last.Name, err)
	}
	if node.UID != last.UID || !cloud.LiveCandidate(node) {
		return nil, nil
	}
	return node, nil
}

// read finds a Node of the group that can serve as its template.
func (l *LiveTemplates) read(ctx context.Context, instances func(context.Context) ([]cloud.Instance, error)) (*corev1.Node, error) {
	insts, err := instances(ctx)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, i := range insts {
		if i.NodeName != "" && i.State == cloud.InstanceRunning {
			names = append(names, i.NodeName)
		}
	}
	slices.SortFunc(names, strings.Compare)
	for _, name := range slices.Compact(names) {
		node, err := l.kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err = cloud.FromAPIError(err); cloud.IsNotFound(err) {
			continue
		} else if err != nil {
			return nil, fmt.Errorf("reading Node %s: %w", name, err)
		}
		if cloud.LiveCandidate(node) {
			return node, nil
		}
	}
	return nil, nil
}
