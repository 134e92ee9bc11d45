"""Who holds each GPU: Kubernetes pods (kubelet.py, devices.py) and HPC jobs (hpc.py), each map
kept fresh by one RefreshThread (refresh.py).

No re-exports: importing kubelet.py loads grpc and protobuf (their RSS: docs/deployment.md,
"Pod attribution"), so only `serve` with a kubelet socket imports it (exporter/commands/serve.py),
and hpc.py does not.
Generated stubs: podresources_pb2.py, podresources_pb2.pyi, podresources_pb2_grpc.py
(regenerate with regenerate.sh).
"""
