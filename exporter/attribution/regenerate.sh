#!/bin/sh
# Regenerates the committed gRPC/protobuf stubs for the kubelet PodResources API.
#
# Run from anywhere:  sh exporter/attribution/regenerate.sh
# Needs grpcio-tools in the project venv (the `test` extra installs it).
# Produces podresources_pb2.py, podresources_pb2.pyi and podresources_pb2_grpc.py next to
# podresources.proto, then rewrites the stub's absolute "import podresources_pb2" into a
# package-relative import so that `exporter.attribution.podresources_pb2_grpc` imports cleanly.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
python=${PYTHON:-"$root/.venv/bin/python"}
cd "$here"
"$python" -m grpc_tools.protoc -I. --python_out=. --pyi_out=. --grpc_python_out=. podresources.proto
sed -i 's/^import podresources_pb2 as podresources__pb2$/from . import podresources_pb2 as podresources__pb2/' \
    podresources_pb2_grpc.py
grep -q '^from \. import podresources_pb2 as podresources__pb2$' podresources_pb2_grpc.py || {
    echo "regenerate.sh: could not make the stub import package-relative" >&2
    exit 1
}
