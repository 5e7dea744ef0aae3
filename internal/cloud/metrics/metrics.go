// Package metrics decorates a cloud.Provider, and the node groups it returns,
// with Prometheus metrics under spotter_cloudprovider_: calls, errors by kind
// and latency, by provider and method. The metrics are registered with
// controller-runtime's registry, served by the controller manager.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"spotter.dev/spotter/internal/cloud"
)

// Label names.
const (
	LabelProvider = "provider"
	LabelMethod   = "method"
	LabelError    = "error"
)

// Values of the error label: the kind of error, never its message.
const (
	ErrorNotFound            = "not_found"
	ErrorThrottled           = "throttled"
	ErrorCapacityUnavailable = "capacity_unavailable"
	ErrorControlPlane        = "control_plane"
	ErrorOther               = "other"
)

// Metrics of every decorated provider, under spotter_cloudprovider_.
var (
	// Calls counts calls by provider and method, failed ones included.
	Calls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "spotter", Subsystem: "cloudprovider", Name: "calls_total",
		Help: "Cloud provider calls by provider and method, failed ones included.",
	}, []string{LabelProvider, LabelMethod})
	// Errors counts failed calls by provider, method and kind of error.
	Errors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "spotter", Subsystem: "cloudprovider", Name: "errors_total",
		Help: "Failed cloud provider calls by provider, method and kind of error: not_found, throttled, capacity_unavailable, control_plane, other.",
	}, []string{LabelProvider, LabelMethod, LabelError})
	// Duration observes the latency of calls by provider and method.
	Duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "spotter", Subsystem: "cloudprovider", Name: "call_duration_seconds",
		Help:    "Latency of cloud provider calls by provider and method.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 16), // 1 ms .. ~33 s
	}, []string{LabelProvider, LabelMethod})
)

func init() {
	metrics.Registry.MustRegister(Calls, Errors, Duration)
}

// Decorate returns p with every call measured. Node groups it returns are
// decorated too; their methods are labelled "NodeGroup.<Method>". A provider
// that reads prices (cloud.PriceReader) still does, its RefreshPrices
// measured.
func Decorate(p cloud.Provider) cloud.Provider {
	d := &provider{inner: p, name: p.Name()}
	if pr, ok := p.(cloud.PriceReader); ok {
		return &priceProvider{provider: d, prices: pr}
	}
	return d
}

// priceProvider is a decorated provider that reads prices.
type priceProvider struct {
	*provider
	prices cloud.PriceReader
}

func (p *priceProvider) RefreshPrices(ctx context.Context, instanceTypes []string) (err error) {
	defer func(start time.Time) { observe(p.name, "RefreshPrices", start, err) }(time.Now())
	return p.prices.RefreshPrices(ctx, instanceTypes)
}

// InstanceTypePrice calls nothing: it passes through.
func (p *priceProvider) InstanceTypePrice(instanceType, region, zone string, spot bool) (float64, bool) {
	return p.prices.InstanceTypePrice(instanceType, region, zone, spot)
}

// observe records one call of method that started at start and ended with err.
func observe(providerName, method string, start time.Time, err error) {
	Calls.WithLabelValues(providerName, method).Inc()
	Duration.WithLabelValues(providerName, method).Observe(time.Since(start).Seconds())
	if err != nil {
		Errors.WithLabelValues(providerName, method, Kind(err)).Inc()
	}
}

// Kind returns the error label value for err.
func Kind(err error) string {
	switch {
	case cloud.IsNotFound(err):
		return ErrorNotFound
	case cloud.IsThrottled(err):
		return ErrorThrottled
	case cloud.IsCapacityUnavailable(err):
		return ErrorCapacityUnavailable
	case cloud.IsControlPlane(err):
		return ErrorControlPlane
	}
	return ErrorOther
}

type provider struct {
	inner cloud.Provider
	name  string
}

func (p *provider) Name() string { return p.name }

// LeftOut passes cloud.LeftOutReporter through (none for a provider that
// does not report): it calls nothing.
func (p *provider) LeftOut() []cloud.LeftOut {
	if r, ok := p.inner.(cloud.LeftOutReporter); ok {
		return r.LeftOut()
	}
	return nil
}

// ReplaceNode passes cloud.Replacer through, measured; a provider that is
// no Replacer answers an error wrapping errors.ErrUnsupported.
func (p *provider) ReplaceNode(ctx context.Context, node *corev1.Node) (err error) {
	r, ok := p.inner.(cloud.Replacer)
	if !ok {
		return fmt.Errorf("the %s provider cannot replace node %s: %w", p.name, node.Name, errors.ErrUnsupported)
	}
	defer func(start time.Time) { observe(p.name, "ReplaceNode", start, err) }(time.Now())
	return r.ReplaceNode(ctx, node)
}

func (p *provider) Instances(ctx context.Context, nodes []*corev1.Node) (_ map[string]cloud.Instance, err error) {
	defer func(start time.Time) { observe(p.name, "Instances", start, err) }(time.Now())
	return p.inner.Instances(ctx, nodes)
}

func (p *provider) DeleteInstance(ctx context.Context, node *corev1.Node) (err error) {
	defer func(start time.Time) { observe(p.name, "DeleteInstance", start, err) }(time.Now())
	return p.inner.DeleteInstance(ctx, node)
}

func (p *provider) NodeGroups(ctx context.Context) (_ []cloud.NodeGroup, err error) {
	defer func(start time.Time) { observe(p.name, "NodeGroups", start, err) }(time.Now())
	groups, err := p.inner.NodeGroups(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]cloud.NodeGroup, len(groups))
	for i, g := range groups {
		out[i] = &nodeGroup{NodeGroup: g, provider: p.name}
	}
	return out, nil
}

func (p *provider) NodeGroupForNode(ctx context.Context, node *corev1.Node) (_ cloud.NodeGroup, err error) {
	defer func(start time.Time) { observe(p.name, "NodeGroupForNode", start, err) }(time.Now())
	g, err := p.inner.NodeGroupForNode(ctx, node)
	if err != nil {
		return nil, err
	}
	return &nodeGroup{NodeGroup: g, provider: p.name}, nil
}

// SpotControlPlanes implements cloud.ControlPlaneChecker: it measures the
// inner provider's check, and finds nothing when the provider has none.
func (p *provider) SpotControlPlanes(ctx context.Context) (_ []*cloud.ControlPlaneError, err error) {
	c, ok := p.inner.(cloud.ControlPlaneChecker)
	if !ok {
		return nil, nil
	}
	defer func(start time.Time) { observe(p.name, "SpotControlPlanes", start, err) }(time.Now())
	return c.SpotControlPlanes(ctx)
}

// nodeGroup measures the methods of a cloud.NodeGroup that may call the
// cloud; ID, Spot, MinSize, MaxSize and PricePerHour pass through.
type nodeGroup struct {
	cloud.NodeGroup
	provider string
}

func (g *nodeGroup) TargetSize(ctx context.Context) (_ int, err error) {
	defer func(start time.Time) { observe(g.provider, "NodeGroup.TargetSize", start, err) }(time.Now())
	return g.NodeGroup.TargetSize(ctx)
}

func (g *nodeGroup) IncreaseSize(ctx context.Context, delta int) (err error) {
	defer func(start time.Time) { observe(g.provider, "NodeGroup.IncreaseSize", start, err) }(time.Now())
	return g.NodeGroup.IncreaseSize(ctx, delta)
}

func (g *nodeGroup) DecreaseTargetSize(ctx context.Context, delta int) (err error) {
	defer func(start time.Time) { observe(g.provider, "NodeGroup.DecreaseTargetSize", start, err) }(time.Now())
	return g.NodeGroup.DecreaseTargetSize(ctx, delta)
}

func (g *nodeGroup) DeleteNodes(ctx context.Context, nodes []*corev1.Node) (err error) {
	defer func(start time.Time) { observe(g.provider, "NodeGroup.DeleteNodes", start, err) }(time.Now())
	return g.NodeGroup.DeleteNodes(ctx, nodes)
}

func (g *nodeGroup) TemplateNode(ctx context.Context) (_ *corev1.Node, err error) {
	defer func(start time.Time) { observe(g.provider, "NodeGroup.TemplateNode", start, err) }(time.Now())
	return g.NodeGroup.TemplateNode(ctx)
}

func (g *nodeGroup) Nodes(ctx context.Context) (_ []cloud.Instance, err error) {
	defer func(start time.Time) { observe(g.provider, "NodeGroup.Nodes", start, err) }(time.Now())
	return g.NodeGroup.Nodes(ctx)
}
