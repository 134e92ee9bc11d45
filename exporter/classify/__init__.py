"""The roofline question as a service: the request bodies and the answers, shared by the CLI and
the HTTP API.

`models` validates a body (pydantic, no FastAPI) and `service` answers it with the roofline
math; `exporter.web` imports both, never the other way round, so `ridgeline classify` starts
without loading the web stack.
"""
