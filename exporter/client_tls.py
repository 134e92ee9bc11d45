"""The TLS context of Ridgeline's own HTTP clients (`ridgeline top` to its nodes, `ridgeline
report` to Prometheus): one rule for the CA file, the client certificate and skipping
verification. Standard library only."""

from __future__ import annotations

import ssl


def client_context(
    *, ca_file: str | None, cert_file: str | None, key_file: str | None, insecure: bool
) -> ssl.SSLContext:
    """The system's CAs (or `ca_file`), a client certificate when `cert_file` is given, and no
    verification at all when `insecure`. A bad file raises OSError or ssl.SSLError, for the
    caller to name in its own error."""
    context = ssl.create_default_context(cafile=ca_file)
    if cert_file:
        context.load_cert_chain(cert_file, key_file)
    if insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context
