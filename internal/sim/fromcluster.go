package sim

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"spotter.dev/spotter/internal/classify"
	"spotter.dev/spotter/internal/plan"
	"spotter.dev/spotter/internal/sim/scenario"
	"spotter.dev/spotter/internal/sim/world"
	"spotter.dev/spotter/internal/snapshot"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// ClusterPrices is where FromCluster takes node groups' prices from, and
// how it tells spot nodes from on-demand ones.
type ClusterPrices struct {
	// Pricing is the configuration's pricing section: the currency, and the
	// prices when Price is nil.
	Pricing v1alpha1.PricingConfig
	// Price returns the hourly price of node's instance type where node
	// runs, spot or on-demand (not necessarily what the node is), and
	// whether it is known; spotter simulate --from-cluster asks the
	// configured cloud provider, as spotter plan does, then the
	// configuration. Nil: pricing.instanceTypes only.
	Price func(node *corev1.Node, spot bool) (float64, bool)
	// Provider names the cloud provider Price asks, for the error about
	// missing prices; "" for none.
	Provider string
	// Classifier tells spot nodes from on-demand ones (the configuration's
	// selectors); nil: by well-known labels only.
	Classifier *classify.Classifier
}

// price is a node's type's price from Price, else pricing.instanceTypes.
func (c ClusterPrices) price(node *corev1.Node, spot bool) (float64, bool) {
	if c.Price != nil {
		return c.Price(node, spot)
	}
	conf, ok := c.Pricing.InstanceTypes[node.Labels[plan.InstanceTypeLabel]]
	if spot {
		return conf.Spot, ok && conf.Spot > 0
	}
	return conf.OnDemand, ok && conf.OnDemand > 0
}

// FromCluster turns a cluster snapshot into a simulation that starts from it:
//
//   - every (class, zone, instance type) of its spot and on-demand nodes
//     becomes a node group with that many initial nodes, priced by
//     prices (the cloud's price where the provider reads one, else the
//     configuration's); each on-demand group gets a spot twin in its zone
//     at the type's spot price there, when it has none and that price is
//     known, so that spot strategies have somewhere to go; a group whose
//     price neither gives is an error naming pricing.instanceTypes.<type>;
//   - the cluster's zones replay the built-in scenario's markets, in order;
//   - every Deployment (through its ReplicaSet) and StatefulSet becomes an app
//     with its current number of pods, made from one of its real pods (node
//     selectors, affinity, tolerations and spread constraints kept), with the
//     PodDisruptionBudget that selects it; its pods start Pending and the
//     first step schedules them. Pods without a controller, DaemonSet and
//     static pods are left out. There is no load cycle.
func FromCluster(s *snapshot.Snapshot, prices ClusterPrices) (*scenario.Scenario, Options, error) {
	def := scenario.DefaultScenario()
	sc := &scenario.Scenario{Name: "from-cluster", Description: "Nodes and workloads read from a cluster; spot markets of the built-in scenario.",
		Seed: def.Seed, Start: def.Start, Duration: def.Duration, Step: def.Step, Currency: prices.Pricing.Currency, Cluster: def.Cluster, Load: def.Load}
	classifier := prices.Classifier
	if classifier == nil {
		classifier = &classify.Classifier{}
	}
	type key struct{ class, zone, it string }
	counts := map[key]int32{}
	alloc := map[key]corev1.ResourceList{}
	first := map[key]*corev1.Node{} // a node of the group, where it is priced
	zoneIndex := map[string]int{}
	var missing []string
	for _, n := range s.Nodes {
		c := classifier.Classify(n).Class
		if c != classify.Spot && c != classify.OnDemand {
			continue
		}
		z := n.Labels[world.ZoneLabel]
		if z == "" {
			z = "default"
		}
		if _, ok := zoneIndex[z]; !ok {
			zoneIndex[z] = len(zoneIndex)
		}
		k := key{string(c), z, n.Labels[plan.InstanceTypeLabel]}
		counts[k]++
		alloc[k] = n.Status.Allocatable
		if first[k] == nil {
			first[k] = n
			if _, ok := prices.price(n, c == classify.Spot); !ok && !containsString(missing, k.it) {
				missing = append(missing, k.it)
			}
		}
	}
	if len(counts) == 0 {
		return nil, Options{}, fmt.Errorf("the cluster has no spot or on-demand nodes to start from")
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		fields := make([]string, len(missing))
		for i, t := range missing {
			fields[i] = "pricing.instanceTypes." + t
		}
		source := "no cloud provider that reads prices is configured (cloud.provider aws, gcp or azure)"
		if prices.Provider != "" {
			source = "the cloud provider " + prices.Provider + " gives none"
		}
		return nil, Options{}, fmt.Errorf("no price for instance type(s) %s: %s; add %s (onDemand, spot) to the configuration (--config)",
			strings.Join(missing, ", "), source, strings.Join(fields, ", "))
	}
	zones := make([]string, len(zoneIndex))
	for z, i := range zoneIndex {
		zones[i] = z
	}
	sort.Strings(zones)
	for i, z := range zones {
		m := def.Zones[i%len(def.Zones)]
		m.Name = z
		sc.Zones = append(sc.Zones, m)
	}
	keys := make([]key, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	price := map[key]float64{}
	for k, n := range first {
		price[k], _ = prices.price(n, k.class == string(classify.Spot))
	}
	for k := range counts {
		twin := key{string(classify.Spot), k.zone, k.it}
		if k.class == string(classify.OnDemand) && counts[twin] == 0 {
			if _, seen := alloc[twin]; !seen {
				p, ok := prices.price(first[k], true)
				if !ok {
					continue
				}
				alloc[twin], price[twin] = alloc[k], p
				keys = append(keys, twin)
			}
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.zone != b.zone {
			return a.zone < b.zone
		}
		if a.class != b.class {
			return a.class < b.class
		}
		return a.it < b.it
	})
	for i, k := range keys {
		rl := alloc[k]
		g := scenario.NodeGroup{Name: fmt.Sprintf("group-%d", i+1), Zone: k.zone, CapacityType: k.class, InstanceType: k.it,
			CPU: rl.Cpu().DeepCopy(), Memory: rl.Memory().DeepCopy(), Pods: int32(rl.Pods().Value()),
			PricePerHour: price[k], Max: max(counts[k]*3, 10)}
		initial := counts[k]
		g.Initial = &initial
		sc.NodeGroups = append(sc.NodeGroups, g)
	}
	scenario.SetScenarioDefaults(sc)
	if errs := scenario.ValidateScenario(sc, ""); len(errs) > 0 {
		return nil, Options{}, &scenario.InvalidScenarioError{Path: "(from the cluster)", Errors: errs}
	}

	apps := world.AppsFromPods(s)
	opts := Options{initial: func(w *world.World) { w.StartFrom(apps, s.Namespaces) }}
	if len(apps) == 0 {
		return nil, Options{}, fmt.Errorf("the cluster has no Deployment or StatefulSet pods to simulate")
	}
	return sc, opts, nil
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
