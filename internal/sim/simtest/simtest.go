// Package simtest holds what the simulator's tests share: small scenarios,
// written and built by hand.
package simtest

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"spotter.dev/spotter/internal/sim/scenario"
)

// Tiny is a small valid scenario; tests change one thing in it.
const Tiny = `apiVersion: spotter.dev/v1alpha1
kind: SimulationScenario
name: tiny
duration: 2h
zones:
- {name: a, spotCapacity: {trace: builtin:availability/16-node/aws-08-27-2023/us-east-2b_v100_1.json}, preemptions: {trace: builtin:preemption/4-node/aws-08-03-2023/us-east-2a_v100_1.json}}
- {name: b, spotCapacity: {nodes: 3}}
nodeGroups:
- {name: od, zone: a, capacityType: on-demand, cpu: "2", memory: 8Gi, pricePerHour: 0.1, initial: 1}
- {name: sp, zone: b, capacityType: spot, cpu: "2", memory: 8Gi, pricePerHour: 0.03}
workloads:
- {name: web, replicas: 3, cpu: 500m, memory: 1Gi, pdb: {maxUnavailable: 1}}
`

// Parse reads a scenario file's body, with relative trace paths from a
// fresh folder.
func Parse(t testing.TB, body string) (*scenario.Scenario, error) {
	t.Helper()
	return scenario.ParseScenario([]byte(body), t.TempDir())
}

// Short returns the default scenario cut to d, for tests.
func Short(t testing.TB, d time.Duration) *scenario.Scenario {
	t.Helper()
	sc := scenario.DefaultScenario()
	sc.Duration.Duration = d
	return sc
}

// PlacedApp is a workload of a constructed world and the node its pods are
// bound to ("" leaves them Pending).
type PlacedApp struct {
	scenario.Workload
	Node string
}

// ConstructedScenario is one zone with an on-demand group (one node at the
// start, od-0001) and a spot group (three nodes, spot-0002 to spot-0004) of
// 4 CPUs and 16Gi, at most 5 nodes each, the zone's spot capacity 10, and the
// given workloads (256Mi pods).
func ConstructedScenario(t testing.TB, apps ...PlacedApp) *scenario.Scenario {
	t.Helper()
	sc := &scenario.Scenario{Name: "constructed", Duration: metav1.Duration{Duration: time.Hour},
		Zones: []scenario.Zone{{Name: "z", SpotCapacity: scenario.CapacitySource{Nodes: ptr.To[int32](10)}}},
		NodeGroups: []scenario.NodeGroup{
			{Name: "od", Zone: "z", CapacityType: scenario.OnDemand, CPU: resource.MustParse("4"), Memory: resource.MustParse("16Gi"),
				PricePerHour: 0.2, Max: 5, Initial: ptr.To[int32](1)},
			{Name: "spot", Zone: "z", CapacityType: scenario.Spot, CPU: resource.MustParse("4"), Memory: resource.MustParse("16Gi"),
				PricePerHour: 0.07, Max: 5, Initial: ptr.To[int32](3)},
		}}
	for _, a := range apps {
		if a.Memory.IsZero() {
			a.Memory = resource.MustParse("256Mi")
		}
		sc.Workloads = append(sc.Workloads, a.Workload)
	}
	scenario.SetScenarioDefaults(sc)
	if errs := scenario.ValidateScenario(sc, ""); len(errs) > 0 {
		t.Fatal(errs)
	}
	return sc
}

// App is a workload of replicas pods of cpu each, bound to node ("" leaves
// them Pending).
func App(name string, replicas int32, cpu string, node string) PlacedApp {
	return PlacedApp{Workload: scenario.Workload{Name: name, Replicas: replicas, CPU: resource.MustParse(cpu)}, Node: node}
}
