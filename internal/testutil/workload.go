package testutil

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Deployment returns a Deployment of replicas pods labelled app=name, whose pod
// template is built like Pod with opts.
func Deployment(name string, replicas int32, opts ...PodOption) *appsv1.Deployment {
	tmpl := Pod(name, append([]PodOption{WithLabels("app", name)}, opts...)...)
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tmpl.Namespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: tmpl.Labels, Annotations: tmpl.Annotations},
				Spec:       tmpl.Spec,
			},
		},
	}
}

// PDBOption changes a PodDisruptionBudget under construction.
type PDBOption func(*policyv1.PodDisruptionBudget)

// PDB returns a PodDisruptionBudget in namespace "default" over the pods
// labelled app=app, changed by opts (MaxUnavailable or MinAvailable).
func PDB(name, app string, opts ...PDBOption) *policyv1.PodDisruptionBudget {
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
		},
	}
	for _, o := range opts {
		o(pdb)
	}
	return pdb
}

// MaxUnavailable sets spec.maxUnavailable.
func MaxUnavailable(n int32) PDBOption {
	return func(p *policyv1.PodDisruptionBudget) { v := intstr.FromInt32(n); p.Spec.MaxUnavailable = &v }
}

// MinAvailable sets spec.minAvailable.
func MinAvailable(n int32) PDBOption {
	return func(p *policyv1.PodDisruptionBudget) { v := intstr.FromInt32(n); p.Spec.MinAvailable = &v }
}

// StatefulSet returns a StatefulSet of replicas pods labelled app=name, whose
// pod template is built like Pod with opts; its pods start in parallel.
func StatefulSet(name string, replicas int32, opts ...PodOption) *appsv1.StatefulSet {
	d := Deployment(name, replicas, opts...)
	return &appsv1.StatefulSet{
		ObjectMeta: d.ObjectMeta,
		Spec: appsv1.StatefulSetSpec{
			Replicas:            &replicas,
			Selector:            d.Spec.Selector,
			Template:            d.Spec.Template,
			ServiceName:         name,
			PodManagementPolicy: appsv1.ParallelPodManagement,
		},
	}
}
