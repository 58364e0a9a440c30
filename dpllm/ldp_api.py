"""Deprecated alias of :mod:`dpllm.ldp.ingest` (moved in dpllm 0.2; removed in 0.3)."""

from dpllm._moved import alias

alias(__name__, "dpllm.ldp.ingest")
