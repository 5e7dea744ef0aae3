package snapshot

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// kitchenSink are objects with most fields of the kinds the decoder reads,
// in kubectl's YAML layout, and whether the decoder reads each (else it
// leaves it to the reference decoder).
var kitchenSink = []struct {
	name string
	doc  string
	fast bool
}{
	{"pod", `apiVersion: v1
kind: Pod
metadata:
  annotations:
    kubectl.kubernetes.io/last-applied-configuration: |
      {"apiVersion":"v1","kind":"Pod"}
    spotter.dev/do-not-move: "true"
  creationTimestamp: "2026-01-01T00:00:00Z"
  deletionGracePeriodSeconds: 30
  deletionTimestamp: "2026-01-02T00:00:00Z"
  finalizers:
  - example.com/x
  generateName: web-7d9f8c-
  generation: 3
  labels:
    app: web
    pod-template-hash: 7d9f8c
  managedFields:
  - apiVersion: v1
    fieldsType: FieldsV1
    fieldsV1:
      f:metadata:
        f:labels: {}
    manager: kube-controller-manager
    operation: Update
    time: "2026-01-01T00:00:00Z"
  name: web-7d9f8c-abcde
  namespace: shop
  ownerReferences:
  - apiVersion: apps/v1
    blockOwnerDeletion: true
    controller: true
    kind: ReplicaSet
    name: web-7d9f8c
    uid: 1b4e28ba-2fa1-11d2-883f-0016d3cca427
  resourceVersion: "12345"
  selfLink: /api/v1/namespaces/shop/pods/web-7d9f8c-abcde
  uid: 6ba7b810-9dad-11d1-80b4-00c04fd430c8
spec:
  affinity:
    nodeAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
      - preference:
          matchExpressions:
          - key: zone
            operator: In
            values:
            - a
            - b
        weight: 10
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
        - matchExpressions:
          - key: kubernetes.io/os
            operator: In
            values:
            - linux
          matchFields:
          - key: metadata.name
            operator: NotIn
            values:
            - node-9
    podAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
      - podAffinityTerm:
          labelSelector:
            matchExpressions:
            - key: app
              operator: Exists
          namespaceSelector: {}
          topologyKey: topology.kubernetes.io/zone
        weight: 50
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - labelSelector:
          matchLabels:
            app: web
        matchLabelKeys:
        - pod-template-hash
        mismatchLabelKeys:
        - other
        namespaces:
        - shop
        topologyKey: kubernetes.io/hostname
  automountServiceAccountToken: false
  containers:
  - args:
    - --port=8080
    command:
    - /server
    env:
    - name: A
      value: b
    - name: POD
      valueFrom:
        fieldRef:
          apiVersion: v1
          fieldPath: metadata.name
    image: example/web:1.2
    imagePullPolicy: IfNotPresent
    livenessProbe:
      failureThreshold: 3
      httpGet:
        path: /healthz
        port: http
        scheme: HTTP
      periodSeconds: 10
    name: web
    ports:
    - containerPort: 8080
      hostPort: 80
      name: http
      protocol: TCP
    resources:
      limits:
        cpu: "2"
        memory: 1Gi
        nvidia.com/gpu: "1"
      requests:
        cpu: 250m
        ephemeral-storage: 1Gi
        memory: 512Mi
    securityContext:
      runAsNonRoot: true
    terminationMessagePath: /dev/termination-log
    terminationMessagePolicy: File
    volumeMounts:
    - mountPath: /data
      name: data
  dnsPolicy: ClusterFirst
  enableServiceLinks: true
  hostNetwork: false
  initContainers:
  - image: example/sidecar:1
    name: sidecar
    resources:
      requests:
        cpu: 10m
    restartPolicy: Always
  nodeName: node-1
  nodeSelector:
    kubernetes.io/os: linux
  overhead:
    cpu: 100m
  preemptionPolicy: PreemptLowerPriority
  priority: 1000
  priorityClassName: high
  restartPolicy: Always
  schedulerName: default-scheduler
  securityContext: {}
  serviceAccount: web
  serviceAccountName: web
  terminationGracePeriodSeconds: 30
  tolerations:
  - effect: NoExecute
    key: node.kubernetes.io/not-ready
    operator: Exists
    tolerationSeconds: 300
  - key: spot
    operator: Equal
    value: "true"
  topologySpreadConstraints:
  - labelSelector:
      matchLabels:
        app: web
    matchLabelKeys:
    - pod-template-hash
    maxSkew: 1
    minDomains: 2
    nodeAffinityPolicy: Honor
    nodeTaintsPolicy: Ignore
    topologyKey: topology.kubernetes.io/zone
    whenUnsatisfiable: DoNotSchedule
  volumes:
  - name: data
    persistentVolumeClaim:
      claimName: data-web
  - name: kube-api-access
    projected:
      defaultMode: 420
      sources:
      - serviceAccountToken:
          expirationSeconds: 3607
          path: token
unknownTopLevel:
  x: 1
status:
  conditions:
  - lastProbeTime: null
    lastTransitionTime: "2026-01-01T00:00:00Z"
    status: "True"
    type: Ready
  - lastProbeTime: null
    lastTransitionTime: "2026-01-01T00:00:00Z"
    message: 'containers with unready status: [web]'
    observedGeneration: 3
    reason: ContainersNotReady
    status: "False"
    type: ContainersReady
  containerStatuses:
  - containerID: containerd://abc
    image: example/web:1.2
    imageID: example/web@sha256:0123
    lastState: {}
    name: web
    ready: true
    resources:
      requests:
        cpu: 250m
    restartCount: 0
    started: true
    state:
      running:
        startedAt: "2026-01-01T00:00:01Z"
  hostIP: 10.0.0.1
  hostIPs:
  - ip: 10.0.0.1
  phase: Running
  podIP: 10.1.0.5
  podIPs:
  - ip: 10.1.0.5
  qosClass: Burstable
  startTime: "2026-01-01T00:00:00Z"
`, true},
	{"node", `apiVersion: v1
kind: Node
metadata:
  annotations:
    node.alpha.kubernetes.io/ttl: "0"
  labels:
    kubernetes.io/hostname: node-1
  name: node-1
spec:
  podCIDR: 10.1.0.0/24
  podCIDRs:
  - 10.1.0.0/24
  providerID: aws:///us-east-1a/i-0123
  taints:
  - effect: NoSchedule
    key: spot
    value: "true"
  - effect: NoExecute
    key: node.kubernetes.io/unreachable
    timeAdded: "2026-01-01T00:00:00Z"
  unschedulable: true
status:
  addresses:
  - address: 10.0.0.1
    type: InternalIP
  allocatable:
    cpu: 3920m
    ephemeral-storage: "95551679124"
    hugepages-2Mi: "0"
    memory: 15482Mi
    pods: "110"
  capacity:
    cpu: "4"
    memory: 16073Mi
    pods: "110"
  conditions:
  - lastHeartbeatTime: "2026-01-01T00:00:00Z"
    lastTransitionTime: "2026-01-01T00:00:00Z"
    message: kubelet is posting ready status
    reason: KubeletReady
    status: "True"
    type: Ready
  daemonEndpoints:
    kubeletEndpoint:
      Port: 10250
  images:
  - names:
    - example/web@sha256:0123
    - example/web:1.2
    sizeBytes: 12345678
  nodeInfo:
    architecture: amd64
    kubeletVersion: v1.37.1
  volumesInUse:
  - kubernetes.io/csi/ebs^vol-1
`, true},
	{"pdb", `apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: web
  namespace: shop
spec:
  minAvailable: 50%
  selector:
    matchExpressions:
    - key: app
      operator: In
      values:
      - web
  unhealthyPodEvictionPolicy: AlwaysAllow
status:
  conditions:
  - lastTransitionTime: "2026-01-01T00:00:00Z"
    message: ""
    observedGeneration: 1
    reason: SufficientPods
    status: "True"
    type: DisruptionAllowed
  currentHealthy: 3
  desiredHealthy: 2
  disruptedPods:
    web-1: "2026-01-01T00:00:00Z"
  disruptionsAllowed: 1
  expectedPods: 3
  observedGeneration: 1
`, true},
	{"pdb max unavailable", "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata:\n  name: b\nspec:\n  maxUnavailable: 1\n  selector: null\n", true},
	{"nulls", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels: null\n  namespace: null\nspec:\n  affinity: null\n  containers: []\n  nodeName: ~\n  priority: null\nstatus: null\n", true},
	{"other kind", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  a: b\n", true},
	{"case-folded field", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  NodeName: n\n", false},
	{"case-folded kind", "apiVersion: v1\nKind: Pod\nmetadata:\n  name: p\n", false},
	{"service", "apiVersion: v1\nkind: Service\nmetadata:\n  name: s\n", false},
	{"label null", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels:\n    a: null\n", false},
	{"wrong type", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  nodeName: 5\n", false},
	{"float priority", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  priority: 1.5\n", false},
	{"bad quantity", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - name: c\n    resources:\n      requests:\n        cpu: lots\n", false},
}

// jsonSink are JSON objects for the decoder, and whether it reads each.
var jsonSink = []struct {
	name string
	doc  string
	fast bool
}{
	{"escapes", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p\u00e9\n","labels":{"a\"b":"\ud83d\ude00"}},"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":0.5,"memory":"1.5Gi","ephemeral-storage":100}}}]}}`, true},
	{"escaped quantity", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"\u0031"}}}]}}`, false},
	{"escape in a delegated field", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"c","env":[{"name":"A","value":"\""}]}]}}`, false},
	{"duplicate key", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"nodeName":"a","nodeName":"b"}}`, false},
	{"case-folded key", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"NodeName":"a"}}`, false},
	{"non-ASCII key", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"nodeName":"a","\u017fpec":1}}`, false},
	{"invalid UTF-8", "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\xff\"}}", false},
	{"lone surrogate", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p\ud800"}}`, false},
	{"intorstring", `{"apiVersion":"policy/v1","kind":"PodDisruptionBudget","metadata":{"name":"b"},"spec":{"minAvailable":"5\u0025"}}`, true},
	{"big number", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","generation":12345678901234567890}}`, false},
	{"white space", " \n{ \"apiVersion\" : \"v1\" , \"kind\":\"Node\",\"metadata\":{\"name\":\"n\"} }\n", true},
}

// checkDecoder decodes the object doc (YAML or JSON) with the decoder and
// the reference way, and fails unless they agree or the decoder left it to
// the reference. It reports whether the decoder read it.
func checkDecoder(t *testing.T, r *objectReader, doc []byte, isJSON bool) (fast bool) {
	t.Helper()
	var toks []token
	var ok bool
	if isJSON {
		toks, ok = r.json.parse(doc)
	} else {
		toks, ok = r.yaml.parse(doc)
	}
	if !ok {
		return false
	}
	ref := doc
	if !isJSON {
		ref, _ = appendJSON(nil, toks, 0)
	}
	got, ok := r.d.decodeFast(toks)
	if !ok {
		return false
	}
	want, err := decodeItem(ref, true)
	if err != nil {
		t.Fatalf("%s\nthe decoder read what the reference refuses: %v", doc, err)
	}
	if want != nil {
		compact(want)
	}
	if !reflect.DeepEqual(got, want) {
		gj, _ := json.Marshal(got)
		wj, _ := json.Marshal(want)
		t.Fatalf("%s\ndecoder   %s\nreference %s", doc, gj, wj)
	}
	return true
}

// The decoder reads what the reference decoder (decodeItem, then compact)
// reads, from YAML and from JSON: the objects of a generated cluster, all of
// them by itself, and objects with most fields of their kinds.
func TestDecoderAgrees(t *testing.T) {
	r := newObjectReader()
	for _, tc := range kitchenSink {
		t.Run(tc.name, func(t *testing.T) {
			if fast := checkDecoder(t, r, []byte(tc.doc), false); fast != tc.fast {
				t.Errorf("YAML: decoder read it: %v, want %v", fast, tc.fast)
			}
			j, err := yaml.YAMLToJSON([]byte(tc.doc))
			if err != nil {
				t.Fatal(err)
			}
			if fast := checkDecoder(t, r, j, true); fast != tc.fast {
				t.Errorf("JSON: decoder read it: %v, want %v", fast, tc.fast)
			}
		})
	}
	for _, tc := range jsonSink {
		t.Run(tc.name, func(t *testing.T) {
			if fast := checkDecoder(t, r, []byte(tc.doc), true); fast != tc.fast {
				t.Errorf("decoder read it: %v, want %v", fast, tc.fast)
			}
		})
	}
	list, err := yaml.YAMLToJSON(generatedYAML(t, 20))
	if err != nil {
		t.Fatal(err)
	}
	var l struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(list, &l); err != nil {
		t.Fatal(err)
	}
	for i, item := range l.Items {
		doc, err := yaml.JSONToYAML(item)
		if err != nil {
			t.Fatal(err)
		}
		if !checkDecoder(t, r, doc, false) || !checkDecoder(t, r, item, true) {
			t.Fatalf("item %d of the generated cluster left to the reference:\n%s", i, doc)
		}
	}
}

// The decoder's strings outlive the input and the tokens: a decoded object
// is the same after its input and the decoder's buffers are overwritten.
func TestDecoderCopiesStrings(t *testing.T) {
	r := newObjectReader()
	doc := []byte(kitchenSink[0].doc)
	toks, ok := r.yaml.parse(doc)
	if !ok {
		t.Fatal("not read by the fast path")
	}
	got, ok := r.d.decodeFast(toks)
	if !ok {
		t.Fatal("not read by the decoder")
	}
	before, _ := json.Marshal(got)
	for i := range doc {
		doc[i] = 'x'
	}
	for range 3 {
		other := strings.ReplaceAll(kitchenSink[1].doc, "node-1", "node-2")
		toks, _ := r.yaml.parse([]byte(other))
		r.d.decodeFast(toks)
	}
	if after, _ := json.Marshal(got); string(after) != string(before) {
		t.Errorf("the object changed:\nbefore %s\nafter  %s", before, after)
	}
}

// Whatever the decoder reads, from YAML or JSON, the reference reads alike.
func FuzzDecoder(f *testing.F) {
	for _, tc := range kitchenSink {
		f.Add([]byte(tc.doc), false)
	}
	for _, tc := range jsonSink {
		f.Add([]byte(tc.doc), true)
	}
	r := newObjectReader()
	f.Fuzz(func(t *testing.T, doc []byte, isJSON bool) {
		checkDecoder(t, r, doc, isJSON)
	})
}
