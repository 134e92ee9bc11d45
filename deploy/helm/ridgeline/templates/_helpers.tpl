{{/* The chart's name, or nameOverride. */}}
{{- define "ridgeline.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Object names: fullnameOverride, else the release name when it contains the chart's name, else
<release>-<name>. Truncated to 63 characters (DNS label).
*/}}
{{- define "ridgeline.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "ridgeline.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels on every object. */}}
{{- define "ridgeline.labels" -}}
helm.sh/chart: {{ include "ridgeline.chart" . }}
{{ include "ridgeline.selectorLabels" . }}
app.kubernetes.io/part-of: ridgeline
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* What the DaemonSet, Service and ServiceMonitor select on: two releases never overlap. */}}
{{- define "ridgeline.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ridgeline.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "ridgeline.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "ridgeline.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "ridgeline.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}
{{- end }}

{{/* The node-local Service in front of dcgm-exporter: rendered for the scrape source only. */}}
{{- define "ridgeline.dcgmExporterService.enabled" -}}
{{- if and (eq .Values.source.mode "scrape") .Values.dcgmExporter.nodeLocalService.enabled }}true{{ end }}
{{- end }}

{{- define "ridgeline.dcgmExporterService.name" -}}
{{- printf "%s-dcgm-exporter" (include "ridgeline.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* source.scrapeUrl, else the node-local Service's URL. */}}
{{- define "ridgeline.scrapeUrl" -}}
{{- if .Values.source.scrapeUrl }}
{{- .Values.source.scrapeUrl }}
{{- else if include "ridgeline.dcgmExporterService.enabled" . }}
{{- $svc := .Values.dcgmExporter.nodeLocalService }}
{{- printf "http://%s.%s.svc:%d/metrics" (include "ridgeline.dcgmExporterService.name" .) $svc.namespace (int $svc.port) }}
{{- else }}
{{- fail "source.mode scrape needs source.scrapeUrl, or dcgmExporter.nodeLocalService.enabled=true" }}
{{- end }}
{{- end }}

{{/* Kubelet attribution: the nvml source always uses it (its samples carry no pod labels). */}}
{{- define "ridgeline.kubeletAttribution" -}}
{{- if or .Values.kubeletAttribution.enabled (eq .Values.source.mode "nvml") }}true{{ end }}
{{- end }}

{{/*
The Pod Security level the pods meet (kubernetes.io/docs/concepts/security/pod-security-standards):
a hostPath (kubelet attribution), CAP_SYS_ADMIN (nvml) or hostNetwork are outside baseline, so
"privileged"; otherwise "restricted".
*/}}
{{- define "ridgeline.podSecurityLevel" -}}
{{- if or (include "ridgeline.kubeletAttribution" .) .Values.hostNetwork }}privileged{{ else }}restricted{{ end }}
{{- end }}

{{/* The runbook links files/rules/ carry (deploy/names.yaml runbookUrlBase; tests/test_helm.py checks). */}}
{{- define "ridgeline.shippedRunbookUrlBase" -}}
https://github.com/ridgeline-dev/ridgeline/blob/main/docs/runbooks.md
{{- end }}
