{{/*
Names, labels, images and the rendered configuration, shared by every template
of the chart (the RBAC, ServiceAccount and admission policy templates too).
*/}}

{{/* The chart's name, or nameOverride. */}}
{{- define "spotter.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The prefix of every object's name: fullnameOverride, else the release name
when it already holds the chart's name ("spotter" for release "spotter"), else
RELEASE-spotter. Kept at 40 characters so that the longest suffix
("-controller-metrics") still fits in 63.
*/}}
{{- define "spotter.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Names of the objects (release "spotter": spotter-controller, spotter-agent, spotter-config). */}}
{{- define "spotter.controller.fullname" -}}
{{- printf "%s-controller" (include "spotter.fullname" .) -}}
{{- end -}}

{{- define "spotter.agent.fullname" -}}
{{- printf "%s-agent" (include "spotter.fullname" .) -}}
{{- end -}}

{{- define "spotter.configMapName" -}}
{{- printf "%s-config" (include "spotter.fullname" .) -}}
{{- end -}}

{{/* chart-version, as the helm.sh/chart label takes it. */}}
{{- define "spotter.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels of every object. */}}
{{- define "spotter.labels" -}}
helm.sh/chart: {{ include "spotter.chart" . }}
app.kubernetes.io/name: {{ include "spotter.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ include "spotter.imageTag" . | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: spotter
{{- end -}}

{{/* Selector labels of the controller's pods. */}}
{{- define "spotter.controller.selectorLabels" -}}
app.kubernetes.io/name: {{ include "spotter.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller
{{- end -}}

{{- define "spotter.controller.labels" -}}
{{ include "spotter.labels" . }}
app.kubernetes.io/component: controller
{{- end -}}

{{/* Selector labels of the agent's pods. */}}
{{- define "spotter.agent.selectorLabels" -}}
app.kubernetes.io/name: {{ include "spotter.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: agent
{{- end -}}

{{- define "spotter.agent.labels" -}}
{{ include "spotter.labels" . }}
app.kubernetes.io/component: agent
{{- end -}}

{{/*
ServiceAccount names. With serviceAccount.create (the default) the chart makes
them: FULLNAME-controller and FULLNAME-agent unless serviceAccount.name says
otherwise; without it, serviceAccount.name names an existing account (default:
the namespace's "default").
*/}}
{{- define "spotter.controller.serviceAccountName" -}}
{{- if .Values.controller.serviceAccount.create -}}
{{- default (include "spotter.controller.fullname" .) .Values.controller.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.controller.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "spotter.agent.serviceAccountName" -}}
{{- if .Values.agent.serviceAccount.create -}}
{{- default (include "spotter.agent.fullname" .) .Values.agent.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.agent.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The images' tag: image.tag, else the chart's appVersion. */}}
{{- define "spotter.imageTag" -}}
{{- default .Chart.AppVersion .Values.image.tag -}}
{{- end -}}

{{/*
An image reference: image.repository/NAME:TAG, or @DIGEST when a digest is
given. Called with (dict "root" $ "image" .Values.controller.image).
*/}}
{{- define "spotter.image" -}}
{{- $repo := required "image.repository is required: the repository prefix the images were pushed to, the PUSH value of `make image PUSH=REPO` (the chart runs REPO/spotter and REPO/spotter-agent)" .root.Values.image.repository | trimSuffix "/" -}}
{{- if .image.digest -}}
{{- printf "%s/%s@%s" $repo .image.name .image.digest -}}
{{- else -}}
{{- printf "%s/%s:%s" $repo .image.name (include "spotter.imageTag" .root) -}}
{{- end -}}
{{- end -}}

{{/*
Where the configuration file and the metrics certificates are mounted: two
directories side by side, never one inside the other (a mount point inside a
ConfigMap volume cannot be created).
*/}}
{{- define "spotter.configDir" -}}/etc/spotter/config{{- end -}}
{{- define "spotter.configPath" -}}/etc/spotter/config/config.yaml{{- end -}}
{{- define "spotter.metricsCertDir" -}}/etc/spotter/metrics-tls{{- end -}}

{{/*
The SpotterConfiguration file: apiVersion and kind, then the config value,
with manager.metricsCertDir and agent.metricsCertDir pointed at the mounted
Secrets when controller.metrics.certSecretName or agent.metrics.certSecretName
is set.
*/}}
{{- define "spotter.config" -}}
{{- $config := deepCopy (.Values.config | default dict) -}}
{{- if .Values.controller.metrics.certSecretName -}}
{{- $manager := get $config "manager" | default dict -}}
{{- $dir := get $manager "metricsCertDir" -}}
{{- if and $dir (ne $dir (include "spotter.metricsCertDir" .)) -}}
{{- fail (printf "config.manager.metricsCertDir is %q but controller.metrics.certSecretName mounts the certificate at %s: leave config.manager.metricsCertDir unset" $dir (include "spotter.metricsCertDir" .)) -}}
{{- end -}}
{{- $_ := set $manager "metricsCertDir" (include "spotter.metricsCertDir" .) -}}
{{- $_ := set $config "manager" $manager -}}
{{- end -}}
{{- if .Values.agent.metrics.certSecretName -}}
{{- $agent := get $config "agent" | default dict -}}
{{- $dir := get $agent "metricsCertDir" -}}
{{- if and $dir (ne $dir (include "spotter.metricsCertDir" .)) -}}
{{- fail (printf "config.agent.metricsCertDir is %q but agent.metrics.certSecretName mounts the certificate at %s: leave config.agent.metricsCertDir unset" $dir (include "spotter.metricsCertDir" .)) -}}
{{- end -}}
{{- $_ := set $agent "metricsCertDir" (include "spotter.metricsCertDir" .) -}}
{{- $_ := set $config "agent" $agent -}}
{{- end -}}
apiVersion: spotter.dev/v1alpha1
kind: SpotterConfiguration
{{- if $config }}
{{ toYaml $config }}
{{- end }}
{{- end -}}

{{/*
The port of a bind address as the configuration writes it (":8443",
"0.0.0.0:8443", "[::]:8443"); empty for "0" (turned off). Called with the
address.
*/}}
{{- define "spotter.port" -}}
{{- if and . (ne (toString .) "0") -}}
{{- regexFind "[0-9]+$" (toString .) -}}
{{- end -}}
{{- end -}}

{{/* The controller's ports and metrics scheme, from config.manager (defaults of the configuration API when unset). */}}
{{- define "spotter.controller.metricsPort" -}}
{{- include "spotter.port" (dig "manager" "metricsBindAddress" ":8443" (.Values.config | default dict)) -}}
{{- end -}}

{{- define "spotter.controller.healthPort" -}}
{{- include "spotter.port" (dig "manager" "healthProbeBindAddress" ":8081" (.Values.config | default dict)) -}}
{{- end -}}

{{- define "spotter.controller.metricsScheme" -}}
{{- if eq (dig "manager" "metricsAuthentication" "Kubernetes" (.Values.config | default dict)) "None" -}}http{{- else -}}https{{- end -}}
{{- end -}}

{{/* The agent's ports and metrics scheme, from config.agent. */}}
{{- define "spotter.agent.metricsPort" -}}
{{- include "spotter.port" (dig "agent" "metricsBindAddress" ":9102" (.Values.config | default dict)) -}}
{{- end -}}

{{- define "spotter.agent.healthPort" -}}
{{- include "spotter.port" (dig "agent" "healthProbeBindAddress" ":9103" (.Values.config | default dict)) -}}
{{- end -}}

{{- define "spotter.agent.metricsScheme" -}}
{{- if eq (dig "agent" "metricsAuthentication" "Kubernetes" (.Values.config | default dict)) "None" -}}http{{- else -}}https{{- end -}}
{{- end -}}

{{/*
The well-known labels that mark a node spot (internal/classify), each with the
value that means spot (none: the label's presence does). Cluster API's
cluster.x-k8s.io/interruptible, true with any value but "false", is added by
the two definitions below. The agent runs where one of them says spot; the
controller where none does.
*/}}
{{- define "spotter.spotLabels" -}}
- [karpenter.sh/capacity-type, spot]
- [eks.amazonaws.com/capacityType, SPOT]
- [cloud.google.com/gke-spot, "true"]
- [cloud.google.com/gke-preemptible, "true"]
- [kubernetes.azure.com/scalesetpriority, spot]
- [node.kubernetes.io/lifecycle, spot]
- [node-role.kubernetes.io/spot-worker]
{{- end -}}

{{/* nodeSelectorTerms of spot nodes: one term a label (terms are ORed). */}}
{{- define "spotter.spotTerms" -}}
{{- range (include "spotter.spotLabels" . | fromYamlArray) }}
- matchExpressions:
    - key: {{ index . 0 }}
      {{- if gt (len .) 1 }}
      operator: In
      values: [{{ index . 1 | quote }}]
      {{- else }}
      operator: Exists
      {{- end }}
{{- end }}
# Cluster API writes the label with an empty value; any value
# but "false" means interruptible.
- matchExpressions:
    - key: cluster.x-k8s.io/interruptible
      operator: Exists
    - key: cluster.x-k8s.io/interruptible
      operator: NotIn
      values: ["false"]
{{- end -}}

{{/*
nodeSelectorTerms of nodes no label marks spot: none of the labels, and
Cluster API's label absent or "false" (two terms, ORed).
*/}}
{{- define "spotter.notSpotTerms" -}}
{{- $labels := include "spotter.spotLabels" . | fromYamlArray -}}
{{- range $interruptible := list "DoesNotExist" "In" }}
- matchExpressions:
  {{- range $labels }}
    - key: {{ index . 0 }}
      {{- if gt (len .) 1 }}
      operator: NotIn
      values: [{{ index . 1 | quote }}]
      {{- else }}
      operator: DoesNotExist
      {{- end }}
  {{- end }}
    - key: cluster.x-k8s.io/interruptible
      operator: {{ $interruptible }}
      {{- if eq $interruptible "In" }}
      values: ["false"]
      {{- end }}
{{- end }}
{{- end -}}

{{/*
Whether spot-first acts: config.spotFirst.enabled, and neither its own dryRun
nor config.dryRun. Only then are its gate's policy, the policy on the
controller's pod writes and its pod grants rendered. "true" or "".
*/}}
{{- define "spotter.spotFirstActive" -}}
{{- $sf := .Values.config.spotFirst | default dict -}}
{{- if and ($sf.enabled | default false) (not ($sf.dryRun | default false)) (not (.Values.config.dryRun | default false)) -}}true{{- end -}}
{{- end -}}

{{/*
Whether the agent runs in the node's network namespace: "true" or "".
agent.hostNetwork auto means yes unless the agent's cloud is azure (Azure's
instance metadata service answers pods; AWS's and GKE's may not: see the
DaemonSet).
*/}}
{{- define "spotter.agent.hostNetwork" -}}
{{- $v := .Values.agent.hostNetwork -}}
{{- if eq (toString $v) "auto" -}}
{{- $cloud := .Values.agent.cloud | default (dig "agent" "cloud" "auto" (.Values.config | default dict)) -}}
{{- if ne $cloud "azure" -}}true{{- end -}}
{{- else if $v -}}true{{- end -}}
{{- end -}}

{{/*
The checksum of what the agent reads of its configuration file (agent, drain,
dryRun; internal/agent/app) and of its metrics certificate's mount: the
DaemonSet's pods roll when it changes, and only then.
*/}}
{{- define "spotter.agent.configChecksum" -}}
{{- $config := .Values.config | default dict -}}
{{- dict "agent" (get $config "agent") "drain" (get $config "drain") "dryRun" (get $config "dryRun") "metricsCert" .Values.agent.metrics.certSecretName | toJson | sha256sum -}}
{{- end -}}

{{/* Whether leader election is on (config.manager.leaderElection.enabled, default true): "true" or "". */}}
{{- define "spotter.leaderElection" -}}
{{- $enabled := dig "manager" "leaderElection" "enabled" true (.Values.config | default dict) -}}
{{- if $enabled -}}true{{- end -}}
{{- end -}}

{{/*
Whether the chart makes the metrics scraper's token (metrics-scraper.yaml):
"true" when an enabled ServiceMonitor or PodMonitor scrapes over HTTPS and
its bearerTokenSecret names no Secret of the operator's.
*/}}
{{- define "spotter.metricsScraper" -}}
{{- $https := or (eq (include "spotter.controller.metricsScheme" .) "https") (and .Values.agent.enabled (eq (include "spotter.agent.metricsScheme" .) "https")) -}}
{{- $monitor := ternary .Values.serviceMonitor .Values.podMonitor .Values.serviceMonitor.enabled -}}
{{- if and $https $monitor.enabled (not $monitor.bearerTokenSecret.name) -}}true{{- end -}}
{{- end -}}

{{/*
The monitors' authorization over HTTPS: the Prometheus Operator's
authorization field with the token of the Secret named by
MONITOR.bearerTokenSecret, or of the chart's metrics scraper. Called with
(dict "root" $ "secret" .Values.serviceMonitor.bearerTokenSecret).
*/}}
{{- define "spotter.monitorAuthorization" -}}
authorization:
  type: Bearer
  credentials:
    name: {{ .secret.name | default (printf "%s-metrics-scraper" (include "spotter.fullname" .root)) }}
    key: {{ ternary .secret.key "token" (not (empty .secret.name)) }}
{{- end -}}

{{/*
Checks across values that the schema cannot express; each failure says what
to change. Included by the controller Deployment, so every render runs it.
*/}}
{{- define "spotter.validate" -}}
{{- $kube := .Capabilities.KubeVersion.Version -}}
{{- if semverCompare "<1.32.0-0" $kube -}}
{{- fail (printf "Spotter needs Kubernetes 1.32 or later, this cluster is %s: the agent's admission policies hold each agent to the node named in its token's authentication.kubernetes.io/node-name claim, which bound tokens carry from 1.32 (a beta feature before)" $kube) -}}
{{- end -}}
{{- if and (include "spotter.spotFirstActive" .) (semverCompare "<1.36.0-0" $kube) -}}
{{- fail (printf "config.spotFirst.enabled needs Kubernetes 1.36 or later, this cluster is %s: the scheduling gate is put on new pods by a MutatingAdmissionPolicy (admissionregistration.k8s.io/v1, from 1.36); turn spot-first off, or set config.spotFirst.dryRun to log its decisions without the gate" $kube) -}}
{{- end -}}
{{- if and (gt (int .Values.controller.replicas) 1) (not (include "spotter.leaderElection" .)) -}}
{{- fail (printf "controller.replicas is %d but config.manager.leaderElection.enabled is false: replicas would act at once and drain nodes twice; set controller.replicas to 1 or turn leader election on" (int .Values.controller.replicas)) -}}
{{- end -}}
{{- $pdb := .Values.controller.podDisruptionBudget -}}
{{- if and $pdb.enabled (gt (int .Values.controller.replicas) 1) (ge (int $pdb.minAvailable) (int .Values.controller.replicas)) -}}
{{- fail (printf "controller.podDisruptionBudget.minAvailable is %d with %d replicas: the budget would refuse every eviction of a controller pod and block the drain of its node; keep it below controller.replicas" (int $pdb.minAvailable) (int .Values.controller.replicas)) -}}
{{- end -}}
{{- $fileCloud := dig "agent" "cloud" "" (.Values.config | default dict) -}}
{{- if and $fileCloud .Values.agent.cloud (ne $fileCloud .Values.agent.cloud) -}}
{{- fail (printf "agent.cloud is %q but config.agent.cloud is %q: the agent's --cloud flag (agent.cloud) would override the file; set one of them" .Values.agent.cloud $fileCloud) -}}
{{- end -}}
{{- if and .Values.agent.enabled (eq (include "spotter.controller.serviceAccountName" .) (include "spotter.agent.serviceAccountName" .)) -}}
{{- fail (printf "the controller and the agent would both run as the ServiceAccount %q: the agent's admission policies would hold the controller to one node, and every agent would hold the controller's rights; give each its own (controller.serviceAccount.name and agent.serviceAccount.name, or serviceAccount.create)" (include "spotter.agent.serviceAccountName" .)) -}}
{{- end -}}
{{- if and .Values.serviceMonitor.enabled .Values.podMonitor.enabled -}}
{{- fail "serviceMonitor.enabled and podMonitor.enabled are both true: Prometheus would scrape every target twice; enable one" -}}
{{- end -}}
{{- end -}}
