"""Around chat completions: the model call, the regenerate loop, the protected call and its streams.

``models`` (the model client and the offline writer), ``generate`` (render → call → redact →
guard → regenerate), ``protection`` (one protected exchange), ``streaming`` (the hold-back),
``wrapper`` (``dpllm.wrap``, the drop-in client). Import from the modules: this package's
``__init__`` stays empty so that ``import dpllm.chat`` does not load Presidio.
"""
