package cli

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"spotter.dev/spotter/internal/cloud"
	"spotter.dev/spotter/internal/cloud/providers"
	"spotter.dev/spotter/internal/plan"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// clusterCloud is what the configured cloud provider says about a
// cluster's nodes: the instance behind each, and prices by instance type
// and place. spotter plan and spotter simulate --from-cluster both read it
// with readCloud.
type clusterCloud struct {
	// provider is cfg.Cloud.Provider ("" or kubernetes and kwok: none asked).
	provider string
	// instances are the provider's instances, by node name; nil when it was
	// not asked or could not answer.
	instances map[string]cloud.Instance
	// reader prices instance types; nil when the provider reads no prices
	// (clusterapi) or could not answer.
	reader  cloud.PriceReader
	pricing v1alpha1.PricingConfig
}

// readCloud asks the configured provider (aws, gcp, azure or clusterapi)
// about nodes: their instances, then the current prices of every instance
// type among them (RefreshPrices, batched and cached by the provider), then
// the instances again (from the provider's cache) with those prices. A
// provider that cannot answer is a warning on errOut: the caller goes on
// with configured prices only.
func readCloud(ctx context.Context, cfg *v1alpha1.SpotterConfiguration, rc *rest.Config, client kubernetes.Interface, nodes []*corev1.Node,
	errOut io.Writer) *clusterCloud {
	c := &clusterCloud{provider: string(cfg.Cloud.Provider), pricing: cfg.Pricing}
	p, isCloud, err := providers.Cloud(ctx, cfg, rc, client, clock.RealClock{})
	if !isCloud {
		c.provider = ""
		return c
	}
	if err == nil {
		c.instances, err = p.Instances(ctx, nodes)
	}
	if err != nil {
		fmt.Fprintf(errOut, "warning: cloud provider %s: %v; going on without node groups and with configured prices only\n", cfg.Cloud.Provider, err)
		c.instances = nil
		return c
	}
	warnLeftOut(ctx, p, cfg.Cloud.Provider, errOut)
	reader, ok := p.(cloud.PriceReader)
	if !ok {
		return c
	}
	types := map[string]bool{}
	for _, n := range nodes {
		if t := c.instanceType(n); t != "" {
			types[t] = true
		}
	}
	if err := reader.RefreshPrices(ctx, slices.Sorted(maps.Keys(types))); err != nil {
		fmt.Fprintf(errOut, "warning: cloud provider %s: reading prices: %v; prices it read before, and configured ones, only\n", cfg.Cloud.Provider, err)
	}
	// Known instances are cached: this asks the cloud nothing more.
	if instances, err := p.Instances(ctx, nodes); err == nil {
		c.instances = instances
	}
	c.reader = reader
	return c
}

// warnLeftOut reads the node groups of a provider that leaves out those it
// cannot read or use (cloud.LeftOutReporter), and warns of each, as the
// migrator's Event SpotterNodeGroupLeftOut does.
func warnLeftOut(ctx context.Context, p cloud.Provider, provider v1alpha1.CloudProvider, errOut io.Writer) {
	r, ok := p.(cloud.LeftOutReporter)
	if !ok {
		return
	}
	if _, err := p.NodeGroups(ctx); err != nil {
		fmt.Fprintf(errOut, "warning: cloud provider %s: listing node groups: %v\n", provider, err)
		return
	}
	for _, l := range r.LeftOut() {
		fmt.Fprintf(errOut, "warning: cloud provider %s: node group %s left out: %v\n", provider, l.Group, l.Err)
	}
}

// instanceType is the instance type of node: its instance's, else its
// node.kubernetes.io/instance-type label.
func (c *clusterCloud) instanceType(node *corev1.Node) string {
	if inst, ok := c.instances[node.Name]; ok && inst.InstanceType != "" {
		return inst.InstanceType
	}
	return node.Labels[plan.InstanceTypeLabel]
}

// price is the hourly price of node's instance type where node runs, spot
// or on-demand (not necessarily what the node is): the provider's, which
// counts pricing.instanceTypes first, where it reads prices; else
// pricing.instanceTypes.
func (c *clusterCloud) price(node *corev1.Node, spot bool) (float64, bool) {
	typ := c.instanceType(node)
	if c.reader != nil {
		inst := c.instances[node.Name]
		region, zone := inst.Region, inst.Zone
		if region == "" {
			region = node.Labels[corev1.LabelTopologyRegion]
		}
		if zone == "" {
			zone = node.Labels[corev1.LabelTopologyZone]
		}
		if p, ok := c.reader.InstanceTypePrice(typ, region, zone, spot); ok {
			return p, true
		}
	}
	conf, ok := c.pricing.InstanceTypes[typ]
	if spot {
		return conf.Spot, ok && conf.Spot > 0
	}
	return conf.OnDemand, ok && conf.OnDemand > 0
}
