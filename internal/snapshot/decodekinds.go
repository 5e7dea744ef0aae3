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

func (d *decoder) typeMeta(t *metav1.TypeMeta, key []byte) bool {
	switch string(key) {
	case "apiVersion":
		t.APIVersion = d.istr()
	case "kind":
		t.Kind = d.istr()
	default:
		return false
	}
	return true
}

func (d *decoder) pod(p *corev1.Pod) {
	if !d.enterMap() {
		d.fail()
		return
	}
	for k, ok := d.key(); ok; k, ok = d.key() {
		switch string(k) {
		case "metadata":
			d.objectMeta(&p.ObjectMeta)
		case "spec":
			d.podSpec(&p.Spec)
		case "status":
			d.podStatus(&p.Status)
		default:
			if !d.typeMeta(&p.TypeMeta, k) {
				other(d, p, k)
			}
		}
	}
}

func (d *decoder) node(n *corev1.Node) {
	if !d.enterMap() {
		d.fail()
		return
	}
	for k, ok := d.key(); ok; k, ok = d.key() {
		switch string(k) {
		case "metadata":
			d.objectMeta(&n.ObjectMeta)
		case "spec":
			d.nodeSpec(&n.Spec)
		case "status":
			d.nodeStatus(&n.Status)
		default:
			if !d.typeMeta(&n.TypeMeta, k) {
				other(d, n, k)
			}
		}
	}
}

func (d *decoder) pdb(b *policyv1.PodDisruptionBudget) {
	if !d.enterMap() {
		d.fail()
		return
	}
	for k, ok := d.key(); ok; k, ok = d.key() {
		switch string(k) {
		case "metadata":
			d.objectMeta(&b.ObjectMeta)
		case "spec":
			d.pdbSpec(&b.Spec)
		case "status":
			d.pdbStatus(&b.Status)
		default:
			if !d.typeMeta(&b.TypeMeta, k) {
				other(d, b, k)
			}
		}
	}
}

func (d *decoder) objectMeta(m *metav1.ObjectMeta) {
	if !d.enterMap() {
		return
	}
	for k, ok := d.key(); ok; k, ok = d.key() {
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
	if !d.enterMap() {
		return
	}
	for k, ok := d.key(); ok; k, ok = d.key() {
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
	if !d.enterMap() {
		return
	}
	for k, ok := d.key(); ok; k, ok = d.key() {
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
			s.Affinity = d.affinity()
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
	if !d.enterMap() {
		return
	}
	for k, ok := d.key(); ok; k, ok = d.key() {
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
	if !d.enterMap() {
		return
	}
	for k, ok := d.key(); ok; k, ok = d.key() {
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
	if d.kind() == tokNull {
		d.pos++
		return nil
	}
	if d.kind() != tokMap {
		d.fail()
		return nil
	}
	m := make(corev1.ResourceList, d.toks[d.pos].n)
	d.pos++
	for k, ok := d.key(); ok; k, ok = d.key() {
		m[corev1.ResourceName(d.intern(k))] = d.quantity()
	}
	return m
}

func (d *decoder) containerPort(p *corev1.ContainerPort) {
	if !d.enterMap() {
		return
	}
	for k, ok := d.key(); ok; k, ok = d.key() {
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
	if !d.enterMap() {
		return
	}
	for k, ok := d.key(); ok; k, ok = d.key() {
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

func (d *decoder) affinity() *corev1.Affinity {
	a := &corev1.Affinity{}
	if !d.enterMap() {
		return nil
	}
	for k, ok := d.key(); ok; k, ok = d.key() {
		switch string(k) {
		case "nodeAffinity":
			if d.kind() == tokNull {
				d.pos++
				continue
			}
			a.NodeAffinity = &corev1.NodeAffinity{}
			d.nodeAffinity(a.NodeAffinity)
		case "podAffinity":
			if d.kind() == tokNull {
				d.pos++
				continue
			}
			a.PodAffinity = &corev1.PodAffinity{}
			d.podAffinity(&a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution,
				&a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution, a.PodAffinity)
		case "podAntiAffinity":
			if d.kind() == tokNull {
				d.pos++
				continue
			}
			a.PodAntiAffinity = &corev1.PodAntiAffinity{}
			d.podAffinity(&a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution,
				&a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution, a.PodAntiAffinity)
		default:
			other(d, a, k)
		}
	}
	return a
}

// podAffinity reads a PodAffinity or a PodAntiAffinity (p), which have the
// same fields.
func (d *decoder) podAffinity(required *[]corev1.PodAffinityTerm, preferred *[]corev1.WeightedPodAffinityTerm, p any) {
	if !d.enterMap() {
		return
	}
	for k, ok := d.key(); ok; k, ok = d.key() {
		switch string(k) {
		case "requiredDuringSchedulingIgnoredDuringExecution":
			*required = seq(d, (*decoder).podAffinityTerm)
		case "preferredDuringSchedulingIgnoredDuringExecution":
			*preferred = seq(d, func(d *decoder, w *corev1.WeightedPodAffinityTerm) {
				if !d.enterMap() {
					return
				}
				for k, ok := d.key(); ok; k, ok = d.key() {
					switch string(k) {
					case "weight":
						w.Weight = d.int32()
					case "podAffinityTerm":
						d.podAffinityTerm(&w.PodAffinityTerm)
					default:
						other(d, w, k)
					}
				}
			})
		default:
			switch p := p.(type) {
			case *corev1.PodAffinity:
				other(d, p, k)
			case *corev1.PodAntiAffinity:
				other(d, p, k)
			}
		}
	}
}

func (d *decoder) podAffinityTerm(t *corev1.PodAffinityTerm) {
	if !d.enterMap() {
		return
	}
	for k, ok := d.key(); ok; k, ok = d.key() {
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
	if !d.enterMap() {
		return
	}
	for k, ok := d.key(); ok; k, ok = d.key() {
		switch string(k) {
		case "requiredDuringSchedulingIgnoredDuringExecution":
			if d.kind() == tokNull {
				d.pos++
				continue
			}
			sel := &corev1.NodeSelector{}
			a.RequiredDuringSchedulingIgnoredDuringExecution = sel
			if !d.enterMap() {
				continue
			}
			for k, ok := d.key(); ok; k, ok = d.key() {
				if string(k) == "nodeSelectorTerms" {
					sel.NodeSelectorTerms = seq(d, (*decoder).nodeSelectorTerm)
				} else {
					other(d, sel, k)
				}
			}
		case "preferredDuringSchedulingIgnoredDuringExecution":
			a.PreferredDuringSchedulingIgnoredDuringExecution = seq(d, func(d *decoder, p *corev1.PreferredSchedulingTerm) {
				if !d.enterMap() {
					return
				}
				for k, ok := d.key(); ok; k, ok = d.key() {
					switch string(k) {
					case "weight":
						p.Weight = d.int32()
					case "preference":
						d.nodeSelectorTerm(&p.Preference)
					default:
						other(d, p, k)
					}
				}
			})
		default:
			other(d, a, k)
		}
	}
}

func (d *decoder) nodeSelectorTerm(t *corev1.NodeSelectorTerm) {
	if !d.enterMap() {
		return
	}
	for k, ok := d.key(); ok; k, ok = d.key() {
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
	if !d.enterMap() {
		return
	}
	for k, ok := d.key(); ok; k, ok = d.key() {
		switch string(k) {
		case "key":
			r.Key = d.istr()
		case "operator":
			r.Operator = corev1.NodeSelectorOperator(d.istr())
		case "values":
			r.Values = d.strList()
		default:
			other(d, r, k)
		}
	}
}

func (d *decoder) labelSelector() *metav1.LabelSelector {
	if d.kind() == tokNull {
		d.pos++
		return nil
	}
	s := &metav1.LabelSelector{}
	if !d.enterMap() {
		return nil
	}
	for k, ok := d.key(); ok; k, ok = d.key() {
		switch string(k) {
		case "matchLabels":
			s.MatchLabels = d.strMap("")
		case "matchExpressions":
			s.MatchExpressions = seq(d, func(d *decoder, r *metav1.LabelSelectorRequirement) {
				if !d.enterMap() {
					return
				}
				for k, ok := d.key(); ok; k, ok = d.key() {
					switch string(k) {
					case "key":
						r.Key = d.istr()
					case "operator":
						r.Operator = metav1.LabelSelectorOperator(d.istr())
					case "values":
						r.Values = d.strList()
					default:
						other(d, r, k)
					}
				}
			})
		default:
			other(d, s, k)
		}
	}
	return s
}

func (d *decoder) spreadConstraint(c *corev1.TopologySpreadConstraint) {
	if !d.enterMap() {
		return
	}
	for k, ok := d.key(); ok; k, ok = d.key() {
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
	if !d.enterMap() {
		return
	}
	for k, ok := d.key(); ok; k, ok = d.key() {
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
			s.HostIPs = seq(d, func(d *decoder, ip *corev1.HostIP) {
				if !d.enterMap() {
					return
				}
				for k, ok := d.key(); ok; k, ok = d.key() {
					if string(k) == "ip" {
						ip.IP = d.istr()
					} else {
						other(d, ip, k)
					}
				}
			})
		case "podIPs":
			s.PodIPs = seq(d, func(d *decoder, ip *corev1.PodIP) {
				if !d.enterMap() {
					return
				}
				for k, ok := d.key(); ok; k, ok = d.key() {
					if string(k) == "ip" {
						ip.IP = d.str()
					} else {
						other(d, ip, k)
					}
				}
			})
		default:
			other(d, s, k)
		}
	}
}

func (d *decoder) podCondition(c *corev1.PodCondition) {
	if !d.enterMap() {
		return
	}
	for k, ok := d.key(); ok; k, ok = d.key() {
		switch string(k) {
		case "type":
			c.Type = corev1.PodConditionType(d.istr())
		case "status":
			c.Status = corev1.ConditionStatus(d.istr())
		case "lastProbeTime":
			c.LastProbeTime = d.time()
		case "lastTransitionTime":
			c.LastTransitionTime = d.time()
		case "reason":
			c.Reason = d.istr()
		case "message":
			c.Message = d.istr()
		case "observedGeneration":
			c.ObservedGeneration = d.int64()
		default:
			other(d, c, k)
		}
	}
}

func (d *decoder) nodeSpec(s *corev1.NodeSpec) {
	if !d.enterMap() {
		return
	}
	for k, ok := d.key(); ok; k, ok = d.key() {
		switch string(k) {
		case "providerID":
			s.ProviderID = d.str()
		case "taints":
			s.Taints = seq(d, func(d *decoder, t *corev1.Taint) {
				if !d.enterMap() {
					return
				}
				for k, ok := d.key(); ok; k, ok = d.key() {
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
			})
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

func (d *decoder) nodeStatus(s *corev1.NodeStatus) {
	if !d.enterMap() {
		return
	}
	for k, ok := d.key(); ok; k, ok = d.key() {
		switch string(k) {
		case "capacity":
			s.Capacity = d.resourceList()
		case "allocatable":
			s.Allocatable = d.resourceList()
		case "conditions":
			s.Conditions = seq(d, func(d *decoder, c *corev1.NodeCondition) {
				if !d.enterMap() {
					return
				}
				for k, ok := d.key(); ok; k, ok = d.key() {
					switch string(k) {
					case "type":
						c.Type = corev1.NodeConditionType(d.istr())
					case "status":
						c.Status = corev1.ConditionStatus(d.istr())
					case "lastHeartbeatTime":
						c.LastHeartbeatTime = d.time()
					case "lastTransitionTime":
						c.LastTransitionTime = d.time()
					case "reason":
						c.Reason = d.istr()
					case "message":
						c.Message = d.istr()
					default:
						other(d, c, k)
					}
				}
			})
		case "addresses":
			s.Addresses = seq(d, func(d *decoder, a *corev1.NodeAddress) {
				if !d.enterMap() {
					return
				}
				for k, ok := d.key(); ok; k, ok = d.key() {
					switch string(k) {
					case "type":
						a.Type = corev1.NodeAddressType(d.istr())
					case "address":
						a.Address = d.str()
					default:
						other(d, a, k)
					}
				}
			})
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

func (d *decoder) pdbSpec(s *policyv1.PodDisruptionBudgetSpec) {
	if !d.enterMap() {
		return
	}
	for k, ok := d.key(); ok; k, ok = d.key() {
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
	if !d.enterMap() {
		return
	}
	for k, ok := d.key(); ok; k, ok = d.key() {
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
