"""Fakes of GPU libraries at their own API (DCGM's Python bindings, nvidia-ml-py), for tests."""
