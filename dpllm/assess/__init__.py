"""Assessment tools: planning a budget, auditing the mechanisms empirically, utility curves.

``planning`` (``dpllm plan``), ``audit_suite`` (``dpllm audit``), ``utility`` (error against ε).
"""
