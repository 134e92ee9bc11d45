"""The Helm chart deploy/helm/ridgeline, derived from the kustomize sources by deploy/generate.py.

Nothing in the chart is written by hand: every template is the matching kustomize file
(deploy/kubernetes/base/*.yaml) dumped back to YAML with template expressions put in at the
places a value controls, and the DaemonSet's mode-dependent fields are the base merged with
components/kubelet-attribution and overlays/standalone, the way kustomize merges them. The
PrometheusRule and the dashboard ConfigMaps read chart files copied from rules/ and grafana/.
values.yaml takes its defaults from the base (resources, scheduling) and deploy/names.yaml.
tests/test_deploy.py renders the chart with helm-python-sdk and checks that its objects equal
kustomize's for each shape (base, base + kubelet attribution, standalone), so the two cannot drift.

How the templating works: a field the chart controls is replaced in the loaded YAML by a token
(``__helm7__``); after dumping, each line holding a token is replaced by that token's lines,
indented as the token was. Tokens may produce further tokens (an env list inside a conditional).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

HELM_LABELS = (
    "helm.sh/chart",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/version",
)
"""Labels Helm charts add that kustomize's output lacks (tests drop them before comparing)."""

NVML = 'eq .Values.source.mode "nvml"'
KUBELET = ".Values.kubeletAttribution.enabled"
WEB_CONFIG_DIR = "/etc/ridgeline/web-config"

Render = Callable[[str, str | None], list[str]]
"""(indent, key or None for a list item) -> the lines replacing a token's line."""


class _Dumper(yaml.SafeDumper):
    """Block style, lists indented under their key, multi-line strings as literal blocks."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def dump(obj: Any) -> str:
    return yaml.dump(obj, Dumper=_Dumper, sort_keys=False, width=1_000_000, allow_unicode=True)


def _indented(obj: Any, indent: str) -> list[str]:
    return [indent + line for line in dump(obj).splitlines()]


class Template:
    """Tokens standing for template blocks, and their expansion after dumping."""

    _TOKEN_LINE = re.compile(r"^(?P<indent>\s*)(?P<dash>- )?(?:(?P<key>[\w./-]+): )?(?P<token>__helm\d+__)$")

    def __init__(self) -> None:
        self._blocks: dict[str, Render] = {}

    def token(self, render: Render) -> str:
        name = f"__helm{len(self._blocks)}__"
        self._blocks[name] = render
        return name

    # -- the kinds of block ----------------------------------------------------------------

    def scalar(self, expression: str) -> str:
        """key: {{ expression }}"""
        return self.token(lambda indent, key: [f"{indent}{key}: {{{{ {expression} }}}}"])

    def with_value(self, path: str) -> str:
        """The key with the value's YAML when the value is non-empty, else no key at all."""

        def render(indent: str, key: str | None) -> list[str]:
            if key is None:  # list items: append the value's items
                return [
                    f"{indent}{{{{- with {path} }}}}",
                    f"{indent}{{{{- toYaml . | nindent {len(indent)} }}}}",
                    f"{indent}{{{{- end }}}}",
                ]
            return [
                f"{indent}{{{{- with {path} }}}}",
                f"{indent}{key}:",
                f"{indent}  {{{{- toYaml . | nindent {len(indent) + 2} }}}}",
                f"{indent}{{{{- end }}}}",
            ]

        return self.token(render)

    def with_scalar(self, path: str) -> str:
        """key: value when the value is non-empty, else no key."""
        return self.token(
            lambda indent, key: [
                f"{indent}{{{{- with {path} }}}}",
                f"{indent}{key}: {{{{ . }}}}",
                f"{indent}{{{{- end }}}}",
            ]
        )

    def to_yaml(self, path: str) -> str:
        """key: the value's YAML, always."""
        return self.token(
            lambda indent, key: [
                f"{indent}{key}:",
                f"{indent}  {{{{- toYaml {path} | nindent {len(indent) + 2} }}}}",
            ]
        )

    def mapping(self, fixed: dict[str, str], *includes: str, values: tuple[str, ...] = ()) -> str:
        """key: the fixed entries, each named template's lines, then each non-empty value's entries."""

        def render(indent: str, key: str | None) -> list[str]:
            inner = indent + "  "
            lines = [f"{indent}{key}:"]
            lines += [f"{inner}{line}" for line in dump(fixed).splitlines()] if fixed else []
            lines += [f"{inner}{{{{- {inc} | nindent {len(inner)} }}}}" for inc in includes]
            for path in values:
                lines += [
                    f"{inner}{{{{- with {path} }}}}",
                    f"{inner}{{{{- toYaml . | nindent {len(inner)} }}}}",
                    f"{inner}{{{{- end }}}}",
                ]
            return lines

        return self.token(render)

    def when(self, condition: str, lines: list[str]) -> str:
        """Literal lines only when the condition holds: a list item (first line after "- "), or
        entries of the mapping the token's key sits in (the key itself is not written)."""

        def render(indent: str, key: str | None) -> list[str]:
            if key is None:
                body = [f"{indent}- {lines[0]}", *(f"{indent}  {line}" for line in lines[1:])]
            else:
                body = [f"{indent}{line}" for line in lines]
            return [f"{indent}{{{{- if {condition} }}}}", *body, f"{indent}{{{{- end }}}}"]

        return self.token(render)

    def variants(self, cases: list[tuple[str | None, Any]], missing: object) -> str:
        """The key with the first case whose condition holds (None: else); `missing`: no key."""

        def render(indent: str, key: str | None) -> list[str]:
            assert key is not None
            lines: list[str] = []
            for i, (condition, value) in enumerate(cases):
                if condition is None:
                    lines.append(f"{indent}{{{{- else }}}}")
                else:
                    lines.append(f"{indent}{{{{- {'if' if i == 0 else 'else if'} {condition} }}}}")
                if value is not missing:
                    lines += _indented({key: value}, indent)
            lines.append(f"{indent}{{{{- end }}}}")
            return lines

        return self.token(render)

    # -- expansion -------------------------------------------------------------------------

    def expand(self, text: str) -> str:
        out: list[str] = []
        pending = text.splitlines()
        while pending:
            line = pending.pop(0)
            match = self._TOKEN_LINE.match(line)
            if match is None or match["token"] not in self._blocks:
                if "__helm" in line:
                    raise ValueError(f"token left in a line the chart generator cannot expand: {line!r}")
                out.append(line)
                continue
            indent = match["indent"]
            if match["dash"]:
                if match["key"]:
                    raise ValueError(f"a token as a list item's first key: {line!r}")
                lines = self._blocks[match["token"]](indent, None)
            else:
                lines = self._blocks[match["token"]](indent, match["key"])
            pending[:0] = lines
        return "\n".join(out) + "\n"


# -- kustomize-like merging (the subset the shipped patches use) -------------------------------


def merge(base: Any, patch: Any) -> Any:
    """Strategic-merge `patch` into `base`: maps recursively, lists of named maps by name
    (`$patch: delete` removes one; order as kustomize writes it), other lists and scalars replaced."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for key, value in patch.items():
            out[key] = merge(base[key], value) if key in base else _without_directives(value)
        return out
    if isinstance(base, list) and isinstance(patch, list) and _named(base) and _named(patch):
        # kustomize's order: the patch's items first (merged with the base's of that name),
        # then the base's items the patch does not name.
        by_name = {item["name"]: item for item in base}
        merged = [
            merge(by_name[item["name"]], item) if item["name"] in by_name else _without_directives(item)
            for item in patch
            if item.get("$patch") != "delete"
        ]
        named = {item["name"] for item in patch}
        return merged + [copy.deepcopy(item) for item in base if item["name"] not in named]
    return copy.deepcopy(patch)


def _named(items: list[Any]) -> bool:
    return all(isinstance(i, dict) and "name" in i for i in items)


def _without_directives(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_directives(v) for k, v in value.items() if k != "$patch"}
    if isinstance(value, list):
        return [_without_directives(v) for v in value]
    return value


# -- the chart -----------------------------------------------------------------------------


def _load(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def _daemonset_patch(path: Path) -> dict[str, Any]:
    document = _load(path)
    if not isinstance(document, dict) or document.get("kind") != "DaemonSet":
        raise ValueError(f"{path}: expected a DaemonSet patch")
    return document


def _metadata(t: Template, meta: dict[str, Any], values_labels: str | None = None) -> dict[str, Any]:
    """name from the release, namespace of the release, the file's labels plus Helm's."""
    extra = (values_labels,) if values_labels else ()
    out: dict[str, Any] = {
        "name": t.scalar('include "ridgeline.fullname" .'),
        "namespace": t.scalar(".Release.Namespace"),
        "labels": t.mapping(dict(meta.get("labels", {})), 'include "ridgeline.labels" .', values=extra),
    }
    out.update({k: v for k, v in meta.items() if k not in ("name", "namespace", "labels")})
    return out


def _selector(t: Template, labels: dict[str, str]) -> str:
    return t.mapping(dict(labels), 'include "ridgeline.selectorLabels" .')


def daemonset_template(kube: Path) -> str:
    t = Template()
    base = _load(kube / "base" / "daemonset.yaml")
    component = _daemonset_patch(
        kube / "components" / "kubelet-attribution" / "daemonset-kubelet-socket.yaml"
    )
    standalone = _daemonset_patch(kube / "overlays" / "standalone" / "daemonset-gpu-access.yaml")
    kubelet = merge(base, component)
    nvml = merge(kubelet, standalone)
    shapes = [(NVML, nvml), (KUBELET, kubelet), (None, base)]

    out = copy.deepcopy(base)
    out["metadata"] = _metadata(t, base["metadata"])
    out["spec"]["selector"]["matchLabels"] = _selector(t, base["spec"]["selector"]["matchLabels"])
    template = out["spec"]["template"]
    template["metadata"] = {
        "labels": t.mapping(
            dict(base["spec"]["template"]["metadata"]["labels"]), 'include "ridgeline.selectorLabels" .'
        ),
        "annotations": t.with_value(".Values.podAnnotations"),
    }
    pod = template["spec"]
    pods = [(cond, shape["spec"]["template"]["spec"]) for cond, shape in shapes]
    missing = object()
    for key in dict.fromkeys(k for _, p in pods for k in p):
        if key == "containers":
            continue
        values = [p.get(key, missing) for _, p in pods]
        if any(v != values[0] for v in values):
            pod[key] = t.variants([(c, p.get(key, missing)) for c, p in pods], missing)
    pod["serviceAccountName"] = t.scalar('include "ridgeline.fullname" .')
    pod["priorityClassName"] = t.with_scalar(".Values.priorityClassName")
    pod["nodeSelector"] = t.with_value(".Values.nodeSelector")
    pod["tolerations"] = t.with_value(".Values.tolerations")
    pod = _insert_after(pod, "tolerations", "affinity", t.with_value(".Values.affinity"))
    pod = _insert_after(
        pod, "serviceAccountName", "imagePullSecrets", t.with_value(".Values.imagePullSecrets")
    )
    template["spec"] = pod

    (container,) = pod["containers"]
    containers = [(cond, p["containers"][0]) for cond, p in pods]
    container["image"] = t.scalar('include "ridgeline.image" .')
    container["imagePullPolicy"] = t.scalar(".Values.image.pullPolicy")
    container["args"] = t.scalar("toJson .Values.extraArgs")
    web_env = t.when(
        ".Values.webConfig.secretName",
        [
            "name: RIDGELINE_WEB_CONFIG",
            f"value: {WEB_CONFIG_DIR}/{{{{ .Values.webConfig.key }}}}",
        ],
    )
    extra_env = t.with_value(".Values.extraEnv")
    scrape_url = t.scalar(".Values.source.scrapeUrl | quote")
    env_cases = []
    for cond, c in containers:
        env = [dict(e) for e in c.get("env", [])]
        for entry in env:
            if entry["name"] == "RIDGELINE_SCRAPE_URL":
                entry["value"] = scrape_url
        env_cases.append((cond, [*env, web_env, extra_env]))
    container["env"] = t.variants(env_cases, missing)
    for key in dict.fromkeys(k for _, c in containers for k in c):
        if key in ("env", "image", "imagePullPolicy", "args"):
            continue
        values = [c.get(key, missing) for _, c in containers]
        if any(v != values[0] for v in values):
            container[key] = t.variants([(cond, c.get(key, missing)) for cond, c in containers], missing)
    https = t.when(".Values.webConfig.tls", ["scheme: HTTPS"])
    for probe in ("livenessProbe", "readinessProbe"):
        container[probe]["httpGet"] = {**container[probe]["httpGet"], "scheme": https}
    container["resources"] = t.to_yaml(".Values.resources")
    container["volumeMounts"] = [
        *container.get("volumeMounts", []),
        t.when(
            ".Values.webConfig.secretName",
            ["name: web-config", f"mountPath: {WEB_CONFIG_DIR}", "readOnly: true"],
        ),
        t.with_value(".Values.extraVolumeMounts"),
    ]
    pod["volumes"] = [
        *pod.get("volumes", []),
        t.when(
            ".Values.webConfig.secretName",
            ["name: web-config", "secret:", "  secretName: {{ .Values.webConfig.secretName }}"],
        ),
        t.with_value(".Values.extraVolumes"),
    ]
    return t.expand(dump(out))


def _insert_after(mapping: dict[str, Any], after: str, key: str, value: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in mapping.items():
        out[k] = v
        if k == after:
            out[key] = value
    return out


def service_template(kube: Path) -> str:
    t = Template()
    obj = _load(kube / "base" / "service.yaml")
    obj["metadata"] = _metadata(t, obj["metadata"])
    obj["spec"]["selector"] = _selector(t, obj["spec"]["selector"])
    return t.expand(dump(obj))


def serviceaccount_template(kube: Path) -> str:
    t = Template()
    obj = _load(kube / "base" / "serviceaccount.yaml")
    obj["metadata"] = _metadata(t, obj["metadata"])
    return t.expand(dump(obj))


def servicemonitor_template(kube: Path) -> str:
    t = Template()
    obj = _load(kube / "base" / "servicemonitor.yaml")
    obj["metadata"] = _metadata(t, obj["metadata"], ".Values.serviceMonitor.labels")
    obj["spec"]["selector"]["matchLabels"] = _selector(t, obj["spec"]["selector"]["matchLabels"])
    (endpoint,) = obj["spec"]["endpoints"]
    endpoint["interval"] = t.scalar(".Values.serviceMonitor.interval")
    endpoint["scrapeTimeout"] = t.scalar(".Values.serviceMonitor.scrapeTimeout")
    endpoint = _insert_after(
        endpoint, "scrapeTimeout", "scheme", t.with_scalar(".Values.serviceMonitor.scheme")
    )
    endpoint = _insert_after(
        endpoint, "scheme", "tlsConfig", t.with_value(".Values.serviceMonitor.tlsConfig")
    )
    endpoint = _insert_after(
        endpoint, "tlsConfig", "basicAuth", t.with_value(".Values.serviceMonitor.basicAuth")
    )
    obj["spec"]["endpoints"] = [endpoint]
    body = t.expand(dump(obj))
    return "{{- if .Values.serviceMonitor.enabled }}\n" + body + "{{- end }}\n"


def namespace_template(kube: Path) -> str:
    t = Template()
    obj = _load(kube / "base" / "namespace.yaml")
    obj["metadata"] = {
        "name": t.scalar(".Release.Namespace"),
        "labels": t.mapping(dict(obj["metadata"].get("labels", {})), 'include "ridgeline.labels" .'),
    }
    return "{{- if .Values.createNamespace }}\n" + t.expand(dump(obj)) + "{{- end }}\n"


def prometheusrule_template(rule_names: list[str], default_runbook_base: str) -> str:
    """Every group of the chart's files/rules/*.rules.yml, runbook links moved to runbookUrlBase."""
    t = Template()
    meta = _metadata(t, {"labels": {"app.kubernetes.io/name": "ridgeline"}}, ".Values.prometheusRule.labels")
    head = t.expand(
        dump({"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule", "metadata": meta})
    )
    old = json.dumps(default_runbook_base + "#")
    new = '(printf "%s#" $.Values.runbookUrlBase)'
    lines = [
        "{{- if .Values.prometheusRule.enabled }}",
        head.rstrip("\n"),
        "spec:",
        "  groups:",
        *(
            f'  {{{{- $rules{i} := $.Files.Get "files/rules/{name}" | replace {old} {new} }}}}\n'
            f"  {{{{- toYaml (fromYaml $rules{i}).groups | nindent 2 }}}}"
            for i, name in enumerate(rule_names)
        ),
        "{{- end }}",
    ]
    return "\n".join(lines) + "\n"


def dashboard_template(configmap: dict[str, Any], file_name: str) -> str:
    """One dashboard ConfigMap reading files/dashboards/<file_name>; name suffix as kustomize's."""
    t = Template()
    suffix = configmap["metadata"]["name"].removeprefix("ridgeline")
    labels = {k: v for k, v in configmap["metadata"]["labels"].items() if k != "grafana_dashboard"}
    meta = {
        "name": t.scalar(f'printf "%s{suffix}" (include "ridgeline.fullname" .)'),
        "namespace": t.scalar(".Release.Namespace"),
        "labels": t.mapping(labels, 'include "ridgeline.labels" .', values=(".Values.dashboards.labels",)),
    }
    head = t.expand(dump({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}))
    return (
        "{{- if .Values.dashboards.enabled }}\n"
        + head
        + f"data:\n  {json.dumps(file_name)}: |\n"
        + f'    {{{{- .Files.Get "files/dashboards/{file_name}" | nindent 4 }}}}\n'
        + "{{- end }}\n"
    )


HELPERS = """\
{{/* Generated by deploy/generate.py; do not edit. */}}
{{- define "ridgeline.name" -}}ridgeline{{- end }}

{{/* The release name, or release-ridgeline when it does not contain "ridgeline". */}}
{{- define "ridgeline.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else if contains "ridgeline" .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-ridgeline" .Release.Name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{/* Labels on every object, beside the kustomize base's own (app.kubernetes.io/name, component). */}}
{{- define "ridgeline.labels" -}}
app.kubernetes.io/part-of: ridgeline
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}

{{/* Added to the base's selectors so that two releases never select each other's pods. */}}
{{- define "ridgeline.selectorLabels" -}}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "ridgeline.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest | quote }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) | quote }}
{{- end }}
{{- end }}
"""

NOTES = """\
Ridgeline runs on every node matching {{ toJson .Values.nodeSelector }}
in namespace {{ .Release.Namespace }} (source: {{ .Values.source.mode }}
{{- if eq .Values.source.mode "scrape" }}, {{ .Values.source.scrapeUrl }}{{ end }}).

  kubectl -n {{ .Release.Namespace }} get pods -l app.kubernetes.io/instance={{ .Release.Name }}
  kubectl -n {{ .Release.Namespace }} port-forward ds/{{ include "ridgeline.fullname" . }} 10295
  curl -s localhost:10295/metrics

Pod Security: the pods mount the kubelet's pod-resources directory (a hostPath), which only the
"privileged" level admits; label the namespace pod-security.kubernetes.io/enforce=privileged or
install with --set createNamespace=true. See docs/deployment.md.
"""


# -- Chart.yaml, values, schema, and the file list -------------------------------------------


@dataclass(frozen=True)
class ChartNames:
    image_repository: str
    runbook_url_base: str


def _defaults(kube: Path, names: ChartNames) -> dict[str, Any]:
    """values.yaml's defaults: the kustomize base's own settings, and deploy/names.yaml."""
    daemonset = _load(kube / "base" / "daemonset.yaml")
    pod = daemonset["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = {e["name"]: e for e in container.get("env", [])}
    (endpoint,) = _load(kube / "base" / "servicemonitor.yaml")["spec"]["endpoints"]
    return {
        "image": {
            "repository": names.image_repository,
            "tag": "",
            "digest": "",
            "pullPolicy": container["imagePullPolicy"],
        },
        "source": {
            "mode": env["RIDGELINE_SOURCE"]["value"],
            "scrapeUrl": env["RIDGELINE_SCRAPE_URL"]["value"],
        },
        "resources": container["resources"],
        "nodeSelector": pod.get("nodeSelector", {}),
        "tolerations": pod.get("tolerations", []),
        "priorityClassName": pod.get("priorityClassName", ""),
        "interval": endpoint["interval"],
        "scrapeTimeout": endpoint["scrapeTimeout"],
        "runbookUrlBase": names.runbook_url_base,
    }


def values_yaml(d: dict[str, Any], header: str) -> str:
    def block(obj: Any) -> str:
        return dump(obj).rstrip("\n")

    return f"""{header}# Values of the Ridgeline chart; defaults are the kustomize base's
# (deploy/kubernetes/base). docs/deployment.md ("Helm") explains each group;
# values.schema.json rejects unknown keys.

# The image; tag defaults to the chart's appVersion. A digest (sha256:...) wins over the tag.
{block({"image": d["image"]})}
imagePullSecrets: []
# Object names: the release name when it contains "ridgeline", else <release>-ridgeline.
fullnameOverride: ""
# Render the namespace with the Pod Security labels the pods need (a hostPath: "privileged").
# Leave false when the namespace exists; label it as docs/deployment.md says.
createNamespace: false

# Where samples come from. scrape: the node's dcgm-exporter (GPU operator), no privileges.
# nvml: Ridgeline reads the GPUs itself (the standalone overlay: NVIDIA runtime, CAP_SYS_ADMIN,
# uid 0, kubelet attribution on). $(HOST_IP) is the node's address (downward API).
{block({"source": d["source"]})}
# Pod labels from the kubelet's PodResources API (components/kubelet-attribution: uid 0, no
# capabilities). Not needed with the GPU operator's dcgm-exporter, which labels pods itself.
kubeletAttribution:
  enabled: false

# More `ridgeline serve` flags (e.g. ["--interval", "2"]) and environment variables.
extraArgs: []
extraEnv: []
extraVolumes: []
extraVolumeMounts: []

# Measured steady state: 8 GPUs at 1 s used 0.23 % of a core and 59.4 MiB (docs/daemon.md).
{block({"resources": d["resources"]})}
{block({"nodeSelector": d["nodeSelector"]})}
{block({"tolerations": d["tolerations"]})}
affinity: {{}}
# The GPU operator's class for dcgm-exporter: the monitor is not evicted before what it reads.
priorityClassName: {d["priorityClassName"]}
podAnnotations: {{}}

# TLS / basic auth: a Secret holding an exporter-toolkit web config (and its certificates) under
# `key`, mounted at /etc/ridgeline/web-config. tls: true switches the probes to HTTPS.
webConfig:
  secretName: ""
  key: web-config.yml
  tls: false

# Prometheus Operator objects. Most installs select them by a label, e.g.
# labels: {{release: kube-prometheus-stack}}.
serviceMonitor:
  enabled: true
  labels: {{}}
  interval: {d["interval"]}
  scrapeTimeout: {d["scrapeTimeout"]}
  scheme: ""
  tlsConfig: {{}}
  basicAuth: {{}}
prometheusRule:
  enabled: true
  labels: {{}}
# Alerts link to <runbookUrlBase>#<alert name in lower case>; point it at your own copy of
# docs/runbooks.md (or your wiki) if you keep one.
runbookUrlBase: {d["runbookUrlBase"]}

# One ConfigMap per dashboard, labelled for the Grafana sidecar (kube-prometheus-stack's label).
dashboards:
  enabled: true
  labels:
    grafana_dashboard: "1"
"""


def _object(properties: dict[str, Any], *, free: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": properties}
    if not free:
        out["additionalProperties"] = False
    return out


STRING = {"type": "string"}
BOOL = {"type": "boolean"}
MAP = {"type": "object"}
STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
LIST = {"type": "array"}
DURATION = {"type": "string", "pattern": "^([0-9]+(ms|s|m|h))+$"}


def values_schema() -> dict[str, Any]:
    """JSON schema for values.yaml: a misspelt key or a wrong type fails `helm install` and lint."""
    schema = _object(
        {
            "image": _object(
                {
                    "repository": {"type": "string", "minLength": 1},
                    "tag": STRING,
                    "digest": {"type": "string", "pattern": "^(|sha256:[0-9a-f]{64})$"},
                    "pullPolicy": {"enum": ["Always", "IfNotPresent", "Never"]},
                }
            ),
            "imagePullSecrets": LIST,
            "fullnameOverride": STRING,
            "createNamespace": BOOL,
            "source": _object(
                {
                    "mode": {"enum": ["scrape", "nvml"]},
                    "scrapeUrl": {"type": "string", "pattern": "^https?://"},
                }
            ),
            "kubeletAttribution": _object({"enabled": BOOL}),
            "extraArgs": {"type": "array", "items": STRING},
            "extraEnv": LIST,
            "extraVolumes": LIST,
            "extraVolumeMounts": LIST,
            "resources": MAP,
            "nodeSelector": STRING_MAP,
            "tolerations": LIST,
            "affinity": MAP,
            "priorityClassName": STRING,
            "podAnnotations": STRING_MAP,
            "webConfig": _object(
                {"secretName": STRING, "key": {"type": "string", "minLength": 1}, "tls": BOOL}
            ),
            "serviceMonitor": _object(
                {
                    "enabled": BOOL,
                    "labels": STRING_MAP,
                    "interval": DURATION,
                    "scrapeTimeout": DURATION,
                    "scheme": {"enum": ["", "http", "https"]},
                    "tlsConfig": MAP,
                    "basicAuth": MAP,
                }
            ),
            "prometheusRule": _object({"enabled": BOOL, "labels": STRING_MAP}),
            "runbookUrlBase": {"type": "string", "pattern": "^https?://[^#\\s]+$"},
            "dashboards": _object({"enabled": BOOL, "labels": STRING_MAP}),
        }
    )
    schema["$schema"] = "http://json-schema.org/draft-07/schema#"
    schema["title"] = "Ridgeline chart values"
    return schema


def chart(
    *,
    kube: Path,
    names: ChartNames,
    version: str,
    rules: dict[str, str],
    dashboards: dict[str, tuple[dict[str, Any], str]],
    header: str,
) -> dict[str, str]:
    """Chart-relative path -> content. rules: file name -> text; dashboards: file name ->
    (the kustomize ConfigMap, the file's text)."""
    chart_yaml = {
        "apiVersion": "v2",
        "name": "ridgeline",
        "description": "Per-node GPU roofline exporter: which wall (memory, compute, latency) each GPU hits.",
        "type": "application",
        "version": version,
        "appVersion": version,
        "kubeVersion": ">=1.30.0-0",
        "keywords": ["gpu", "nvidia", "dcgm", "prometheus", "roofline"],
    }
    yaml_header = header
    tpl_header = "{{/* " + header.strip().lstrip("# ") + " */}}\n"
    out = {
        "Chart.yaml": yaml_header + dump(chart_yaml),
        "values.yaml": values_yaml(_defaults(kube, names), yaml_header),
        "values.schema.json": json.dumps(values_schema(), indent=2) + "\n",
        "templates/_helpers.tpl": HELPERS,
        "templates/NOTES.txt": NOTES,
        "templates/namespace.yaml": tpl_header + namespace_template(kube),
        "templates/serviceaccount.yaml": tpl_header + serviceaccount_template(kube),
        "templates/daemonset.yaml": tpl_header + daemonset_template(kube),
        "templates/service.yaml": tpl_header + service_template(kube),
        "templates/servicemonitor.yaml": tpl_header + servicemonitor_template(kube),
    }
    if rules:
        out["templates/prometheusrule.yaml"] = tpl_header + prometheusrule_template(
            sorted(rules), names.runbook_url_base
        )
    for name, text in rules.items():
        out[f"files/rules/{name}"] = text
    for name, (configmap, text) in dashboards.items():
        out[f"templates/dashboard-{Path(name).stem}.yaml"] = tpl_header + dashboard_template(configmap, name)
        out[f"files/dashboards/{name}"] = text
    return out
