"""The Pod Security Standards' controls, checked on a rendered pod spec.

Written from the published standard (https://kubernetes.io/docs/concepts/security/pod-security-standards/,
the controls of the "baseline" and "restricted" policies as of Kubernetes 1.31), because no
maintained checker installs here and no API server can run the admission plugin. Each check
returns the violations it finds as "control: field" lines, so a failing test names the field.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

LEVELS = ("restricted", "baseline", "privileged")

BASELINE_CAPABILITIES = {
    "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE",
    "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
}  # fmt: skip
SAFE_SYSCTLS = {
    "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
}  # fmt: skip
SELINUX_TYPES = {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}
RESTRICTED_VOLUMES = {
    "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected",
    "secret",
}  # fmt: skip


def _containers(pod: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for kind in ("initContainers", "containers", "ephemeralContainers"):
        for container in pod.get(kind) or []:
            yield f"{kind}[{container.get('name')}]", container


def baseline_violations(pod: dict[str, Any], annotations: dict[str, str] | None = None) -> list[str]:
    """What the baseline policy forbids in this pod spec."""
    found: list[str] = []
    security = pod.get("securityContext") or {}
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(field):
            found.append(f"host namespaces: spec.{field}")
    if (security.get("windowsOptions") or {}).get("hostProcess"):
        found.append("HostProcess: spec.securityContext.windowsOptions.hostProcess")
    for volume in pod.get("volumes") or []:
        if "hostPath" in volume:
            found.append(f"HostPath volumes: spec.volumes[{volume['name']}].hostPath")
    found += _seccomp_and_selinux(security, "spec.securityContext", baseline=True)
    for sysctl in security.get("sysctls") or []:
        if sysctl.get("name") not in SAFE_SYSCTLS:
            found.append(f"sysctls: spec.securityContext.sysctls[{sysctl.get('name')}]")
    for key, value in (annotations or {}).items():
        if key.startswith("container.apparmor.security.beta.kubernetes.io/") and not (
            value == "runtime/default" or value.startswith("localhost/")
        ):
            found.append(f"AppArmor: metadata.annotations[{key}]")
    for where, container in _containers(pod):
        context = container.get("securityContext") or {}
        if context.get("privileged"):
            found.append(f"privileged containers: {where}.securityContext.privileged")
        if (context.get("windowsOptions") or {}).get("hostProcess"):
            found.append(f"HostProcess: {where}.securityContext.windowsOptions.hostProcess")
        added = set((context.get("capabilities") or {}).get("add") or [])
        for capability in sorted(added - BASELINE_CAPABILITIES):
            found.append(f"capabilities: {where}.securityContext.capabilities.add[{capability}]")
        for port in container.get("ports") or []:
            if port.get("hostPort"):
                found.append(f"host ports: {where}.ports[{port.get('name')}].hostPort")
        if context.get("procMount", "Default") != "Default":
            found.append(f"/proc mount type: {where}.securityContext.procMount")
        found += _seccomp_and_selinux(context, f"{where}.securityContext", baseline=True)
    return found


def _seccomp_and_selinux(context: dict[str, Any], where: str, *, baseline: bool) -> list[str]:
    found = []
    if (context.get("seccompProfile") or {}).get("type") == "Unconfined":
        found.append(f"seccomp: {where}.seccompProfile.type Unconfined")
    apparmor = (context.get("appArmorProfile") or {}).get("type")
    if apparmor not in (None, "RuntimeDefault", "Localhost"):
        found.append(f"AppArmor: {where}.appArmorProfile.type {apparmor}")
    selinux = context.get("seLinuxOptions") or {}
    if selinux.get("type", "") not in SELINUX_TYPES:
        found.append(f"SELinux: {where}.seLinuxOptions.type")
    for field in ("user", "role"):
        if selinux.get(field):
            found.append(f"SELinux: {where}.seLinuxOptions.{field}")
    return found


def restricted_violations(pod: dict[str, Any], annotations: dict[str, str] | None = None) -> list[str]:
    """What the restricted policy forbids: everything baseline forbids, and more."""
    found = baseline_violations(pod, annotations)
    security = pod.get("securityContext") or {}
    for volume in pod.get("volumes") or []:
        kinds = set(volume) - {"name"}
        if not kinds <= RESTRICTED_VOLUMES:
            found.append(f"volume types: spec.volumes[{volume['name']}] is {', '.join(sorted(kinds))}")
    if security.get("runAsUser") == 0:
        found.append("running as non-root user: spec.securityContext.runAsUser 0")
    pod_seccomp = (security.get("seccompProfile") or {}).get("type")
    for where, container in _containers(pod):
        context = container.get("securityContext") or {}
        if context.get("allowPrivilegeEscalation") is not False:
            found.append(f"privilege escalation: {where}.securityContext.allowPrivilegeEscalation")
        non_root = context.get("runAsNonRoot", security.get("runAsNonRoot"))
        if non_root is not True:
            found.append(f"running as non-root: {where}.securityContext.runAsNonRoot")
        if context.get("runAsUser") == 0:
            found.append(f"running as non-root user: {where}.securityContext.runAsUser 0")
        seccomp = (context.get("seccompProfile") or {}).get("type", pod_seccomp)
        if seccomp not in ("RuntimeDefault", "Localhost"):
            found.append(f"seccomp: {where}.securityContext.seccompProfile (and the pod's) unset")
        capabilities = context.get("capabilities") or {}
        if "ALL" not in (capabilities.get("drop") or []):
            found.append(f"capabilities: {where}.securityContext.capabilities.drop lacks ALL")
        for capability in sorted(set(capabilities.get("add") or []) - {"NET_BIND_SERVICE"}):
            found.append(f"capabilities: {where}.securityContext.capabilities.add[{capability}] (restricted)")
    return sorted(set(found))


def level(pod: dict[str, Any], annotations: dict[str, str] | None = None) -> str:
    """The strictest Pod Security level this pod spec meets."""
    if not restricted_violations(pod, annotations):
        return "restricted"
    if not baseline_violations(pod, annotations):
        return "baseline"
    return "privileged"
