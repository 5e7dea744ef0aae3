package snapshot

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The kinds the decoder reads by hand: pods, nodes and PodDisruptionBudgets,
// nearly every object of a snapshot. Each struct's fields that snapshots hold
// most often are read here; the others go to other(), which decodes them
// through json-iterator. Other kinds are decoded the reference way.

// decodeFast decodes the object in toks, or answers ok=false when the
// reference decoder (decodeItem) must: a kind the decoder does not read, or
// an object it is not sure to read alike. obj is nil, with ok, for a kind
// the planner does not read.
func (d *decoder) decodeFast(toks []token) (obj any, ok bool) {
	d.reset(toks)
	av, k, ok := typeMeta(toks)
	if !ok {
		return nil, false
	}
	apiVersion, kind := string(av), string(k) // not kept: no copies
	switch {
	case kind == "Pod" && apiVersion == "v1":
		p := &corev1.Pod{}
		d.pod(p)
		obj = p
	case kind == "Node" && apiVersion == "v1":
		n := &corev1.Node{}
		d.node(n)
		obj = n
	case kind == "PodDisruptionBudget" && apiVersion == "policy/v1":
		b := &policyv1.PodDisruptionBudget{}
		d.pdb(b)
		obj = b
	default:
		if _, known := kinds[apiVersion+"/"+kind]; known {
			return nil, false
		}
		return nil, true // a kind the planner does not read
	}
	if d.bad || d.pos != len(toks) {
		return nil, false
	}
	return obj, true
}

// typeMeta finds apiVersion and kind among the keys of the mapping toks
// holds, as the reference reads them: both strings, and no other key that
// matches either when case is ignored.
func typeMeta(toks []token) (apiVersion, kind []byte, ok bool) {
	if len(toks) == 0 || toks[0].kind != tokMap {
		return nil, nil, false
	}
	for i := 1; toks[i].kind == tokKey; {
		k, v := toks[i].val, toks[i+1]
		switch {
		case string(k) == "apiVersion" && v.kind == tokString:
			apiVersion = v.val
		case string(k) == "kind" && v.kind == tokString:
			kind = v.val
		case foldsTo(k, "apiVersion") || foldsTo(k, "kind"):
			// The same key in another case (or a null or a number in
			// their place): the reference.
			return nil, nil, false
		}
		i = skipValue(toks, i+1)
	}
	return apiVersion, kind, len(apiVersion) > 0 && len(kind) > 0
}

// foldsTo reports whether key may be name to encoding/json, which matches
// keys to fields ignoring case: equal when ASCII case is ignored, or not
// ASCII (whose case folding is subtler).
func foldsTo(key []byte, name string) bool {
	for _, c := range key {
		if c >= 0x80 {
			return true
		}
	}
	return strings.EqualFold(string(key), name)
}

// top reads a whole object *p (a Pod, a Node, a PodDisruptionBudget): its
// type and object metadata, its spec and its status. Unlike a field, the
// object cannot be null.
func top[T, S, U any](d *decoder, p *T, tm *metav1.TypeMeta, meta *metav1.ObjectMeta,
	spec *S, readSpec func(*decoder, *S), status *U, readStatus func(*decoder, *U)) {
	if d.kind() == tokNull {
		d.fail()
		return
	}
	for k, ok := d.firstKey(); ok; k, ok = d.key() {
		switch string(k) {
		case "apiVersion":
			tm.APIVersion = d.istr()
		case "kind":
			tm.Kind = d.istr()
		case "metadata":
			d.objectMeta(meta)
		case "spec":
			readSpec(d, spec)
		case "status":
			readStatus(d, status)
		default:
			other(d, p, k)
		}
	}
}

// ptr reads an optional struct: nil for null, else a new T that read reads.
func ptr[T any](d *decoder, read func(*decoder, *T)) *T {
	if d.kind() == tokNull {
		d.pos++
		return nil
	}
	v := new(T)
	read(d, v)
	return v
}

func (d *decoder) pod(p *corev1.Pod) {
	top(d, p, &p.TypeMeta, &p.ObjectMeta, &p.Spec, (*decoder).podSpec, &p.Status, (*decoder).podStatus)
}

func (d *decoder) node(n *corev1.Node) {
	top(d, n, &n.TypeMeta, &n.ObjectMeta, &n.Spec, (*decoder).nodeSpec, &n.Status, (*decoder).nodeStatus)
}

func (d *decoder) pdb(b *policyv1.PodDisruptionBudget) {
	top(d, b, &b.TypeMeta, &b.ObjectMeta, &b.Spec, (*decoder).pdbSpec, &b.Status, (*decoder).pdbStatus)
}

func (d *decoder) objectMeta(m *metav1.ObjectMeta) {
	for k, ok := d.firstKey(); ok; k, ok = d.key() {
		switch string(k) {
		case "name":
			m.Name = d.str()
		case "generateName":
			m.GenerateName = d.istr()
		case "namespace":
			m.Namespace = d.istr()
		case "uid":
			m.UID = types.UID(d.str())
		case "resourceVersion":
			m.ResourceVersion = d.str()
		case "generation":
			m.Generation = d.int64()
		case "creationTimestamp":
			m.CreationTimestamp = d.time()
		case "deletionTimestamp":
			m.DeletionTimestamp = d.timep()
		case "deletionGracePeriodSeconds":
			m.DeletionGracePeriodSeconds = d.int64p()
		case "labels":
			m.Labels = d.strMap("")
		case "annotations":
			m.Annotations = d.strMap(lastAppliedAnnotation)
		case "ownerReferences":
			m.OwnerReferences = seq(d, (*decoder).ownerReference)
		case "finalizers":
			m.Finalizers = d.strList()
		case "managedFields":
			// Checked as the reference checks it, then left out
			// (compact.go).
			var mf []metav1.ManagedFieldsEntry
			d.delegate(&mf)
		default:
			other(d, m, k)
		}
	}
}

func (d *decoder) ownerReference(r *metav1.OwnerReference) {
	for k, ok := d.firstKey(); ok; k, ok = d.key() {
		switch string(k) {
		case "apiVersion":
			r.APIVersion = d.istr()
		case "kind":
			r.Kind = d.istr()
		case "name":
			r.Name = d.istr()
		case "uid":
			r.UID = types.UID(d.istr())
		case "controller":
			r.Controller = d.boolp()
		case "blockOwnerDeletion":
			r.BlockOwnerDeletion = d.boolp()
		default:
			other(d, r, k)
		}
	}
}

func (d *decoder) podSpec(s *corev1.PodSpec) {
	for k, ok := d.firstKey(); ok; k, ok = d.key() {
		switch string(k) {
		case "containers":
			s.Containers = seq(d, (*decoder).container)
		case "initContainers":
			s.InitContainers = seq(d, (*decoder).container)
		case "nodeName":
			s.NodeName = d.istr()
		case "schedulerName":
			s.SchedulerName = d.istr()
		case "tolerations":
			s.Tolerations = seq(d, (*decoder).toleration)
		case "affinity":
			s.Affinity = ptr(d, (*decoder).affinity)
		case "topologySpreadConstraints":
			s.TopologySpreadConstraints = seq(d, (*decoder).spreadConstraint)
		case "nodeSelector":
			s.NodeSelector = d.strMap("")
		case "restartPolicy":
			s.RestartPolicy = corev1.RestartPolicy(d.istr())
		case "terminationGracePeriodSeconds":
			s.TerminationGracePeriodSeconds = d.int64p()
		case "dnsPolicy":
			s.DNSPolicy = corev1.DNSPolicy(d.istr())
		case "serviceAccountName":
			s.ServiceAccountName = d.istr()
		case "serviceAccount":
			s.DeprecatedServiceAccount = d.istr()
		case "priority":
			s.Priority = d.int32p()
		case "priorityClassName":
			s.PriorityClassName = d.istr()
		case "enableServiceLinks":
			s.EnableServiceLinks = d.boolp()
		case "preemptionPolicy":
			s.PreemptionPolicy = strp[corev1.PreemptionPolicy](d)
		case "overhead":
			s.Overhead = d.resourceList()
		case "hostNetwork":
			s.HostNetwork = d.bool()
		default:
			other(d, s, k)
		}
	}
}

func (d *decoder) container(c *corev1.Container) {
	for k, ok := d.firstKey(); ok; k, ok = d.key() {
		switch string(k) {
		case "name":
			c.Name = d.istr()
		case "image":
			c.Image = d.istr()
		case "imagePullPolicy":
			c.ImagePullPolicy = corev1.PullPolicy(d.istr())
		case "resources":
			d.resourceRequirements(&c.Resources)
		case "ports":
			c.Ports = seq(d, (*decoder).containerPort)
		case "command":
			c.Command = d.strList()
		case "args":
			c.Args = d.strList()
		case "terminationMessagePath":
			c.TerminationMessagePath = d.istr()
		case "terminationMessagePolicy":
			c.TerminationMessagePolicy = corev1.TerminationMessagePolicy(d.istr())
		case "restartPolicy":
			c.RestartPolicy = strp[corev1.ContainerRestartPolicy](d)
		default:
			other(d, c, k)
		}
	}
}

func (d *decoder) resourceRequirements(r *corev1.ResourceRequirements) {
	for k, ok := d.firstKey(); ok; k, ok = d.key() {
		switch string(k) {
		case "requests":
			r.Requests = d.resourceList()
		case "limits":
			r.Limits = d.resourceList()
		default:
			other(d, r, k)
		}
	}
}

func (d *decoder) resourceList() corev1.ResourceList {
	n, ok := d.enter(tokMap)
	if !ok {
		return nil
	}
	m := make(corev1.ResourceList, n)
	for k, ok := d.key(); ok; k, ok = d.key() {
		m[corev1.ResourceName(d.intern(k))] = d.quantity()
	}
	return m
}

func (d *decoder) containerPort(p *corev1.ContainerPort) {
	for k, ok := d.firstKey(); ok; k, ok = d.key() {
		switch string(k) {
		case "name":
			p.Name = d.istr()
		case "containerPort":
			p.ContainerPort = d.int32()
		case "hostPort":
			p.HostPort = d.int32()
		case "protocol":
			p.Protocol = corev1.Protocol(d.istr())
		case "hostIP":
			p.HostIP = d.istr()
		default:
			other(d, p, k)
		}
	}
}

func (d *decoder) toleration(t *corev1.Toleration) {
	for k, ok := d.firstKey(); ok; k, ok = d.key() {
		switch string(k) {
		case "key":
			t.Key = d.istr()
		case "operator":
			t.Operator = corev1.TolerationOperator(d.istr())
		case "value":
			t.Value = d.istr()
		case "effect":
			t.Effect = corev1.TaintEffect(d.istr())
		case "tolerationSeconds":
			t.TolerationSeconds = d.int64p()
		default:
			other(d, t, k)
		}
	}
}

func (d *decoder) affinity(a *corev1.Affinity) {
	for k, ok := d.firstKey(); ok; k, ok = d.key() {
		switch string(k) {
		case "nodeAffinity":
			a.NodeAffinity = ptr(d, (*decoder).nodeAffinity)
		case "podAffinity":
			a.PodAffinity = ptr(d, (*decoder).podAffinity)
		case "podAntiAffinity":
			a.PodAntiAffinity = ptr(d, (*decoder).podAntiAffinity)
		default:
			other(d, a, k)
		}
	}
}

func (d *decoder) podAffinity(a *corev1.PodAffinity) {
	podAffinityTerms(d, a, &a.RequiredDuringSchedulingIgnoredDuringExecution,
		&a.PreferredDuringSchedulingIgnoredDuringExecution)
}

func (d *decoder) podAntiAffinity(a *corev1.PodAntiAffinity) {
	podAffinityTerms(d, a, &a.RequiredDuringSchedulingIgnoredDuringExecution,
		&a.PreferredDuringSchedulingIgnoredDuringExecution)
}

// podAffinityTerms reads a PodAffinity or a PodAntiAffinity (p), which have
// the same fields.
func podAffinityTerms[T any](d *decoder, p *T, required *[]corev1.PodAffinityTerm, preferred *[]corev1.WeightedPodAffinityTerm) {
	for k, ok := d.firstKey(); ok; k, ok = d.key() {
		switch string(k) {
		case "requiredDuringSchedulingIgnoredDuringExecution":
			*required = seq(d, (*decoder).podAffinityTerm)
		case "preferredDuringSchedulingIgnoredDuringExecution":
			*preferred = seq(d, (*decoder).weightedPodAffinityTerm)
		default:
			other(d, p, k)
		}
	}
}

func (d *decoder) weightedPodAffinityTerm(w *corev1.WeightedPodAffinityTerm) {
	for k, ok := d.firstKey(); ok; k, ok = d.key() {
		switch string(k) {
		case "weight":
			w.Weight = d.int32()
		case "podAffinityTerm":
			d.podAffinityTerm(&w.PodAffinityTerm)
		default:
			other(d, w, k)
		}
	}
}

func (d *decoder) podAffinityTerm(t *corev1.PodAffinityTerm) {
	for k, ok := d.firstKey(); ok; k, ok = d.key() {
		switch string(k) {
		case "labelSelector":
			t.LabelSelector = d.labelSelector()
		case "namespaces":
			t.Namespaces = d.strList()
		case "topologyKey":
			t.TopologyKey = d.istr()
		case "namespaceSelector":
			t.NamespaceSelector = d.labelSelector()
		case "matchLabelKeys":
			t.MatchLabelKeys = d.strList()
		case "mismatchLabelKeys":
			t.MismatchLabelKeys = d.strList()
		default:
			other(d, t, k)
		}
	}
}

func (d *decoder) nodeAffinity(a *corev1.NodeAffinity) {
	for k, ok := d.firstKey(); ok; k, ok = d.key() {
		switch string(k) {
		case "requiredDuringSchedulingIgnoredDuringExecution":
			a.RequiredDuringSchedulingIgnoredDuringExecution = ptr(d, (*decoder).nodeSelector)
		case "preferredDuringSchedulingIgnoredDuringExecution":
			a.PreferredDuringSchedulingIgnoredDuringExecution = seq(d, (*decoder).preferredSchedulingTerm)
		default:
			other(d, a, k)
		}
	}
}

func (d *decoder) nodeSelector(s *corev1.NodeSelector) {
	for k, ok := d.firstKey(); ok; k, ok = d.key() {
		if string(k) == "nodeSelectorTerms" {
			s.NodeSelectorTerms = seq(d, (*decoder).nodeSelectorTerm)
		} else {
			other(d, s, k)
		}
	}
}

func (d *decoder) preferredSchedulingTerm(p *corev1.PreferredSchedulingTerm) {
	for k, ok := d.firstKey(); ok; k, ok = d.key() {
		switch string(k) {
		case "weight":
			p.Weight = d.int32()
		case "preference":
			d.nodeSelectorTerm(&p.Preference)
		default:
			other(d, p, k)
		}
	}
}

func (d *decoder) nodeSelectorTerm(t *corev1.NodeSelectorTerm) {
	for k, ok := d.firstKey(); ok; k, ok = d.key() {
		switch string(k) {
		case "matchExpressions":
			t.MatchExpressions = seq(d, (*decoder).nodeSelectorRequirement)
		case "matchFields":
			t.MatchFields = seq(d, (*decoder).nodeSelectorRequirement)
		default:
			other(d, t, k)
		}
	}
}

func (d *decoder) nodeSelectorRequirement(r *corev1.NodeSelectorRequirement) {
	requirement(d, r, &r.Key, &r.Operator, &r.Values)
}

// requirement reads a NodeSelectorRequirement or a LabelSelectorRequirement
// (r), which have the same fields.
func requirement[T any, O ~string](d *decoder, r *T, key *string, operator *O, values *[]string) {
	for k, ok := d.firstKey(); ok; k, ok = d.key() {
		switch string(k) {
		case "key":
			*key = d.istr()
		case "operator":
			*operator = O(d.istr())
		case "values":
			*values = d.strList()
		default:
			other(d, r, k)
		}
	}
}

func (d *decoder) labelSelector() *metav1.LabelSelector {
	return ptr(d, func(d *decoder, s *metav1.LabelSelector) {
		for k, ok := d.firstKey(); ok; k, ok = d.key() {
			switch string(k) {
			case "matchLabels":
				s.MatchLabels = d.strMap("")
			case "matchExpressions":
				s.MatchExpressions = seq(d, (*decoder).labelSelectorRequirement)
			default:
				other(d, s, k)
			}
		}
	})
}

func (d *decoder) labelSelectorRequirement(r *metav1.LabelSelectorRequirement) {
	requirement(d, r, &r.Key, &r.Operator, &r.Values)
}

func (d *decoder) spreadConstraint(c *corev1.TopologySpreadConstraint) {
	for k, ok := d.firstKey(); ok; k, ok = d.key() {
		switch string(k) {
		case "maxSkew":
			c.MaxSkew = d.int32()
		case "topologyKey":
			c.TopologyKey = d.istr()
		case "whenUnsatisfiable":
			c.WhenUnsatisfiable = corev1.UnsatisfiableConstraintAction(d.istr())
		case "labelSelector":
			c.LabelSelector = d.labelSelector()
		case "minDomains":
			c.MinDomains = d.int32p()
		case "nodeAffinityPolicy":
			c.NodeAffinityPolicy = strp[corev1.NodeInclusionPolicy](d)
		case "nodeTaintsPolicy":
			c.NodeTaintsPolicy = strp[corev1.NodeInclusionPolicy](d)
		case "matchLabelKeys":
			c.MatchLabelKeys = d.strList()
		default:
			other(d, c, k)
		}
	}
}

func (d *decoder) podStatus(s *corev1.PodStatus) {
	for k, ok := d.firstKey(); ok; k, ok = d.key() {
		switch string(k) {
		case "phase":
			s.Phase = corev1.PodPhase(d.istr())
		case "qosClass":
			s.QOSClass = corev1.PodQOSClass(d.istr())
		case "startTime":
			s.StartTime = d.timep()
		case "conditions":
			s.Conditions = seq(d, (*decoder).podCondition)
		case "hostIP":
			s.HostIP = d.istr()
		case "podIP":
			s.PodIP = d.str()
		case "hostIPs":
			s.HostIPs = seq(d, func(d *decoder, ip *corev1.HostIP) { oneField(d, ip, "ip", &ip.IP, (*decoder).istr) })
		case "podIPs":
			s.PodIPs = seq(d, func(d *decoder, ip *corev1.PodIP) { oneField(d, ip, "ip", &ip.IP, (*decoder).str) })
		default:
			other(d, s, k)
		}
	}
}

// oneField reads a struct *p of which only the field name (into *v) is read
// by hand.
func oneField[T, V any](d *decoder, p *T, name string, v *V, read func(*decoder) V) {
	for k, ok := d.firstKey(); ok; k, ok = d.key() {
		if string(k) == name {
			*v = read(d)
		} else {
			other(d, p, k)
		}
	}
}

func (d *decoder) podCondition(c *corev1.PodCondition) {
	for k, ok := d.firstKey(); ok; k, ok = d.key() {
		switch string(k) {
		case "type":
			c.Type = corev1.PodConditionType(d.istr())
		case "lastProbeTime":
			c.LastProbeTime = d.time()
		case "observedGeneration":
			c.ObservedGeneration = d.int64()
		default:
			if !d.condition(k, &c.Status, &c.LastTransitionTime, &c.Reason, &c.Message) {
				other(d, c, k)
			}
		}
	}
}

// condition reads key k when it is one of the fields that a PodCondition
// and a NodeCondition share, and reports whether it was.
func (d *decoder) condition(k []byte, status *corev1.ConditionStatus, lastTransition *metav1.Time, reason, message *string) bool {
	switch string(k) {
	case "status":
		*status = corev1.ConditionStatus(d.istr())
	case "lastTransitionTime":
		*lastTransition = d.time()
	case "reason":
		*reason = d.istr()
	case "message":
		*message = d.istr()
	default:
		return false
	}
	return true
}

func (d *decoder) nodeSpec(s *corev1.NodeSpec) {
	for k, ok := d.firstKey(); ok; k, ok = d.key() {
		switch string(k) {
		case "providerID":
			s.ProviderID = d.str()
		case "taints":
			s.Taints = seq(d, (*decoder).taint)
		case "unschedulable":
			s.Unschedulable = d.bool()
		case "podCIDR":
			s.PodCIDR = d.str()
		case "podCIDRs":
			s.PodCIDRs = seq(d, func(d *decoder, s *string) { *s = d.str() })
		default:
			other(d, s, k)
		}
	}
}

func (d *decoder) taint(t *corev1.Taint) {
	for k, ok := d.firstKey(); ok; k, ok = d.key() {
		switch string(k) {
		case "key":
			t.Key = d.istr()
		case "value":
			t.Value = d.istr()
		case "effect":
			t.Effect = corev1.TaintEffect(d.istr())
		case "timeAdded":
			t.TimeAdded = d.timep()
		default:
			other(d, t, k)
		}
	}
}

func (d *decoder) nodeStatus(s *corev1.NodeStatus) {
	for k, ok := d.firstKey(); ok; k, ok = d.key() {
		switch string(k) {
		case "capacity":
			s.Capacity = d.resourceList()
		case "allocatable":
			s.Allocatable = d.resourceList()
		case "conditions":
			s.Conditions = seq(d, (*decoder).nodeCondition)
		case "addresses":
			s.Addresses = seq(d, (*decoder).nodeAddress)
		case "images":
			// Checked as the reference checks them, then left out
			// (compact.go).
			var images []corev1.ContainerImage
			d.delegate(&images)
		default:
			other(d, s, k)
		}
	}
}

func (d *decoder) nodeCondition(c *corev1.NodeCondition) {
	for k, ok := d.firstKey(); ok; k, ok = d.key() {
		switch string(k) {
		case "type":
			c.Type = corev1.NodeConditionType(d.istr())
		case "lastHeartbeatTime":
			c.LastHeartbeatTime = d.time()
		default:
			if !d.condition(k, &c.Status, &c.LastTransitionTime, &c.Reason, &c.Message) {
				other(d, c, k)
			}
		}
	}
}

func (d *decoder) nodeAddress(a *corev1.NodeAddress) {
	for k, ok := d.firstKey(); ok; k, ok = d.key() {
		switch string(k) {
		case "type":
			a.Type = corev1.NodeAddressType(d.istr())
		case "address":
			a.Address = d.str()
		default:
			other(d, a, k)
		}
	}
}

func (d *decoder) pdbSpec(s *policyv1.PodDisruptionBudgetSpec) {
	for k, ok := d.firstKey(); ok; k, ok = d.key() {
		switch string(k) {
		case "minAvailable":
			s.MinAvailable = d.intOrString()
		case "maxUnavailable":
			s.MaxUnavailable = d.intOrString()
		case "selector":
			s.Selector = d.labelSelector()
		default:
			other(d, s, k)
		}
	}
}

func (d *decoder) pdbStatus(s *policyv1.PodDisruptionBudgetStatus) {
	for k, ok := d.firstKey(); ok; k, ok = d.key() {
		switch string(k) {
		case "observedGeneration":
			s.ObservedGeneration = d.int64()
		case "disruptionsAllowed":
			s.DisruptionsAllowed = d.int32()
		case "currentHealthy":
			s.CurrentHealthy = d.int32()
		case "desiredHealthy":
			s.DesiredHealthy = d.int32()
		case "expectedPods":
			s.ExpectedPods = d.int32()
		default:
			other(d, s, k)
		}
	}
}
