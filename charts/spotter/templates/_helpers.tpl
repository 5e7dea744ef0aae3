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

{{/* The agent's metrics port and scheme, from config.agent. */}}
{{- define "spotter.agent.metricsPort" -}}
{{- include "spotter.port" (dig "agent" "metricsBindAddress" ":9102" (.Values.config | default dict)) -}}
{{- end -}}

{{- define "spotter.agent.metricsScheme" -}}
{{- if eq (dig "agent" "metricsAuthentication" "Kubernetes" (.Values.config | default dict)) "None" -}}http{{- else -}}https{{- end -}}
{{- end -}}

{{/* Whether leader election is on (config.manager.leaderElection.enabled, default true): "true" or "". */}}
{{- define "spotter.leaderElection" -}}
{{- $enabled := dig "manager" "leaderElection" "enabled" true (.Values.config | default dict) -}}
{{- if $enabled -}}true{{- end -}}
{{- end -}}

{{/*
Checks across values that the schema cannot express; each failure says what
to change. Included by the controller Deployment, so every render runs it.
*/}}
{{- define "spotter.validate" -}}
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
{{- if and .Values.serviceMonitor.enabled .Values.podMonitor.enabled -}}
{{- fail "serviceMonitor.enabled and podMonitor.enabled are both true: Prometheus would scrape every target twice; enable one" -}}
{{- end -}}
{{- if and .Values.podMonitor.enabled (not .Values.podMonitor.bearerTokenSecret.name) -}}
{{- if or (eq (include "spotter.controller.metricsScheme" .) "https") (and .Values.agent.enabled (eq (include "spotter.agent.metricsScheme" .) "https")) -}}
{{- fail "podMonitor.enabled needs podMonitor.bearerTokenSecret.name: Spotter's metrics are readable only with a bearer token (a PodMonitor cannot use Prometheus' own token file); name a Secret holding a token allowed to get /metrics, use serviceMonitor instead, or set config.manager.metricsAuthentication and config.agent.metricsAuthentication to None (docs/metrics.md)" -}}
{{- end -}}
{{- end -}}
{{- end -}}
