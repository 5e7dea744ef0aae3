// Package gencluster generates a deterministic synthetic Kubernetes cluster for
// the planner's benchmarks: a YAML `kind: List` of Nodes, Pods and policy/v1
// PodDisruptionBudgets, the layout `kubectl get -o yaml` prints and
// snapshot.LoadFile reads. The command hack/gencluster writes one to a file.
//
// The output depends only on the Options: equal Options give equal bytes, on
// every platform and Go release (the random source is splitmix64, written out
// here, not math/rand). The model (nodes, workloads, placements) is small;
// the YAML is streamed object by object, never held whole (5,000 nodes with
// 150,000 pods is about 185 MB).
//
// Shape of the output, in this order:
//
//   - Nodes node-00000, node-00001, ...: round robin over the zones
//     synthetic-1a, -1b and -1c of region synthetic-1; each 8 CPU, 32Gi memory
//     and 110 pods allocatable (instance type synthetic.8x32), Ready. The
//     first OnDemandFrac of them are labelled karpenter.sh/capacity-type=on-demand,
//     the rest karpenter.sh/capacity-type=spot and tainted spot=true:NoSchedule.
//   - Pods, workload by workload: each workload is one ReplicaSet in one of 20
//     namespaces team-00..team-19, with label app=<workload>; its pods are
//     Running and Ready, owned by the ReplicaSet, with one container whose
//     requests come from a small set skewed towards small pods (100m to 2 CPU,
//     128Mi to 4Gi). Replica counts are drawn from 1 to 20. Of the workloads,
//     80% tolerate the spot taint, 15% carry required pod anti-affinity on
//     kubernetes.io/hostname, 15% a zone topology spread constraint (maxSkew 1,
//     DoNotSchedule) and 30% a PodDisruptionBudget.
//   - PodDisruptionBudgets, one per workload that has one: maxUnavailable 1 over
//     app=<workload>, status with one disruption allowed.
//
// Placement honours every constraint above (taint, anti-affinity, zone spread,
// node capacity) and aims each node at a utilisation drawn when the node is
// made, utilisation being max(CPU, memory) requests over allocatable: spot
// nodes at SpotFill ± 0.05, on-demand nodes at 20% to 90%. A fraction of the
// on-demand nodes (SpotOnlyFrac) receives only pods that tolerate the spot
// taint, so that some on-demand nodes can be drained onto spot and most cannot.
// Workloads are added until Nodes × PodsPerNode pods are placed or 50 workloads
// in a row find no room at all.
//
// For equal flags the output is byte for byte that of the gencluster tool the
// benchmarks used before this package, but for the pods' image, which names no
// registry here (the tests check it against that tool's recorded output).
package gencluster
