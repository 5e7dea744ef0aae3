package clusterapi

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"

	"spotter.dev/spotter/internal/cloud"
)

// ControlPlaneGroupVersion is the version of Cluster API's kubeadm control
// plane provider the provider reads.
var ControlPlaneGroupVersion = schema.GroupVersion{Group: "controlplane.cluster.x-k8s.io", Version: "v1beta2"}

// KubeadmControlPlanesGVR is the resource of KubeadmControlPlanes.
var KubeadmControlPlanesGVR = ControlPlaneGroupVersion.WithResource("kubeadmcontrolplanes")

// KindKubeadmControlPlane is the kind of KubeadmControlPlanes.
const KindKubeadmControlPlane = "KubeadmControlPlane"

// ReasonControlPlaneOnSpot is the reason of the Warning Event recorded on a
// KubeadmControlPlane whose machines would be spot: the reason the labeler
// gives a control-plane node that looks like spot, so that one alert serves
// both.
const ReasonControlPlaneOnSpot = "SpotterControlPlaneOnSpot"

// controlPlane is what the provider reads of a KubeadmControlPlane.
type controlPlane struct {
	namespace, name string
	apiVersion      string // as the management cluster served it
	uid             types.UID
	templateRef     templateRef
	template        templateFacts
}

// id names a control plane as node groups are named: <kind>/<namespace>/<name>.
func (cp *controlPlane) id() string { return groupID(KindKubeadmControlPlane, cp.namespace, cp.name) }

// listControlPlanes lists the KubeadmControlPlanes in scope (namespace, Cluster;
// the label selector is for node groups and does not apply). None when the
// kind is not served, which is the case where kubeadm is not the control plane
// provider. A List the management cluster forbids is no error of the read
// (node groups go on working with the permissions of older versions), but
// unchecked is set and SpotControlPlanes reports it.
func (p *Provider) listControlPlanes(ctx context.Context) (cps []*controlPlane, unchecked, err error) {
	items, err := p.list(ctx, KubeadmControlPlanesGVR)
	switch {
	case cloud.IsNotFound(err):
		p.reportOnce(ctx, "no-kcp", func(logger klog.Logger) {
			logger.V(1).Info("KubeadmControlPlanes are not served by the management cluster: no control plane to check", "resource", KubeadmControlPlanesGVR.String())
		})
		return nil, nil, nil
	case apierrors.IsForbidden(err):
		return nil, fmt.Errorf("control planes not checked for spot: %w (grant list on %s)", err, KubeadmControlPlanesGVR.GroupResource()), nil
	case err != nil:
		return nil, nil, err
	}
	for i := range items {
		obj := &items[i]
		if p.opts.ClusterName != "" && clusterNameOf(obj) != p.opts.ClusterName {
			continue
		}
		cp := &controlPlane{namespace: obj.GetNamespace(), name: obj.GetName(), uid: obj.GetUID(), apiVersion: obj.GetAPIVersion()}
		// v1beta2: spec.machineTemplate.spec.infrastructureRef {apiGroup, kind,
		// name}; v1beta1 had spec.machineTemplate.infrastructureRef {apiVersion,
		// kind, name}.
		ref, found, _ := unstructured.NestedStringMap(obj.Object, "spec", "machineTemplate", "spec", "infrastructureRef")
		if !found {
			ref, _, _ = unstructured.NestedStringMap(obj.Object, "spec", "machineTemplate", "infrastructureRef")
		}
		cp.templateRef = templateRef{group: ref["apiGroup"], kind: ref["kind"], namespace: cp.namespace, name: ref["name"]}
		if cp.templateRef.group == "" && ref["apiVersion"] != "" {
			cp.templateRef.group = schema.FromAPIVersionAndKind(ref["apiVersion"], ref["kind"]).Group
		}
		cps = append(cps, cp)
	}
	return cps, nil, nil
}

// reportOnce runs report with the provider's logger the first time key is
// seen.
func (p *Provider) reportOnce(ctx context.Context, key string, report func(klog.Logger)) {
	if p.state.reported == nil {
		p.state.reported = map[string]bool{}
	}
	if !p.state.reported[key] {
		p.state.reported[key] = true
		report(klog.FromContext(ctx).WithName(ProviderName))
	}
}

// SpotControlPlanes implements cloud.ControlPlaneChecker: a
// *cloud.ControlPlaneError for each KubeadmControlPlane in scope whose
// machine template's infrastructure machine template asks for spot capacity
// (the fields that make a node group spot). When the provider records Events
// (RecordEvents), each such KubeadmControlPlane gets a Warning Event
// SpotterControlPlaneOnSpot in the management cluster, once per reason for as
// long as the provider lives.
func (p *Provider) SpotControlPlanes(ctx context.Context) ([]*cloud.ControlPlaneError, error) {
	s, err := p.read(ctx)
	if err != nil {
		return nil, err
	}
	if s.controlPlanesUnchecked != nil {
		return nil, s.controlPlanesUnchecked
	}
	var out []*cloud.ControlPlaneError
	for _, cp := range s.controlPlanes {
		if !cp.template.spot {
			continue
		}
		ref := cp.templateRef
		e := &cloud.ControlPlaneError{Kind: cloud.KindControlPlane, Name: cp.id(),
			Reason: fmt.Sprintf("its machines' %s %s/%s asks for spot capacity (%s); Spotter never puts the control plane on spot: give it an on-demand template",
				ref.kind, ref.namespace, ref.name, cp.template.spotField)}
		out = append(out, e)
		p.events.record(cp, e)
	}
	return out, nil
}

// RecordEvents makes the provider record its Warning Events about control
// planes on the management cluster, as component, until ctx ends. Without it
// the provider records none (as for spotter plan, which writes nothing).
func (p *Provider) RecordEvents(ctx context.Context, component string) error {
	client, err := kubernetes.NewForConfig(p.mgmt)
	if err != nil {
		return fmt.Errorf("cloud.clusterAPI: events client for the management cluster: %w", err)
	}
	b := events.NewBroadcaster(&events.EventSinkImpl{Interface: client.EventsV1()})
	if err := b.StartRecordingToSinkWithContext(ctx); err != nil {
		return fmt.Errorf("cloud.clusterAPI: recording Events: %w", err)
	}
	p.events.set(b.NewRecorder(scheme.Scheme, component))
	return nil
}

// eventLog records each control plane's Event once per reason.
type eventLog struct {
	mu       sync.Mutex
	recorder events.EventRecorder
	recorded map[types.UID]string // the last reason recorded
}

func (l *eventLog) set(r events.EventRecorder) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recorder = r
}

func (l *eventLog) record(cp *controlPlane, e *cloud.ControlPlaneError) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.recorder == nil || l.recorded[cp.uid] == e.Reason {
		return
	}
	if l.recorded == nil {
		l.recorded = map[types.UID]string{}
	}
	l.recorded[cp.uid] = e.Reason
	regarding := &corev1.ObjectReference{APIVersion: cp.apiVersion, Kind: KindKubeadmControlPlane,
		Namespace: cp.namespace, Name: cp.name, UID: cp.uid}
	l.recorder.Eventf(regarding, nil, corev1.EventTypeWarning, ReasonControlPlaneOnSpot, "Refuse", "%s", e.Error())
}
