"""Reload `--web-config` while serving, so a certificate rotation or a new password needs no restart.

A daemon thread stats the file and the files it names once a second (and reloads at once on
SIGHUP, `request_reload`); a config that loads replaces the old one for later connections and
requests, one that does not is reported and the old one stays. Turning TLS or basic auth on or
off needs a restart (docs/daemon.md, "Attribution and web config").
"""

from __future__ import annotations

import logging
import os
import ssl
import threading
from pathlib import Path

from exporter.web.webconfig import PasswordChecker, WebConfig, WebConfigError, load_web_config, tls_context

log = logging.getLogger("exporter.web")

POLL_SECONDS = 1.0

Signature = tuple[tuple[int, int, int, int] | None, ...]


class WebConfigWatcher:
    """The web config in force: its TLS context and password checker, reloaded on change."""

    def __init__(
        self, path: str | os.PathLike[str], config: WebConfig, poll_seconds: float = POLL_SECONDS
    ) -> None:
        self.path = Path(path)
        self.config = config
        self._tls = tls_context(config, self.path)
        self._checker = _checker_for(config)
        self._signature = self._stat(config)
        self._poll = poll_seconds
        self._stop = threading.Event()
        self._forced = threading.Event()
        self._thread: threading.Thread | None = None
        self.reloads = 0
        """Successful reloads since start."""

    # what the server asks for, per connection and per request
    def tls_context(self) -> ssl.SSLContext | None:
        return self._tls

    def password_checker(self) -> PasswordChecker | None:
        return self._checker

    @property
    def tls(self) -> bool:
        return self._tls is not None

    # the thread
    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="ridgeline-webconfig", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._forced.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def request_reload(self) -> None:
        """Reload on the watcher's thread at once, whether or not a file changed (SIGHUP).
        Safe from a signal handler: it only sets an event."""
        self._forced.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            forced = self._forced.wait(self._poll)
            if self._stop.is_set():
                return
            self._forced.clear()
            try:
                self.check(force=forced)
            except Exception:  # a bug here must not end reloading for the life of the process
                log.exception("checking web config %s failed", self.path)

    def check(self, force: bool = False) -> bool:
        """Reload when a watched file changed (or `force`); True when a new config is now in force."""
        signature = self._stat(self.config)
        if signature == self._signature and not force:
            return False
        self._signature = signature
        try:
            config = load_web_config(self.path)
        except WebConfigError as exc:
            log.warning("web config changed but cannot be used, keeping the previous one: %s", exc)
            return False
        if (config.tls_server_config is None) != (self._tls is None):
            log.warning(
                "web config %s changed: turning TLS %s needs a restart; keeping the previous config",
                self.path,
                "on" if config.tls_server_config is not None else "off",
            )
            return False
        if self.config.basic_auth_users and not config.basic_auth_users:
            log.warning(
                "web config %s changed: it has no basic_auth_users any more; turning basic auth off "
                "needs a restart; keeping the previous config",
                self.path,
            )
            return False
        try:
            context = tls_context(config, self.path)
        except WebConfigError as exc:  # a file that changed between the check and the load
            log.warning("web config changed but cannot be used, keeping the previous one: %s", exc)
            return False
        checker = _checker_for(config, self._checker)
        self.config, self._tls, self._checker = config, context, checker
        self._signature = self._stat(config)  # the files it names may be new ones
        self.reloads += 1
        log.info(
            "web config %s reloaded%s (%s, %d basic-auth users)",
            self.path,
            " on request (SIGHUP)" if force else "",
            "TLS" if context is not None else "no TLS",
            len(config.basic_auth_users),
        )
        return True

    def _stat(self, config: WebConfig) -> Signature:
        files: list[Path] = [self.path]
        tls = config.tls_server_config
        if tls is not None:
            files += [tls.cert_file, tls.key_file]
            if tls.client_ca_file is not None:
                files.append(tls.client_ca_file)
        return tuple(_file_signature(f) for f in files)


def _file_signature(path: Path) -> tuple[int, int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _checker_for(config: WebConfig, previous: PasswordChecker | None = None) -> PasswordChecker | None:
    return PasswordChecker(config.basic_auth_users, previous) if config.basic_auth_users else None
