"""The Helm chart deploy/helm/ridgeline, written by hand: `helm lint --strict` and `helm template`
through helm-python-sdk (which embeds Helm), every rendering validated strictly with
kubernetes-validate on each Kubernetes version the chart admits, the objects equal to kustomize's
for each shape, the reach matrix's values examples, the Prometheus Operator selector, the Pod
Security level of each mode, the values schema and README, and the chart as a subchart."""

from __future__ import annotations

import copy
import itertools
import json
import os
import re
import shlex
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import helm_python  # type: ignore[import-untyped]
import kubernetes_validate  # type: ignore[import-untyped]
import pod_security
import pytest
import yaml
from test_deploy import CHART, KUBE, NAMES, ROOT, by_kind, generate, kustomize, only, validate_all

KUBE_VERSION = "v1.31.0"
EXAMPLES = CHART / "examples"
HELM_LABELS = (
    "helm.sh/chart",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/version",
)
"""Labels the chart adds that kustomize's output lacks (dropped before comparing)."""
NAMED_LISTS = ("env", "volumes", "volumeMounts")
"""Lists whose order means nothing to Kubernetes (items are found by name)."""
SELECTED_KINDS = ("ServiceMonitor", "PodMonitor", "PrometheusRule")
"""What Prometheus Operator selects by label."""


def render_files(
    chart_path: Path, values: dict[str, Any], *, name: str = "ridgeline", namespace: str = "ridgeline"
) -> dict[str, str]:
    chart = helm_python.Chart.load(str(chart_path))
    try:
        files: dict[str, str] = chart.render(values, name=name, namespace=namespace)
    finally:
        chart.close()
    return files


def render(
    values: dict[str, Any] | None = None, *, name: str = "ridgeline", namespace: str = "ridgeline"
) -> list[dict[str, Any]]:
    """`helm template` of the chart: every object it renders."""
    files = render_files(CHART, values or {}, name=name, namespace=namespace)
    objects = []
    for path, text in sorted(files.items()):
        if path.endswith(".yaml"):
            objects.extend(doc for doc in yaml.safe_load_all(text) if doc)
    return objects


def lint(values: dict[str, Any] | None = None, kube_version: str = KUBE_VERSION) -> dict[str, Any]:
    result: dict[str, Any] = helm_python.lint(
        str(CHART), values or {}, strict=True, namespace="ridgeline", kube_version=kube_version
    )
    return result


def comparable(obj: Any, key: str = "") -> Any:
    """The object minus Helm's own labels, with name-keyed lists in name order."""
    if isinstance(obj, dict):
        return {k: comparable(v, k) for k, v in obj.items() if k not in HELM_LABELS}
    if isinstance(obj, list):
        items = [comparable(v) for v in obj]
        if key in NAMED_LISTS and all(isinstance(i, dict) and "name" in i for i in items):
            items.sort(key=lambda i: i["name"])
        return items
    return obj


def keyed(objects: list[dict[str, Any]]) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {
        (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): comparable(o) for o in objects
    }


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Field paths where a and b differ, with both values (for a readable failure)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b)) for d in differences(a.get(k), b.get(k), f"{path}.{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [
            d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in differences(x, y, f"{path}[{i}]")
        ]
    return [] if a == b else [f"{path}: chart {a!r} != kustomize {b!r}"]


def assert_same_objects(helm: list[dict[str, Any]], kustomized: list[dict[str, Any]]) -> None:
    ours, theirs = keyed(helm), keyed(kustomized)
    assert sorted(ours) == sorted(theirs), "the chart and kustomize render different objects"
    for key in sorted(ours):
        found = differences(ours[key], theirs[key])
        assert not found, f"{key[0]}/{key[2]} differs between the chart and kustomize: " + "; ".join(found)


@pytest.fixture
def overlay(tmp_path: Path) -> Iterator[Path]:
    """An empty folder for a throw-away overlay of the repository's base."""
    yield tmp_path


def _kustomization(folder: Path, resources: list[Path | str], components: list[Path]) -> Path:
    """kustomize wants relative paths: the repository's folders are named relative to `folder`."""

    def rel(path: Path | str) -> str:
        return os.path.relpath(path, folder) if isinstance(path, Path) else path

    fields = {"resources": [rel(p) for p in resources], "components": [rel(p) for p in components]}
    (folder / "kustomization.yaml").write_text(yaml.safe_dump(fields))
    return folder


def _daemonset(objects: list[dict[str, Any]]) -> dict[str, Any]:
    return only(objects, "DaemonSet")


def _pod(objects: list[dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = _daemonset(objects)["spec"]["template"]["spec"]
    return spec


def _container(objects: list[dict[str, Any]]) -> dict[str, Any]:
    (container,) = _pod(objects)["containers"]
    return dict(container)


def _env(objects: list[dict[str, Any]]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in _container(objects)["env"]}


# -- lint and validation -----------------------------------------------------------------------

SHAPES: dict[str, dict[str, Any]] = {
    "defaults": {},
    "kubelet-attribution": {"kubeletAttribution": {"enabled": True}},
    "nvml": {"source": {"mode": "nvml"}},
    "dcgm": {"source": {"mode": "dcgm", "dcgmAddress": "nvidia-dcgm.gpu-operator.svc:5555"}},
    "host-network": {"hostNetwork": True},
    "everything": {
        "global": {"imageRegistry": "registry.example"},
        "createNamespace": True,
        "nameOverride": "roofline",
        "image": {"digest": "sha256:" + "ab" * 32},
        "imagePullSecrets": [{"name": "registry"}],
        "serviceAccount": {"annotations": {"example.com/team": "gpu"}},
        "extraArgs": ["--interval", "2"],
        "extraEnv": [{"name": "RIDGELINE_LOG_LEVEL", "value": "debug"}],
        "extraVolumes": [{"name": "cards", "configMap": {"name": "my-cards"}}],
        "extraVolumeMounts": [{"name": "cards", "mountPath": "/etc/ridgeline/cards", "readOnly": True}],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}]
                }
            }
        },
        "nodeSelector": {"example.com/gpu": "yes"},
        "tolerations": [{"key": "example.com/dedicated", "operator": "Exists", "effect": "NoSchedule"}],
        "podLabels": {"example.com/team": "gpu"},
        "podAnnotations": {"example.com/owner": "sre"},
        "priorityClassName": "",
        "service": {"annotations": {"example.com/svc": "yes"}, "labels": {"example.com/svc": "yes"}},
        "webConfig": {"secretName": "ridgeline-web", "tls": True},
        "prometheus": {"selectorLabels": {"release": "kube-prometheus-stack"}},
        "serviceMonitor": {
            "scheme": "https",
            "tlsConfig": {"insecureSkipVerify": True},
            "interval": "30s",
            "scrapeTimeout": "20s",
            "honorLabels": True,
            "relabelings": [{"action": "replace", "targetLabel": "cluster", "replacement": "east"}],
            "metricRelabelings": [{"action": "drop", "sourceLabels": ["__name__"], "regex": "x_.*"}],
        },
        "runbookUrlBase": "https://wiki.example.com/gpu/runbooks",
        "dashboards": {"folder": "GPU"},
    },
    "nothing-optional": {
        "serviceAccount": {"create": False},
        "service": {"enabled": False},
        "serviceMonitor": {"enabled": False},
        "prometheusRule": {"enabled": False},
        "dashboards": {"enabled": False},
        "dcgmExporter": {"nodeLocalService": {"enabled": False}},
        "source": {"scrapeUrl": "http://$(HOST_IP):9400/metrics"},
    },
}


@pytest.mark.parametrize("values", SHAPES.values(), ids=SHAPES.keys())
def test_helm_lint_strict_is_clean(values: dict[str, Any]) -> None:
    result = lint(values)
    assert result["errors"] == [], result
    # INFO ("icon is recommended") is all that may remain; WARNING and ERROR fail --strict anyway.
    assert all(m["severity"] <= 1 for m in result["messages"]), result["messages"]


@pytest.mark.parametrize("values", SHAPES.values(), ids=SHAPES.keys())
def test_helm_template_validates_strictly_on_every_admitted_version(values: dict[str, Any]) -> None:
    objects = render(values)
    assert {"DaemonSet"} <= {o["kind"] for o in objects}
    validate_all(objects)


def test_kube_version_is_the_lowest_validated_one() -> None:
    """kubeVersion admits exactly from the oldest version the objects are validated on, which is
    the oldest kubernetes-validate has schemas for: no higher than the objects need."""
    from test_deploy import KUBERNETES_VERSIONS

    def minor(version: str) -> tuple[int, int]:
        major, minor_, *_ = version.lstrip("v").split(".")
        return int(major), int(minor_)

    constraint = yaml.safe_load((CHART / "Chart.yaml").read_text())["kubeVersion"]
    lowest = min(KUBERNETES_VERSIONS, key=minor)
    assert constraint == f">={lowest}-0"
    schemas = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
    oldest = min((p.name.split("-")[0] for p in schemas.iterdir() if p.name.startswith("v1.")), key=minor)
    assert minor(oldest) == minor(lowest), f"kubernetes-validate knows {oldest}: validate there too"
    assert lint(kube_version="v" + lowest)["errors"] == []


@pytest.mark.parametrize(
    ("values", "needle"),
    [
        ({"source": {"mode": "prometheus"}}, "/source/mode"),
        ({"servicemonitor": {"enabled": False}}, "'servicemonitor' not allowed"),
        ({"image": {"digest": "latest"}}, "/image/digest"),
        ({"runbookUrlBase": "https://wiki.example.com/x#frag"}, "/runbookUrlBase"),
        ({"serviceMonitor": {"interval": "fifteen"}}, "/serviceMonitor/interval"),
        ({"kubeletAttribution": {"kubeletPath": "var/lib/kubelet"}}, "/kubeletAttribution/kubeletPath"),
        ({"dcgmExporter": {"nodeLocalService": {"port": 0}}}, "/dcgmExporter/nodeLocalService/port"),
        ({"source": {"dcgmAddress": "nvidia-dcgm"}}, "/source/dcgmAddress"),
    ],
)
def test_helm_lint_names_a_bad_value(values: dict[str, Any], needle: str) -> None:
    errors = "\n".join(lint(values)["errors"])
    assert needle in errors, errors


@pytest.mark.parametrize(
    ("values", "needle"),
    [
        (
            {"dcgmExporter": {"nodeLocalService": {"enabled": False}}},
            "source.mode scrape needs source.scrapeUrl",
        ),
        ({"source": {"mode": "dcgm"}}, "source.mode dcgm needs source.dcgmAddress: HOST:PORT"),
    ],
)
def test_a_source_without_its_address_is_refused_in_one_line(values: dict[str, Any], needle: str) -> None:
    with pytest.raises(helm_python.errors.HelmRenderError, match=re.escape(needle)):
        render(values)


# -- the chart and kustomize agree -------------------------------------------------------------


def test_chart_defaults_equal_the_kustomize_base() -> None:
    assert_same_objects(render({"createNamespace": True}), kustomize(KUBE / "base"))


def test_chart_with_kubelet_attribution_equals_base_plus_component(overlay: Path) -> None:
    folder = _kustomization(
        overlay, resources=[KUBE / "base"], components=[KUBE / "components" / "kubelet-attribution"]
    )
    values = {"createNamespace": True, "kubeletAttribution": {"enabled": True}}
    assert_same_objects(render(values), kustomize(folder))


def test_chart_nvml_source_equals_the_standalone_overlay() -> None:
    values = {"createNamespace": True, "source": {"mode": "nvml"}}
    assert_same_objects(render(values), kustomize(KUBE / "overlays" / "standalone"))


def test_comparison_notices_a_difference() -> None:
    """The equality check itself can fail: a changed base value shows up."""
    kustomized = kustomize(KUBE / "base")
    changed = copy.deepcopy(kustomized)
    only(changed, "DaemonSet")["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] = (
        "1"
    )
    with pytest.raises(AssertionError, match="DaemonSet/ridgeline differs"):
        assert_same_objects(changed, kustomized)


def test_scrape_url_is_defined_after_the_variable_it_expands() -> None:
    """$(HOST_IP) expands only from variables earlier in the list (the comparison ignores order)."""
    names = [e["name"] for e in _container(render(SHAPES["nothing-optional"]))["env"]]
    assert names.index("HOST_IP") < names.index("RIDGELINE_SCRAPE_URL")


# -- reaching dcgm-exporter: the matrix of docs/deployment.md ------------------------------------

MATRIX: dict[str, dict[str, Any]] = {
    "gpu-operator.yaml": {
        "env": {
            "RIDGELINE_SOURCE": "scrape",
            "RIDGELINE_SCRAPE_URL": "http://ridgeline-dcgm-exporter.gpu-operator.svc:9400/metrics",
        },
        "service": ("gpu-operator", {"app": "nvidia-dcgm-exporter"}, 9400),
        "level": "restricted",
    },
    "dcgm-exporter-chart.yaml": {
        "env": {
            "RIDGELINE_SOURCE": "scrape",
            "RIDGELINE_SCRAPE_URL": "http://ridgeline-dcgm-exporter.dcgm-exporter.svc:9400/metrics",
        },
        "service": (
            "dcgm-exporter",
            {"app.kubernetes.io/name": "dcgm-exporter", "app.kubernetes.io/instance": "dcgm-exporter"},
            9400,
        ),
        "level": "restricted",
    },
    "hostport-daemonset.yaml": {
        "env": {"RIDGELINE_SOURCE": "scrape", "RIDGELINE_SCRAPE_URL": "http://$(HOST_IP):9400/metrics"},
        "service": None,
        "level": "restricted",
    },
    "host-engine.yaml": {
        "env": {
            "RIDGELINE_SOURCE": "dcgm",
            "RIDGELINE_DCGM_ADDRESS": "nvidia-dcgm.gpu-operator.svc:5555",
            "RIDGELINE_KUBELET_SOCKET": "/var/lib/kubelet/pod-resources/kubelet.sock",
        },
        "service": None,
        "level": "privileged",
    },
}


def test_every_example_is_a_row_of_the_matrix_and_of_the_docs() -> None:
    examples = sorted(p.name for p in EXAMPLES.glob("*.yaml"))
    assert examples == sorted(MATRIX)
    docs = (ROOT / "docs" / "deployment.md").read_text()
    for name in examples:
        assert f"examples/{name}" in docs, f"docs/deployment.md's matrix lacks examples/{name}"


@pytest.mark.parametrize("example", sorted(MATRIX))
def test_matrix_row_renders_the_source_it_promises(example: str) -> None:
    values = yaml.safe_load((EXAMPLES / example).read_text())
    expected = MATRIX[example]
    objects = render({**values, "createNamespace": True})
    validate_all(objects)
    env = _env(objects)
    for name, value in expected["env"].items():
        assert env.get(name) == value, f"{example}: {name}={env.get(name)!r}, expected {value!r}"
    services = [o for o in by_kind(objects, "Service") if o["metadata"]["name"].endswith("dcgm-exporter")]
    if expected["service"] is None:
        assert services == [], f"{example}: renders a dcgm-exporter Service it does not need"
    else:
        namespace, selector, port = expected["service"]
        (service,) = services
        assert service["metadata"]["namespace"] == namespace
        assert service["spec"]["internalTrafficPolicy"] == "Local"
        assert service["spec"]["selector"] == selector
        assert service["spec"]["ports"][0]["port"] == port
        url = env["RIDGELINE_SCRAPE_URL"]
        assert url.startswith(f"http://{service['metadata']['name']}.{namespace}.svc:{port}/")
    assert pod_security.level(_pod(objects)) == expected["level"]
    assert (
        only(objects, "Namespace")["metadata"]["labels"]["pod-security.kubernetes.io/enforce"]
        == (expected["level"])
    )


def test_gpu_operator_row_matches_the_chart_defaults() -> None:
    """The default install is the GPU-operator row: no values needed."""
    values = yaml.safe_load((EXAMPLES / "gpu-operator.yaml").read_text())
    assert keyed(render(values)) == keyed(render())


# -- one selector for the Prometheus stack -------------------------------------------------------


def _set_values(command: str) -> dict[str, Any]:
    """The values a `helm install ... --set a.b=c` line sets (the forms the docs use)."""
    values: dict[str, Any] = {}
    words = shlex.split(command.replace("\\\n", " "))
    for flag, value in itertools.pairwise(words):
        if flag != "--set":
            continue
        path, _, text = value.partition("=")
        keys = re.split(r"(?<!\\)\.", path)
        node = values
        for key in keys[:-1]:
            node = node.setdefault(key.replace("\\.", "."), {})
        node[keys[-1].replace("\\.", ".")] = {"true": True, "false": False}.get(text, text)
    return values


def _kube_prometheus_stack_lines() -> list[tuple[str, str]]:
    found = []
    for doc in ("README.md", "docs/deployment.md", "deploy/helm/ridgeline/README.md"):
        text = (ROOT / doc).read_text().replace("\\\n", " ")
        found += [
            (doc, line)
            for line in text.splitlines()
            if "helm install" in line and "kube-prometheus-stack" in line
        ]
    return found


def test_the_docs_kube_prometheus_stack_line_labels_every_selected_object() -> None:
    lines = _kube_prometheus_stack_lines()
    assert {doc for doc, _ in lines} == {"README.md", "docs/deployment.md", "deploy/helm/ridgeline/README.md"}
    for doc, line in lines:
        objects = render(_set_values(line))
        selected = [o for o in objects if o["kind"] in SELECTED_KINDS]
        assert {o["kind"] for o in selected} == {"ServiceMonitor", "PrometheusRule"}, doc
        for obj in selected:
            labels = obj["metadata"]["labels"]
            assert labels.get("release") == "kube-prometheus-stack", f"{doc}: {obj['kind']} lacks release"


def test_set_parser_reads_nested_and_escaped_keys() -> None:
    line = "helm install r c --set a.b=x --set 'c.d\\.e=y' --set f=true"
    assert _set_values(line) == {"a": {"b": "x"}, "c": {"d.e": "y"}, "f": True}


def test_dashboards_keep_the_sidecar_label_and_take_a_folder() -> None:
    maps = by_kind(render(), "ConfigMap")
    assert maps and all(m["metadata"]["labels"]["grafana_dashboard"] == "1" for m in maps)
    assert all("annotations" not in m["metadata"] for m in maps)
    foldered = by_kind(render({"dashboards": {"folder": "GPU fleet"}}), "ConfigMap")
    assert all(m["metadata"]["annotations"] == {"grafana_folder": "GPU fleet"} for m in foldered)
    other = by_kind(
        render({"dashboards": {"folder": "GPU", "folderAnnotation": "k8s-sidecar-target-directory"}}),
        "ConfigMap",
    )
    assert all(m["metadata"]["annotations"] == {"k8s-sidecar-target-directory": "GPU"} for m in other)
    dashboards = {p.name: p.read_text() for p in (ROOT / "grafana" / "dashboards").glob("*.json")}
    assert {name: text for m in maps for name, text in m["data"].items()} == dashboards


# -- Pod Security --------------------------------------------------------------------------------

LEVEL_OF_SHAPE = {
    "defaults": "restricted",
    "dcgm": "restricted",
    "nothing-optional": "restricted",
    "everything": "restricted",
    "kubelet-attribution": "privileged",
    "nvml": "privileged",
    "host-network": "privileged",
}


@pytest.mark.parametrize("shape", sorted(LEVEL_OF_SHAPE))
def test_each_mode_meets_its_pod_security_level_and_labels_its_namespace(shape: str) -> None:
    objects = render({**SHAPES[shape], "createNamespace": True})
    pod = _pod(objects)
    annotations = _daemonset(objects)["spec"]["template"]["metadata"].get("annotations")
    assert pod_security.level(pod, annotations) == LEVEL_OF_SHAPE[shape], pod_security.restricted_violations(
        pod, annotations
    )
    labels = only(objects, "Namespace")["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == LEVEL_OF_SHAPE[shape]
    assert labels["pod-security.kubernetes.io/warn"] == "restricted"
    assert labels["pod-security.kubernetes.io/audit"] == "restricted"


def test_kubelet_attribution_needs_only_its_host_path_at_the_configured_kubelet() -> None:
    objects = render({"kubeletAttribution": {"enabled": True, "kubeletPath": "/var/lib/k0s/kubelet/"}})
    pod = _pod(objects)
    assert pod_security.restricted_violations(pod) == [
        "HostPath volumes: spec.volumes[pod-resources].hostPath",
        "running as non-root user: spec.securityContext.runAsUser 0",
        "running as non-root: containers[ridgeline].securityContext.runAsNonRoot",
        "volume types: spec.volumes[pod-resources] is hostPath",
    ]
    (host,) = [v for v in pod["volumes"] if "hostPath" in v]
    assert host["hostPath"]["path"] == "/var/lib/k0s/kubelet/pod-resources"
    mounts = {m["name"]: m for m in _container(objects)["volumeMounts"]}
    assert mounts["pod-resources"] == {
        "name": "pod-resources",
        "mountPath": "/var/lib/kubelet/pod-resources",
        "readOnly": True,
    }


def test_default_install_mounts_no_host_path() -> None:
    assert not [v for v in _pod(render()).get("volumes", []) if "hostPath" in v]


POD_VIOLATIONS: dict[str, tuple[dict[str, Any], str]] = {
    "hostNetwork": ({"hostNetwork": True}, "host namespaces"),
    "hostPath": ({"volumes": [{"name": "h", "hostPath": {"path": "/"}}]}, "HostPath volumes"),
    "privileged": (
        {"containers": [{"name": "c", "securityContext": {"privileged": True}}]},
        "privileged containers",
    ),
    "SYS_ADMIN": (
        {"containers": [{"name": "c", "securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}]},
        "capabilities",
    ),
    "hostPort": ({"containers": [{"name": "c", "ports": [{"name": "p", "hostPort": 80}]}]}, "host ports"),
    "unconfined": ({"securityContext": {"seccompProfile": {"type": "Unconfined"}}}, "seccomp"),
    "sysctl": ({"securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "1"}]}}, "sysctls"),
    "procMount": (
        {"containers": [{"name": "c", "securityContext": {"procMount": "Unmasked"}}]},
        "/proc mount",
    ),
    "selinux": ({"securityContext": {"seLinuxOptions": {"type": "spc_t"}}}, "SELinux"),
}


@pytest.mark.parametrize("case", sorted(POD_VIOLATIONS))
def test_pod_security_checker_catches_each_baseline_control(case: str) -> None:
    """The checker itself can fail: each control, broken on the restricted default pod."""
    patch, control = POD_VIOLATIONS[case]
    pod = copy.deepcopy(_pod(render()))
    for key, value in patch.items():
        if key == "containers":
            pod["containers"][0] = {
                **pod["containers"][0],
                **value[0],
                "name": "ridgeline",
                "securityContext": {
                    **pod["containers"][0]["securityContext"],
                    **value[0].get("securityContext", {}),
                },
            }
        elif key == "securityContext":
            pod["securityContext"] = {**pod["securityContext"], **value}
        else:
            pod[key] = value
    assert pod_security.level(pod) == "privileged"
    assert any(v.startswith(control) for v in pod_security.baseline_violations(pod)), (
        pod_security.baseline_violations(pod)
    )


@pytest.mark.parametrize(
    ("field", "value", "control"),
    [
        ("allowPrivilegeEscalation", True, "privilege escalation"),
        ("runAsNonRoot", False, "running as non-root"),
        ("capabilities", {"drop": ["NET_RAW"]}, "capabilities"),
    ],
)
def test_pod_security_checker_catches_restricted_controls(field: str, value: Any, control: str) -> None:
    pod = copy.deepcopy(_pod(render()))
    pod["containers"][0]["securityContext"][field] = value
    assert pod_security.level(pod) == "baseline"
    assert any(v.startswith(control) for v in pod_security.restricted_violations(pod))


def test_pod_security_checker_wants_a_seccomp_profile_and_safe_volumes() -> None:
    pod = copy.deepcopy(_pod(render()))
    del pod["securityContext"]["seccompProfile"]
    assert pod_security.level(pod) == "baseline"
    pod = copy.deepcopy(_pod(render()))
    pod["volumes"].append({"name": "nfs", "nfs": {"server": "x", "path": "/"}})
    assert "volume types: spec.volumes[nfs] is nfs" in pod_security.restricted_violations(pod)


# -- values that change objects ----------------------------------------------------------------


def test_release_name_scopes_object_names_and_selectors() -> None:
    objects = render(name="gpu", namespace="monitoring")
    daemonset = _daemonset(objects)
    assert daemonset["metadata"]["name"] == "gpu-ridgeline"
    own = [o for o in objects if o["metadata"]["name"] != "gpu-ridgeline-dcgm-exporter"]
    assert {o["metadata"]["namespace"] for o in own} == {"monitoring"}
    selector = daemonset["spec"]["selector"]["matchLabels"]
    assert selector["app.kubernetes.io/instance"] == "gpu"
    ridgeline_service = [s for s in by_kind(objects, "Service") if s["metadata"]["name"] == "gpu-ridgeline"]
    assert ridgeline_service[0]["spec"]["selector"] == selector
    assert only(objects, "ServiceMonitor")["spec"]["selector"]["matchLabels"] == selector
    assert daemonset["spec"]["template"]["spec"]["serviceAccountName"] == "gpu-ridgeline"
    assert by_kind(objects, "Namespace") == [], "createNamespace defaults to false"
    assert _env(objects)["RIDGELINE_SCRAPE_URL"] == (
        "http://gpu-ridgeline-dcgm-exporter.gpu-operator.svc:9400/metrics"
    )


def test_name_overrides() -> None:
    named = render({"nameOverride": "roofline"}, name="gpu")
    assert _daemonset(named)["metadata"]["name"] == "gpu-roofline"
    assert _daemonset(named)["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"] == "roofline"
    full = render({"fullnameOverride": "gpu-monitor"}, name="gpu")
    assert {o["metadata"]["name"] for o in by_kind(full, "DaemonSet") + by_kind(full, "ServiceAccount")} == {
        "gpu-monitor"
    }


def test_image_repository_and_tag_come_from_names_and_version() -> None:
    version = generate.project_version(ROOT)
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["version"] == chart["appVersion"] == version
    assert _container(render())["image"] == f"{NAMES.image_repository}:{version}"
    custom = {"image": {"repository": "registry.example/gpu/ridgeline", "tag": "9.9"}}
    assert _container(render(custom))["image"] == "registry.example/gpu/ridgeline:9.9"


def test_common_keys_reach_the_objects() -> None:
    objects = render(SHAPES["everything"])
    daemonset, pod, container = _daemonset(objects), _pod(objects), _container(objects)
    env = _env(objects)
    assert env["RIDGELINE_WEB_CONFIG"] == "/etc/ridgeline/web-config/web-config.yml"
    assert env["RIDGELINE_LOG_LEVEL"] == "debug"
    assert container["livenessProbe"]["httpGet"]["scheme"] == "HTTPS"
    assert container["readinessProbe"]["httpGet"]["scheme"] == "HTTPS"
    assert container["args"] == ["--interval", "2"]
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert mounts["web-config"]["readOnly"] is True and mounts["cards"]["mountPath"] == "/etc/ridgeline/cards"
    assert container["image"].endswith("@sha256:" + "ab" * 32)
    assert pod["imagePullSecrets"] == [{"name": "registry"}]
    assert pod["nodeSelector"]["example.com/gpu"] == "yes"
    assert pod["tolerations"][0]["key"] == "example.com/dedicated"
    assert "nodeAffinity" in pod["affinity"] and "priorityClassName" not in pod
    template = daemonset["spec"]["template"]["metadata"]
    assert template["labels"]["example.com/team"] == "gpu"
    assert template["annotations"] == {"example.com/owner": "sre"}
    service = next(s for s in by_kind(objects, "Service") if s["metadata"]["name"] == "ridgeline-roofline")
    assert service["metadata"]["annotations"] == {"example.com/svc": "yes"}
    assert only(objects, "ServiceAccount")["metadata"]["annotations"] == {"example.com/team": "gpu"}
    (endpoint,) = only(objects, "ServiceMonitor")["spec"]["endpoints"]
    assert (endpoint["interval"], endpoint["scrapeTimeout"], endpoint["honorLabels"]) == ("30s", "20s", True)
    assert endpoint["relabelings"][-1] == {
        "action": "replace",
        "targetLabel": "cluster",
        "replacement": "east",
    }
    assert endpoint["relabelings"][0]["targetLabel"] == "node", "the chart's node label comes first"
    assert endpoint["metricRelabelings"] == [
        {"action": "drop", "sourceLabels": ["__name__"], "regex": "x_.*"}
    ]


def test_default_tolerates_the_gpu_taint() -> None:
    tolerations = _pod(render())["tolerations"]
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in tolerations


def test_host_network_resolves_cluster_names() -> None:
    pod = _pod(render({"hostNetwork": True}))
    assert pod["hostNetwork"] is True and pod["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert "hostNetwork" not in _pod(render())


def test_runbook_url_base_moves_every_alert_link_and_nothing_else() -> None:
    default = only(render(), "PrometheusRule")
    moved = only(render({"runbookUrlBase": "https://wiki.example.com/gpu"}), "PrometheusRule")
    alerts = [r for g in moved["spec"]["groups"] for r in g["rules"] if "alert" in r]
    assert alerts and all(
        r["annotations"]["runbook_url"] == "https://wiki.example.com/gpu#" + r["alert"].lower()
        for r in alerts
    )
    for group in default["spec"]["groups"]:
        for rule in group["rules"]:
            if "alert" in rule:
                rule["annotations"]["runbook_url"] = "https://wiki.example.com/gpu#" + rule["alert"].lower()
    assert moved["spec"] == default["spec"]


def test_kustomize_runbook_component_moves_the_links_too(overlay: Path) -> None:
    names = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "ridgeline-names", "annotations": {"config.kubernetes.io/local-config": "true"}},
        "data": {"runbookUrlBase": "https://wiki.example.com/gpu"},
    }
    (overlay / "names.yaml").write_text(yaml.safe_dump(names))
    folder = _kustomization(
        overlay, resources=[KUBE / "base", "names.yaml"], components=[KUBE / "components" / "runbook-url"]
    )
    objects = kustomize(folder)
    assert not [o for o in objects if o["metadata"]["name"] == "ridgeline-names"], "local-config is dropped"
    helm = only(render({"runbookUrlBase": "https://wiki.example.com/gpu"}), "PrometheusRule")
    assert only(objects, "PrometheusRule")["spec"] == helm["spec"]


def test_optional_objects_can_be_left_out() -> None:
    kinds = {o["kind"] for o in render(SHAPES["nothing-optional"])}
    assert kinds == {"DaemonSet"}


# -- values schema, chart README, subchart -----------------------------------------------------


def _leaf_keys(values: dict[str, Any], prefix: str = "") -> set[str]:
    """Dotted paths of values.yaml's keys, down to the first non-mapping or empty mapping."""
    keys: set[str] = set()
    for key, value in values.items():
        path = f"{prefix}{key}"
        if (
            isinstance(value, dict)
            and value
            and key
            not in (
                "resources",
                "podSecurityContext",
                "securityContext",
                "updateStrategy",
                "selector",
                "labels",
                "nodeSelector",
            )
        ):
            keys |= _leaf_keys(value, path + ".")
        else:
            keys.add(path)
    return keys


def _schema_at(schema: dict[str, Any], path: str) -> dict[str, Any]:
    node = schema
    for key in path.split("."):
        node = node["properties"][key]
    return node


def test_schema_documents_every_value_and_accepts_global() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    for path in sorted(_leaf_keys(values)):
        assert _schema_at(schema, path).get("description"), f"values.schema.json: {path} has no description"

    def walk(node: dict[str, Any], path: str) -> Iterator[str]:
        for key, child in node.get("properties", {}).items():
            yield f"{path}{key}" if child.get("description") else f"!{path}{key}"
            yield from walk(child, f"{path}{key}.")

    assert not [p for p in walk(schema, "") if p.startswith("!")], "every schema key has a description"
    assert render({"global": {"anything": 1}}), "Helm's global is accepted"


def test_chart_readme_values_table_covers_values_yaml() -> None:
    readme = (CHART / "README.md").read_text()
    rows = dict(re.findall(r"^\| `([^`]+)` \| ([^|]+) \|", readme, flags=re.M))
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    keys = _leaf_keys(values)
    assert keys - set(rows) == set(), f"README.md's values table lacks {sorted(keys - set(rows))}"
    assert set(rows) - keys == set(), (
        f"README.md's values table names unknown keys {sorted(set(rows) - keys)}"
    )
    for key, default in rows.items():
        if default != "see values.yaml":
            value: Any = values
            for part in key.split("."):
                value = value[part]
            assert json.loads(default.strip("`")) == value, f"README.md: {key}'s default is {value!r}"


def package(destination: Path) -> Path:
    """`helm package deploy/helm/ridgeline`: the .tgz a registry or an umbrella chart gets."""
    chart = helm_python.Chart.load(str(CHART))
    try:
        return Path(chart.save(str(destination)))
    finally:
        chart.close()


def test_packaged_chart_leaves_the_examples_out_and_renders_the_same(tmp_path: Path) -> None:
    archive = package(tmp_path)
    assert archive.name == f"ridgeline-{generate.project_version(ROOT)}.tgz"
    with tarfile.open(archive) as tar:
        names = set(tar.getnames())
    assert "ridgeline/README.md" in names and "ridgeline/values.schema.json" in names
    assert not [n for n in names if n.startswith("ridgeline/examples/")], ".helmignore keeps examples out"
    files = render_files(archive, {})
    assert files == render_files(CHART, {})


def test_chart_works_as_a_subchart(tmp_path: Path) -> None:
    """As `helm dependency update` leaves it: the packaged chart in the umbrella's charts/."""
    umbrella = tmp_path / "platform"
    (umbrella / "charts").mkdir(parents=True)
    package(umbrella / "charts")
    (umbrella / "Chart.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v2",
                "name": "platform",
                "version": "1.0.0",
                "dependencies": [
                    {
                        "name": "ridgeline",
                        "version": yaml.safe_load((CHART / "Chart.yaml").read_text())["version"],
                        "repository": f"file://{CHART}",
                        "condition": "ridgeline.enabled",
                    }
                ],
            }
        )
    )
    (umbrella / "values.yaml").write_text(
        yaml.safe_dump(
            {
                "global": {"imageRegistry": "registry.example"},
                "ridgeline": {"enabled": True, "prometheus": {"selectorLabels": {"release": "kps"}}},
            }
        )
    )
    with pytest.raises(Exception, match="typo"):
        render_files(umbrella, {"ridgeline": {"enabled": True, "typo": 1}}, name="platform")
    files = render_files(umbrella, {}, name="platform", namespace="gpu-monitoring")
    objects = [d for p, t in sorted(files.items()) if p.endswith(".yaml") for d in yaml.safe_load_all(t) if d]
    assert {p.split("/templates/")[0] for p in files} == {"platform/charts/ridgeline"}
    validate_all(objects)
    daemonset = _daemonset(objects)
    assert daemonset["metadata"]["name"] == "platform-ridgeline"
    assert daemonset["metadata"]["namespace"] == "gpu-monitoring"
    assert only(objects, "PrometheusRule")["metadata"]["labels"]["release"] == "kps"
    off = render_files(umbrella, {"ridgeline": {"enabled": False}}, name="platform")
    assert not [p for p in off if p.endswith(".yaml") and off[p].strip()]
