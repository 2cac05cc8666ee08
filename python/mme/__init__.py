"""mme: per-GPU memory estimates for Megatron-LM training, from Python.

    >>> import mme
    >>> r = mme.estimate("deepseek-ai/DeepSeek-V3", tp=4, pp=4, ep=8, num_gpus=128,
    ...                  num_layers_in_last_pipeline_stage=16)
    >>> r.peak.total_bytes, r.stages[0].total_gb, r.fits("H100")

The functions run the ``mme`` CLI's own code in-process (the C entry point, mme_c.h) with the
built-in plugins linked in and the bundled models shipped in the package; results are the
CLI's ``--json`` documents (``to_dict()``), errors the CLI's error classes with its exit codes.
docs/python.md has the whole API.
"""

from __future__ import annotations

from ._api import (estimate, hardware, models, params, plan, run_request, schema, setup_keywords, validate,
                   version)
from ._errors import (ConfigError, Error, InternalError, LayoutError, MmeWarning, NotFoundError, OutOfMemoryError,
                      PluginError, UsageError)
from ._megatron import from_megatron_args, known_megatron_flags, megatron_args_line, megatron_flags, preflight
from ._result import Estimate, Plan, Result

__version__: str = version()["mme"]

__all__ = [
    "ConfigError", "Error", "Estimate", "InternalError", "LayoutError", "MmeWarning", "NotFoundError",
    "OutOfMemoryError", "Plan", "PluginError", "Result", "UsageError", "__version__", "estimate",
    "from_megatron_args", "hardware", "known_megatron_flags", "megatron_args_line", "megatron_flags", "models",
    "params", "plan", "preflight", "run_request", "schema", "setup_keywords", "validate", "version",
]
