// Package capiinfra is the lab's Cluster API provider (infrastructure and
// control plane): it lets the real Cluster API controllers run
// MachineDeployments and MachinePools in the lab, where each Machine (each
// instance of a pool) becomes a kwok Node of the workload cluster: the lab's own apiserver, or another one when the
// management cluster is apart (Options.Kubeconfig names the workload cluster).
//
// # API
//
// Hand-written CRDs (crds/) following Cluster API's v1beta2 provider contract;
// each carries the label cluster.x-k8s.io/v1beta2=v1alpha1, from which Cluster
// API learns the contract and the API version it follows:
//
//   - LabCluster (infrastructure.lab.spotter.dev), the InfrastructureCluster.
//     The workload cluster already runs, so it is provisioned at once: the
//     provider sets spec.controlPlaneEndpoint to the workload apiserver's and
//     status.initialization.provisioned=true.
//   - LabControlPlane (controlplane.lab.spotter.dev), the ControlPlane: an
//     externally managed one, as EKS, AKS or GKE are to Cluster API, since the
//     lab's control plane runs before any Cluster exists and has no Machines.
//     The provider writes the Secret <cluster>-kubeconfig (key value, labelled
//     cluster.x-k8s.io/cluster-name, as Cluster API caches only labelled
//     Secrets) with the workload cluster's kubeconfig, through which
//     Cluster API reads the workload cluster's Nodes, and sets
//     status.initialization.controlPlaneInitialized and
//     status.externalManagedControlPlane.
//   - LabMachineTemplate and LabMachine (infrastructure.lab.spotter.dev), the
//     InfrastructureMachineTemplate and InfrastructureMachine. For each
//     LabMachine whose Machine has its bootstrap data
//     (spec.bootstrap.dataSecretName, which the provider never reads) the
//     provider creates a kwok Node of the same name with spec.providerID
//     lab://<namespace>/<name>, then sets the LabMachine's spec.providerID,
//     status.initialization.provisioned and status.interruptible. Cluster API
//     finds the Node by that providerID and sets the Machine's nodeRef. When the
//     LabMachine is deleted (Cluster API deletes it when it deletes the Machine,
//     after draining the Node), the provider deletes the Node, as a cloud's
//     node lifecycle controller would once the instance is gone.
//   - LabMachinePool (infrastructure.lab.spotter.dev), the InfraMachinePool of
//     a MachinePool: see MachinePools below.
//
// spec.spotMarketOptions, as on an AWSMachine, makes a machine spot: its Node is
// labelled karpenter.sh/capacity-type=spot (on-demand otherwise) and the
// LabMachine reports status.interruptible=true, from which Cluster API labels
// the Node cluster.x-k8s.io/interruptible. A provider reads the same field from
// the LabMachineTemplate as it would from an AWSMachineTemplate, and
// spec.template.spotMarketOptions from a LabMachinePool as it would
// spec.template.spotVMOptions from an AzureMachinePool.
//
// # MachinePools
//
// Once its MachinePool owns it and has its bootstrap data, a LabMachinePool
// keeps the MachinePool's spec.replicas of instances made from its
// spec.template (a LabMachine's spec) and reports them as Cluster API's
// InfraMachinePool contract asks: spec.providerIDList, status.replicas, and
// provisioned as status.initialization.provisioned and as status.ready
// (Cluster API v1.14.2's MachinePool controller reads status.ready, the
// v1beta1 contract's field, through external.IsReady, whatever the contract
// page says). Cluster API then matches Nodes to the providerIDs
// (status.nodeRefs) and, when an instance leaves the list, deletes its Node.
// There are two kinds of pool:
//
//   - With spec.machinePoolMachines, Cluster API's MachinePool Machines: each
//     instance is a LabMachine labelled cluster.x-k8s.io/cluster-name and
//     cluster.x-k8s.io/pool-name, owned (not controlled) by the pool, which
//     reports status.infrastructureMachineKind=LabMachine; Cluster API's
//     MachinePool controller makes a Machine for each. A scale down picks the
//     LabMachines whose Machine is annotated cluster.x-k8s.io/delete-machine
//     first, then those not provisioned, then the newest, and deletes their
//     Machines (a LabMachine without a Machine yet directly), so that Cluster
//     API drains each Node before it deletes the LabMachine, as the
//     MachinePool Machines proposal asks of an infrastructure provider.
//   - Without it, the instances are kwok Nodes only, labelled with the pool
//     (PoolLabel, PoolNamespaceLabel), as the instances of a cloud's scale set
//     that Cluster API does not see one by one, and a scale down deletes the
//     newest: nothing outside the provider can choose which.
//
// Outside what the lab needs, and left out: rolling the instances when
// spec.template changes (new instances take the new spec, old ones stay),
// failure domains, status.instances, conditions, and a LabMachinePoolTemplate
// for ClusterClasses.
//
// # Why a control plane provider
//
// Worker Machines run without one: a Cluster with no spec.controlPlaneRef is
// taken to have a control plane of stand-alone Machines. But then Cluster API
// sets the Cluster's ControlPlaneInitialized condition only once such a Machine
// has a Node, and until then it does not watch the workload cluster's Nodes;
// it generates the kubeconfig Secret only from a <cluster>-ca Secret; and, as
// there are no control plane members, it deletes worker Machines without
// draining their Nodes and leaves the Nodes behind. With an externally managed
// control plane it drains and deletes them, as it would in a cloud. The
// LabControlPlane has no spec.version, so the MachineSet preflight checks
// (version skew, control plane stable) have nothing to compare and pass.
//
// Cluster API's admission webhooks are not registered with the lab apiserver,
// so the builders in objects.go fill in what their defaulting would (labels,
// selector, replicas, rollout strategy).
package capiinfra
