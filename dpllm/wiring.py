"""Deprecated alias of :mod:`dpllm.weekly.wiring` (moved in dpllm 0.2; removed in 0.3)."""

from dpllm._moved import alias

alias(__name__, "dpllm.weekly.wiring")
