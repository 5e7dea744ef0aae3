package world

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"spotter.dev/spotter/internal/drain"
	"spotter.dev/spotter/internal/snapshot"
)

// API is the Kubernetes API of a World as Spotter's controllers use it: a
// controller-runtime client.Reader in place of the manager's cache, and a
// client-go clientset whose every call is answered from the world (a fake
// clientset with one reactor that serves everything; nothing is answered by
// its object tracker). Nodes and pods are the world's; PodDisruptionBudgets
// carry the status the disruption controller would give them; evictions go
// through the world's Eviction API, which enforces the budgets.
//
// What clients write to a Node (labels, annotations, taints, unschedulable)
// is kept on the world's node and shows in its object from then on; the
// world's own labels and taints stay the world's. Node writes carry a
// resourceVersion, and an update from a stale read is refused with a
// Conflict, as the apiserver does.
type API struct {
	w    *World
	Kube *fake.Clientset
	// Items of the lists the reader hands out, each kind built when listed,
	// once per world version.
	nodes      listed[corev1.Node]
	pods       listed[corev1.Pod]
	pdbs       listed[policyv1.PodDisruptionBudget]
	namespaces listed[corev1.Namespace]
}

// listed holds the items of one kind's list as of a world version.
type listed[T any] struct {
	version uint64
	built   bool
	items   []T
}

// of returns the items of the world's objects at version, built from objs
// (called only when they are not) when the world changed since the last.
func (l *listed[T]) of(version uint64, objs func() []*T) []T {
	if !l.built || l.version != version {
		l.items, l.version, l.built = derefAll(objs()), version, true
	}
	return l.items
}

// NewAPI is the API of a world, with a fake clientset whose every call the
// world answers.
func NewAPI(w *World) *API {
	a := &API{w: w, Kube: fake.NewClientset()}
	a.Kube.PrependReactor("*", "*", a.React)
	return a
}

// The list items of each kind, as the world is now.
func (a *API) nodeItems() []corev1.Node {
	return a.nodes.of(a.w.version, func() []*corev1.Node { return a.w.Snapshot().Nodes })
}

func (a *API) podItems() []corev1.Pod {
	return a.pods.of(a.w.version, func() []*corev1.Pod { return a.w.Snapshot().Pods })
}

func (a *API) pdbItems() []policyv1.PodDisruptionBudget {
	return a.pdbs.of(a.w.version, func() []*policyv1.PodDisruptionBudget { return a.w.Snapshot().PDBs })
}

func (a *API) namespaceItems() []corev1.Namespace {
	return a.namespaces.of(a.w.version, func() []*corev1.Namespace { return a.w.Snapshot().Namespaces })
}

func derefAll[T any](in []*T) []T {
	out := make([]T, len(in))
	for i, p := range in {
		out[i] = *p
	}
	return out
}

// Snapshot implements snapshot.Snapshotter: the objects the lists would
// hold, in the same order, without copying every pod of the world into list
// items for each change of it.
func (a *API) Snapshot(context.Context) (*snapshot.Snapshot, error) {
	w := a.w.Snapshot()
	return &snapshot.Snapshot{Revision: a.Revision(), Nodes: slices.Clone(w.Nodes), Pods: slices.Clone(w.Pods),
		PDBs: slices.Clone(w.PDBs), Namespaces: slices.Clone(w.Namespaces)}, nil
}

// Revision names the world's state (snapshot.Revisioner): the planner of a
// controller answers a cycle in an unchanged world from its last plan.
func (a *API) Revision() string { return strconv.FormatUint(a.w.version, 10) }

// Get implements client.Reader for Nodes and Pods.
func (a *API) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	switch o := obj.(type) {
	case *corev1.Node:
		n := a.registered(key.Name)
		if n == nil {
			return apierrors.NewNotFound(corev1.Resource("nodes"), key.Name)
		}
		n.Obj.DeepCopyInto(o)
	case *corev1.Pod:
		p := a.Pod(key.Namespace, key.Name)
		if p == nil {
			return apierrors.NewNotFound(corev1.Resource("pods"), key.Name)
		}
		p.Obj.DeepCopyInto(o)
	default:
		return fmt.Errorf("the simulator's cache does not serve %T", obj)
	}
	return nil
}

// List implements client.Reader: Nodes, Pods, PodDisruptionBudgets and
// Namespaces are the world's; every other kind is an empty list. The items
// are shared between callers, as a cache's would be without deep copies:
// they are read, never written.
func (a *API) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	var err error
	switch l := list.(type) {
	case *corev1.NodeList:
		l.Items, err = filter(a.nodeItems(), lo, func(n *corev1.Node) fields.Set { return fields.Set{"metadata.name": n.Name} })
	case *corev1.PodList:
		l.Items, err = filter(a.podItems(), lo, podFields)
	case *policyv1.PodDisruptionBudgetList:
		l.Items, err = filter(a.pdbItems(), lo, nil)
	case *corev1.NamespaceList:
		l.Items, err = filter(a.namespaceItems(), lo, nil)
	}
	return err
}

func podFields(p *corev1.Pod) fields.Set {
	return fields.Set{"metadata.name": p.Name, "metadata.namespace": p.Namespace, "spec.nodeName": p.Spec.NodeName}
}

// filter returns the items that match lo's namespace and selectors (all of
// them, unshared, when lo selects nothing).
func filter[T any, PT interface {
	*T
	metav1.Object
}](items []T, lo *client.ListOptions, fieldsOf func(PT) fields.Set) ([]T, error) {
	if lo.Namespace == "" && lo.LabelSelector == nil && lo.FieldSelector == nil {
		return items, nil
	}
	if lo.FieldSelector != nil && !lo.FieldSelector.Empty() && fieldsOf == nil {
		return nil, fmt.Errorf("the simulator's cache cannot select %T by field", items)
	}
	var out []T
	for i := range items {
		o := PT(&items[i])
		if lo.Namespace != "" && o.GetNamespace() != lo.Namespace {
			continue
		}
		if lo.LabelSelector != nil && !lo.LabelSelector.Matches(labels.Set(o.GetLabels())) {
			continue
		}
		if lo.FieldSelector != nil && !lo.FieldSelector.Empty() && !lo.FieldSelector.Matches(fieldsOf(o)) {
			continue
		}
		out = append(out, items[i])
	}
	return out, nil
}

// registered returns the world's node of that name once it has registered.
func (a *API) registered(name string) *Node {
	if n := a.w.NodeByName(name); n != nil && n.Ready() {
		return n
	}
	return nil
}

// Pod returns the world's Pod of that name, as the API has it (a Pod lost
// with its node is gone from the API as from the planner's snapshot).
func (a *API) Pod(namespace, name string) *Pod {
	if p := a.w.PodByName(namespace, name); p != nil && !p.lost {
		return p
	}
	return nil
}

// React answers every clientset call from the world.
func (a *API) React(action k8stesting.Action) (bool, runtime.Object, error) {
	res := action.GetResource().Resource
	switch {
	case res == "nodes":
		obj, err := a.nodeCall(action)
		return true, obj, err
	case res == "pods":
		obj, err := a.podCall(action)
		return true, obj, err
	case res == "poddisruptionbudgets" && action.GetVerb() == "list":
		items, err := filter(a.pdbItems(), &client.ListOptions{Namespace: action.GetNamespace()}, nil)
		list := &policyv1.PodDisruptionBudgetList{}
		for i := range items {
			list.Items = append(list.Items, *items[i].DeepCopy())
		}
		return true, list, err
	case res == "events":
		// Recorders are nil in the simulator; an Event is accepted and dropped.
		return true, nil, nil
	}
	return true, nil, fmt.Errorf("the simulator does not serve %s %s", action.GetVerb(), res)
}

func (a *API) nodeCall(action k8stesting.Action) (runtime.Object, error) {
	// By the action's concrete type: the interfaces overlap (a delete or a
	// patch is also a GetAction).
	switch act := action.(type) {
	case k8stesting.GetActionImpl:
		n := a.registered(act.GetName())
		if n == nil {
			return nil, apierrors.NewNotFound(corev1.Resource("nodes"), act.GetName())
		}
		return n.Obj.DeepCopy(), nil
	case k8stesting.ListActionImpl:
		list := &corev1.NodeList{}
		sel := act.GetListRestrictions()
		for _, n := range a.w.nodes {
			if n.Ready() && sel.Labels.Matches(labels.Set(n.Obj.Labels)) && sel.Fields.Matches(fields.Set{"metadata.name": n.Name}) {
				list.Items = append(list.Items, *n.Obj.DeepCopy())
			}
		}
		return list, nil
	case k8stesting.UpdateActionImpl:
		obj, ok := act.GetObject().(*corev1.Node)
		if !ok || act.GetSubresource() != "" {
			break
		}
		n := a.registered(obj.Name)
		if n == nil {
			return nil, apierrors.NewNotFound(corev1.Resource("nodes"), obj.Name)
		}
		if obj.ResourceVersion != n.Obj.ResourceVersion {
			return nil, apierrors.NewConflict(corev1.Resource("nodes"), obj.Name,
				errors.New("the object has been modified; please apply your changes to the latest version and try again"))
		}
		return a.writeNode(n, obj), nil
	case k8stesting.PatchActionImpl:
		if act.GetSubresource() != "" {
			break
		}
		n := a.registered(act.GetName())
		if n == nil {
			return nil, apierrors.NewNotFound(corev1.Resource("nodes"), act.GetName())
		}
		patched := &corev1.Node{}
		if err := applyPatch(n.Obj, act.GetPatchType(), act.GetPatch(), patched); err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		if patched.ResourceVersion != n.Obj.ResourceVersion {
			return nil, apierrors.NewConflict(corev1.Resource("nodes"), n.Name, errors.New("the resourceVersion in the patch is not the object's"))
		}
		return a.writeNode(n, patched), nil
	}
	return nil, fmt.Errorf("the simulator does not serve %s nodes", action.GetVerb())
}

// applyPatch applies a JSON, merge or strategic merge patch to orig into out.
func applyPatch(orig *corev1.Node, pt types.PatchType, patch []byte, out *corev1.Node) error {
	js, err := json.Marshal(orig)
	if err != nil {
		return err
	}
	switch pt {
	case types.JSONPatchType:
		var p jsonpatch.Patch
		if p, err = jsonpatch.DecodePatch(patch); err == nil {
			js, err = p.Apply(js)
		}
	case types.MergePatchType:
		js, err = jsonpatch.MergePatch(js, patch)
	case types.StrategicMergePatchType:
		js, err = strategicpatch.StrategicMergePatch(js, patch, corev1.Node{})
	default:
		err = fmt.Errorf("patch type %s is not served by the simulator", pt)
	}
	if err != nil {
		return err
	}
	return json.Unmarshal(js, out)
}

// writeNode keeps what a client wrote to n's object: the cordon, the drain
// taint (as the node's Draining, which the world's autoscaler reads), and
// every other label, annotation and taint (the agent's notice taint among
// them) that is not the world's own.
func (a *API) writeNode(n *Node, obj *corev1.Node) *corev1.Node {
	w := a.w
	n.Cordoned = obj.Spec.Unschedulable
	was := n.Draining
	n.Draining, n.noticeTaint, n.apiTaints = "", false, nil
	for _, t := range obj.Spec.Taints {
		switch {
		case t.Key == drain.DrainingTaintKey:
			n.Draining = t.Value
		case w.onDemandTaint != nil && t.Key == w.onDemandTaint.Key && !n.Group.Spot:
		case t.Key == toBeDeletedTaint: // the autoscaler's, kept as n.toBeDeleted
		default:
			n.apiTaints = append(n.apiTaints, t)
		}
	}
	own := w.ownLabels(n)
	n.apiLabels = map[string]string{}
	for k, v := range obj.Labels {
		if _, ok := own[k]; !ok {
			n.apiLabels[k] = v
		}
	}
	n.apiAnnotations = obj.Annotations
	// A drain's taint put on, or taken off: a drain that ends with pods
	// left on its node (evicted ones still terminating included; a drain
	// that succeeds waits for them to go) was rolled back. The migrator
	// keeps its taint on a node it drained until the node is deleted.
	switch {
	case was == "" && n.Draining != "":
		w.m.drainStarted("spotter-" + n.Draining)
	case was != "" && n.Draining == "":
		w.m.drainEnded("spotter-"+was, len(n.pods) > 0)
	}
	w.refresh(n)
	return n.Obj.DeepCopy()
}

func (a *API) podCall(action k8stesting.Action) (runtime.Object, error) {
	w := a.w
	// By the action's concrete type, as for nodes.
	switch act := action.(type) {
	case k8stesting.GetActionImpl:
		p := a.Pod(act.GetNamespace(), act.GetName())
		if p == nil {
			return nil, apierrors.NewNotFound(corev1.Resource("pods"), act.GetName())
		}
		return p.Obj.DeepCopy(), nil
	case k8stesting.ListActionImpl:
		list := &corev1.PodList{}
		sel := act.GetListRestrictions()
		for _, p := range w.byKey {
			if p.lost || act.GetNamespace() != "" && p.Obj.Namespace != act.GetNamespace() {
				continue
			}
			if sel.Labels.Matches(labels.Set(p.Obj.Labels)) && sel.Fields.Matches(podFields(p.Obj)) {
				list.Items = append(list.Items, *p.Obj.DeepCopy())
			}
		}
		return list, nil
	case k8stesting.CreateActionImpl:
		ev, ok := act.GetObject().(*policyv1.Eviction)
		if !ok || act.GetSubresource() != "eviction" {
			break
		}
		p := a.Pod(ev.Namespace, ev.Name)
		if p == nil {
			return nil, apierrors.NewNotFound(corev1.Resource("pods"), ev.Name)
		}
		if err := preconditions(p, ev.DeleteOptions); err != nil {
			return nil, err
		}
		by := "spotter-" + ev.Labels[drain.EvictedByLabel]
		if err := w.evict(p, by, a.grace(ev.DeleteOptions)); err != nil {
			return nil, apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10)
		}
		return ev, nil
	case k8stesting.UpdateActionImpl:
		obj, ok := act.GetObject().(*corev1.Pod)
		if !ok || act.GetSubresource() != "" {
			break
		}
		p := a.Pod(obj.Namespace, obj.Name)
		if p == nil || p.Obj.UID != obj.UID {
			return nil, apierrors.NewNotFound(corev1.Resource("pods"), obj.Name)
		}
		if obj.ResourceVersion != p.Obj.ResourceVersion {
			return nil, apierrors.NewConflict(corev1.Resource("pods"), obj.Name, errors.New("the object has been modified"))
		}
		if err := w.UpdatePod(p, obj); err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		return p.Obj.DeepCopy(), nil
	case k8stesting.DeleteActionImpl:
		p := a.Pod(act.GetNamespace(), act.GetName())
		if p == nil {
			return nil, apierrors.NewNotFound(corev1.Resource("pods"), act.GetName())
		}
		opts := act.GetDeleteOptions()
		if err := preconditions(p, &opts); err != nil {
			return nil, err
		}
		w.terminatePod(p, a.grace(&opts))
		return nil, nil
	}
	return nil, fmt.Errorf("the simulator does not serve %s pods", action.GetVerb())
}

// preconditions refuses a delete or eviction meant for another pod of the
// same name.
func preconditions(p *Pod, opts *metav1.DeleteOptions) error {
	if opts != nil && opts.Preconditions != nil && opts.Preconditions.UID != nil && *opts.Preconditions.UID != p.Obj.UID {
		return apierrors.NewConflict(corev1.Resource("pods"), p.Obj.Name,
			fmt.Errorf("precondition failed: UID in precondition: %s, UID in object meta: %s", *opts.Preconditions.UID, p.Obj.UID))
	}
	return nil
}

// grace is the grace period a delete asks for, else the world's.
func (a *API) grace(opts *metav1.DeleteOptions) time.Duration {
	if opts != nil && opts.GracePeriodSeconds != nil {
		return time.Duration(*opts.GracePeriodSeconds) * time.Second
	}
	return a.w.sc.Cluster.GracePeriod.Duration
}
