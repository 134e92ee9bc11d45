"""The Helm chart deploy/helm/ridgeline: `helm lint --strict` and `helm template` through
helm-python-sdk (which embeds Helm), every rendering validated strictly with kubernetes-validate,
and the rendered objects equal to kustomize's for each shape — so chart and kustomize base, both
generated from the same files by deploy/generate.py, cannot drift apart."""

from __future__ import annotations

import copy
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import generate
import helm_python  # type: ignore[import-untyped]
import helmchart
import pytest
import yaml
from test_deploy import CHART, KUBE, NAMES, by_kind, kustomize, only, validate_all

KUBE_VERSION = "v1.31.0"


def render(
    values: dict[str, Any] | None = None, *, name: str = "ridgeline", namespace: str = "ridgeline"
) -> list[dict[str, Any]]:
    """`helm template` of the chart: every object it renders."""
    chart = helm_python.Chart.load(str(CHART))
    try:
        files = chart.render(values or {}, name=name, namespace=namespace)
    finally:
        chart.close()
    objects = []
    for path, text in sorted(files.items()):
        if path.endswith(".yaml"):
            objects.extend(doc for doc in yaml.safe_load_all(text) if doc)
    return objects


def lint(values: dict[str, Any] | None = None) -> dict[str, Any]:
    result: dict[str, Any] = helm_python.lint(
        str(CHART), values or {}, strict=True, namespace="ridgeline", kube_version=KUBE_VERSION
    )
    return result


def without_helm_labels(obj: Any) -> Any:
    """The object minus the labels only Helm adds (chart, instance, managed-by, version)."""
    if isinstance(obj, dict):
        return {k: without_helm_labels(v) for k, v in obj.items() if k not in helmchart.HELM_LABELS}
    if isinstance(obj, list):
        return [without_helm_labels(v) for v in obj]
    return obj


def keyed(objects: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(o["kind"], o["metadata"]["name"]): without_helm_labels(o) for o in objects}


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
        assert not found, f"{key[0]}/{key[1]} differs between the chart and kustomize: " + "; ".join(found)


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


# -- lint --------------------------------------------------------------------------------------

SHAPES: dict[str, dict[str, Any]] = {
    "defaults": {},
    "kubelet-attribution": {"kubeletAttribution": {"enabled": True}},
    "nvml": {"source": {"mode": "nvml"}},
    "everything": {
        "createNamespace": True,
        "image": {"digest": "sha256:" + "ab" * 32},
        "imagePullSecrets": [{"name": "registry"}],
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
        "podAnnotations": {"example.com/owner": "sre"},
        "priorityClassName": "",
        "webConfig": {"secretName": "ridgeline-web", "tls": True},
        "serviceMonitor": {
            "labels": {"release": "kube-prometheus-stack"},
            "scheme": "https",
            "tlsConfig": {"insecureSkipVerify": True},
        },
        "prometheusRule": {"labels": {"release": "kube-prometheus-stack"}},
        "runbookUrlBase": "https://wiki.example.com/gpu/runbooks",
    },
    "nothing-optional": {
        "serviceMonitor": {"enabled": False},
        "prometheusRule": {"enabled": False},
        "dashboards": {"enabled": False},
    },
}


@pytest.mark.parametrize("values", SHAPES.values(), ids=SHAPES.keys())
def test_helm_lint_strict_is_clean(values: dict[str, Any]) -> None:
    result = lint(values)
    assert result["errors"] == [], result
    # INFO ("icon is recommended") is all that may remain; WARNING and ERROR fail --strict anyway.
    assert all(m["severity"] <= 1 for m in result["messages"]), result["messages"]


@pytest.mark.parametrize("values", SHAPES.values(), ids=SHAPES.keys())
def test_helm_template_validates_strictly(values: dict[str, Any]) -> None:
    objects = render(values)
    assert {"ServiceAccount", "DaemonSet", "Service"} <= {o["kind"] for o in objects}
    validate_all(objects)


@pytest.mark.parametrize(
    ("values", "needle"),
    [
        ({"source": {"mode": "dcgm"}}, "/source/mode"),
        ({"servicemonitor": {"enabled": False}}, "'servicemonitor' not allowed"),
        ({"image": {"digest": "latest"}}, "/image/digest"),
        ({"runbookUrlBase": "https://wiki.example.com/x#frag"}, "/runbookUrlBase"),
        ({"serviceMonitor": {"interval": "fifteen"}}, "/serviceMonitor/interval"),
    ],
)
def test_helm_lint_names_a_bad_value(values: dict[str, Any], needle: str) -> None:
    errors = "\n".join(lint(values)["errors"])
    assert needle in errors, errors


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


# -- values that change objects ----------------------------------------------------------------


def _daemonset(objects: list[dict[str, Any]]) -> dict[str, Any]:
    return only(objects, "DaemonSet")


def test_release_name_scopes_object_names_and_selectors() -> None:
    objects = render(name="gpu", namespace="monitoring")
    daemonset = _daemonset(objects)
    assert daemonset["metadata"]["name"] == "gpu-ridgeline"
    assert {o["metadata"]["namespace"] for o in objects} == {"monitoring"}
    selector = daemonset["spec"]["selector"]["matchLabels"]
    assert selector["app.kubernetes.io/instance"] == "gpu"
    assert only(objects, "Service")["spec"]["selector"] == selector
    assert only(objects, "ServiceMonitor")["spec"]["selector"]["matchLabels"] == selector
    assert daemonset["spec"]["template"]["spec"]["serviceAccountName"] == "gpu-ridgeline"
    assert by_kind(objects, "Namespace") == [], "createNamespace defaults to false"


def test_image_repository_and_tag_come_from_names_and_version() -> None:
    container = _daemonset(render())["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == f"{NAMES.image_repository}:{generate.project_version(generate.ROOT)}"
    custom = {"image": {"repository": "registry.example/gpu/ridgeline", "tag": "9.9"}}
    assert _daemonset(render(custom))["spec"]["template"]["spec"]["containers"][0]["image"] == (
        "registry.example/gpu/ridgeline:9.9"
    )


def test_web_config_mounts_the_secret_and_switches_probes_to_https() -> None:
    container = _daemonset(render(SHAPES["everything"]))["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["RIDGELINE_WEB_CONFIG"] == "/etc/ridgeline/web-config/web-config.yml"
    assert env["RIDGELINE_LOG_LEVEL"] == "debug"
    assert container["livenessProbe"]["httpGet"]["scheme"] == "HTTPS"
    assert container["readinessProbe"]["httpGet"]["scheme"] == "HTTPS"
    assert container["args"] == ["--interval", "2"]
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert mounts["web-config"]["readOnly"] is True and mounts["cards"]["mountPath"] == "/etc/ridgeline/cards"
    assert container["image"].endswith("@sha256:" + "ab" * 32)


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
    assert kinds == {"ServiceAccount", "DaemonSet", "Service"}


# -- the generator's pieces --------------------------------------------------------------------


def test_merge_follows_kustomize_for_env_lists_and_maps() -> None:
    base = {"env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}], "sc": {"x": 1, "y": [1]}}
    patch = {
        "env": [{"name": "B", "$patch": "delete"}, {"name": "C", "value": "3"}, {"name": "A", "value": "9"}],
        "sc": {"y": [2]},
    }
    assert helmchart.merge(base, patch) == {
        "env": [{"name": "C", "value": "3"}, {"name": "A", "value": "9"}],
        "sc": {"x": 1, "y": [2]},
    }


def test_template_refuses_a_token_it_cannot_place() -> None:
    t = helmchart.Template()
    token = t.scalar(".Values.x")
    with pytest.raises(ValueError, match="cannot expand"):
        t.expand(f"key: prefix {token}\n")
