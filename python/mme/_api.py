"""The functions of the mme package, over the C entry point (mme._core.run: one JSON request,
one JSON response; docs/python.md)."""

from __future__ import annotations

import functools
import json
import os
import warnings

# Only what every call needs is imported here (`import mme` is part of a script's start-up,
# docs/performance.md): difflib, logging and shlex when a call needs them. The annotations are
# not evaluated (from __future__ import annotations), so typing is not imported either.

from . import _core
from ._errors import MmeWarning, UsageError, error_from_response
from ._result import Estimate, Plan, Result

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


@functools.lru_cache(maxsize=None)
def _models_dir() -> str | None:
    # The bundled models: the package's models/ folder (in the build tree a link to
    # stage/share/mme/models, resolved so that paths in the documents are the CLI's).
    path = os.path.realpath(os.path.join(_PACKAGE_DIR, "models"))
    return path if os.path.isdir(path) else None


_LOG_LEVELS = {"trace": 5, "debug": 10, "info": 20}  # logging.DEBUG - 5, logging.DEBUG, logging.INFO


def _emit_log(lines: Iterable[Mapping[str, str]]) -> None:
    for line in lines:
        level, message = line.get("level", "warning"), line.get("message", "")
        if level in _LOG_LEVELS:
            import logging

            logging.getLogger("mme").log(_LOG_LEVELS[level], "%s", message)
        else:  # warning, error, critical: what the CLI prints as "mme: warning: ..."
            warnings.warn(message, MmeWarning, stacklevel=4)


def run_request(request: Mapping[str, Any]) -> dict[str, Any]:
    """Sends one request to the C entry point's request layer and returns the response document
    as it is (``{"ok", "exit_code", "result" | "text" | "error", "log"}``). The GIL is released
    while it runs, and requests from several threads run at the same time. Most code wants
    :func:`estimate` and its siblings instead."""
    return json.loads(_core.run(json.dumps(dict(request)), _models_dir() or ""))


def _response(command: str, args: Mapping[str, Any]) -> dict[str, Any]:
    response = run_request({"api_version": _core.api_version, "command": command, "args": dict(args)})
    _emit_log(response.get("log", []))
    if not response.get("ok"):
        raise error_from_response(response.get("error", {}), int(response.get("exit_code", 1)))
    return response


def _call(command: str, args: Mapping[str, Any]) -> Any:
    response = _response(command, args)
    return response["result"] if "result" in response else response.get("text", "")


# --- keyword arguments from the setup schema --------------------------------------------------


@functools.lru_cache(maxsize=None)
def schema() -> dict[str, Any]:
    """The setup schema (framework/include/mme/inputs/setup_schema.hpp) as data: ``knobs`` (each
    with its ``flag``, ``aliases``, ``off_flag``, ``switches``, ``kind``, ``megatron`` spellings,
    ...), ``megatron_model_flags`` and ``megatron_not_modelled_flags``."""
    return _call("schema", {})


def _py(flag: str) -> str:
    return flag.replace("-", "_")


@functools.lru_cache(maxsize=None)
def setup_keywords() -> dict[str, dict[str, Any]]:
    """Every keyword argument the setup schema gives :func:`estimate` and :func:`plan`, by
    Python name (the CLI flag with '_' for '-': ``num_layers_in_last_pipeline_stage``), with the
    flag it becomes and the knob it sets."""
    out: dict[str, dict[str, Any]] = {}
    for knob in schema()["knobs"]:
        kind = knob["kind"]
        if kind == "bool":
            for name in (knob["id"], knob["flag"], knob["off_flag"]):
                if name:
                    out.setdefault(_py(name), {"flag": name, "kind": "bool", "knob": knob})
            continue
        for name in [knob["flag"], *knob["aliases"]]:
            if name:
                out.setdefault(_py(name), {"flag": name, "kind": kind, "knob": knob})
        for sw in knob["switches"]:
            out.setdefault(_py(sw["flag"]), {"flag": sw["flag"], "kind": "switch", "knob": knob})
    return out


def _unknown_keyword(function: str, name: str, accepted: Iterable[str]) -> UsageError:
    import difflib

    close = difflib.get_close_matches(name, list(accepted), n=1)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    return UsageError(f"{function}(): unknown keyword '{name}'{hint}")


def _env_value(value: Any) -> Any:
    if hasattr(value, "items"):  # a mapping NAME -> VALUE
        return [f"{k}={v}" for k, v in value.items()]
    if isinstance(value, str):
        return [value]
    return list(value)


def _setup_args(function: str, setup: Mapping[str, Any], options: Mapping[str, str]) -> dict[str, Any]:
    """The request's args for the setup keywords, or UsageError naming an unknown one."""
    known = setup_keywords()
    args: dict[str, Any] = {}
    for name, value in setup.items():
        entry = known.get(name)
        if entry is None:
            raise _unknown_keyword(function, name, [*known, *options])
        if value is None:
            continue
        flag = entry["flag"]
        if entry["kind"] in ("bool", "switch") and not isinstance(value, bool):
            raise UsageError(f"{function}(): {name} takes True or False, got {value!r}")
        if entry["kind"] == "env":
            value = _env_value(value)
        args[flag] = value
    return args


def _option_args(values: Mapping[str, Any], options: Mapping[str, str]) -> dict[str, Any]:
    args: dict[str, Any] = {}
    for name, flag in options.items():
        value = values.get(name)
        if value is None:
            continue
        if flag in ("hardware-file", "plugin-dir", "script-source"):
            value = [os.fspath(v) for v in ([value] if isinstance(value, (str, os.PathLike)) else value)]
        elif flag == "set" and isinstance(value, Mapping):
            value = [f"{k}={v}" for k, v in value.items()]
        elif isinstance(value, os.PathLike):
            value = os.fspath(value)
        args[flag] = value
    return args


_COMMON = {"plugin_dirs": "plugin-dir", "log_level": "log-level"}
_ESTIMATE_INPUTS = {"gpu": "gpu", "revision": "revision", "megatron_args": "megatron-args",
                    "megatron_args_file": "megatron-args-file", "config": "config",
                    "set": "set", "script_args": "script-arg", "script_sources": "script-source",
                    "extra_megatron_flags": "extra-megatron-flag", "assume_gpt_entry": "assume-gpt-entry",
                    "hardware_files": "hardware-file", **_COMMON}
_ESTIMATE_OPTIONS = {**_ESTIMATE_INPUTS, "fit_on": "fit-on", "headroom": "headroom",
                     "overhead_per_gpu": "overhead-per-gpu", "html": "html", "svg": "svg"}
_PLAN_OPTIONS = {"gpu": "gpu", "headroom": "headroom", "recompute": "recompute", "max_tp": "max-tp",
                 "gpus_per_node": "gpus-per-node", "inter_node_bandwidth": "inter-node-bandwidth",
                 "sort": "sort", "top": "top", "threads": "threads", "revision": "revision", "html": "html",
                 "max_candidates": "max-candidates", "no_overlap": "no-overlap",
                 "hardware_files": "hardware-file", **_COMMON}


def _split(function: str, kwargs: dict[str, Any], options: Mapping[str, str]) -> tuple[dict, dict]:
    explicit = {k: kwargs.pop(k) for k in list(kwargs) if k in options}
    return explicit, kwargs


def _megatron_text(value: Any) -> Any:
    if value is None or isinstance(value, str):
        return value
    import shlex

    return shlex.join(str(v) for v in value)


# --- the commands -------------------------------------------------------------------------------


def estimate(model: str | os.PathLike[str] | None = None, **kwargs: Any) -> Estimate:
    """The memory of each pipeline stage, as ``mme estimate MODEL ... --json``.

    ``model`` is a hub id, a ``config.json``, a folder holding one, or a bundled model
    (:func:`models`); or give ``megatron_args="--num-layers 32 ..."`` (a Megatron-LM launch line,
    or a list of its words), ``megatron_args_file=``, or ``config="spec.yaml"`` instead.

    Keyword arguments are the CLI's flags with '_' for '-': every knob of the setup schema
    (``tp``, ``pp``, ``vpp``, ``ep``, ``etp``, ``cp``, ``num_gpus``, ``micro_batch_size``,
    ``seq_length``, ``num_layers_in_last_pipeline_stage``, ``recompute_granularity``, ...; also
    the Megatron-LM spellings the CLI accepts, such as ``tensor_model_parallel_size``;
    :func:`setup_keywords` lists them), the launch script's ``set`` (a mapping or
    ``["NAME=VALUE", ...]``), ``script_args``, ``script_sources``, ``extra_megatron_flags`` and
    ``assume_gpt_entry``, and ``gpu``, ``revision``, ``fit_on``, ``headroom``,
    ``overhead_per_gpu``, ``html``, ``svg``, ``hardware_files``, ``plugin_dirs``, ``log_level``.
    Booleans are switches (``use_distributed_optimizer=True``; ``sequence_parallel=False`` gives
    ``--no-sequence-parallel``); ``None`` leaves a keyword out, as an absent flag.

    Returns an :class:`Estimate`; ``to_dict()`` is the ``--json`` document. Raises
    :class:`UsageError` for an unknown keyword or a bad value, and the other :class:`Error`
    classes as the CLI exits with them.
    """
    explicit, setup = _split("estimate", kwargs, _ESTIMATE_OPTIONS)
    if "megatron_args" in explicit:
        explicit["megatron_args"] = _megatron_text(explicit["megatron_args"])
    args: dict[str, Any] = {}
    if model is not None:
        args["model"] = os.fspath(model)
    args.update(_option_args(explicit, _ESTIMATE_OPTIONS))
    args.update(_setup_args("estimate", setup, _ESTIMATE_OPTIONS))
    response = _response("estimate", args)
    # The judged GPUs' names and aliases from this call's own profiles (its hardware_files and
    # plugin_dirs), for Estimate.fits("alias").
    return Estimate(response["result"], response.get("hardware_aliases"))


def plan(model: str | os.PathLike[str], **kwargs: Any) -> Plan:
    """Every valid layout of ``model`` on ``num_gpus`` GPUs, ranked, as ``mme plan MODEL ...
    --json`` (docs/planner.md). Keywords: ``num_gpus`` and the other setup knobs (a knob given
    fixes it: ``tp=4``), ``gpu``, ``headroom``, ``recompute``, ``max_tp``, ``gpus_per_node``,
    ``inter_node_bandwidth``, ``max_candidates``, ``no_overlap``, ``sort``, ``top``, ``threads``,
    ``revision``, ``html``, ``hardware_files``, ``plugin_dirs``, ``log_level``. Without ``gpu`` it
    plans for the GPU with the most memory (and warns); without ``num_gpus`` (and with ``gpu``) it
    finds how many GPUs the model needs (the document's ``gpu_counts``). Returns a :class:`Plan`."""
    explicit, setup = _split("plan", kwargs, _PLAN_OPTIONS)
    args: dict[str, Any] = {"model": os.fspath(model)}
    args.update(_option_args(explicit, _PLAN_OPTIONS))
    args.update(_setup_args("plan", setup, _PLAN_OPTIONS))
    return Plan(_call("plan", args))


def params(model: str | os.PathLike[str], *, revision: str | None = None,
           plugin_dirs: Sequence[str | os.PathLike[str]] | None = None, log_level: str | None = None) -> Result:
    """Exact total and active parameter counts, as ``mme params MODEL --json``."""
    args = {"model": os.fspath(model)}
    args.update(_option_args({"revision": revision, "plugin_dirs": plugin_dirs, "log_level": log_level},
                             {"revision": "revision", **_COMMON}))
    return Result(_call("params", args))


def models(*, plugin_dirs: Sequence[str | os.PathLike[str]] | None = None,
           log_level: str | None = None) -> list[Result]:
    """The bundled models, as the ``models`` list of ``mme models --json`` (name, family,
    adapter, parameter counts, path, warnings)."""
    doc = _call("models", _option_args({"plugin_dirs": plugin_dirs, "log_level": log_level}, _COMMON))
    return [Result(m) for m in doc["models"]]


def hardware(*, hardware_files: Sequence[str | os.PathLike[str]] | None = None,
             plugin_dirs: Sequence[str | os.PathLike[str]] | None = None,
             log_level: str | None = None) -> list[Result]:
    """The GPU profiles, smallest memory first, as the ``hardware`` list of ``mme hardware
    --json`` (name, vendor, memory, reserve, bandwidths, aliases, ...)."""
    doc = _call("hardware", _option_args({"hardware_files": hardware_files, "plugin_dirs": plugin_dirs,
                                          "log_level": log_level}, {"hardware_files": "hardware-file", **_COMMON}))
    return [Result(h) for h in doc["hardware"]]


_VALIDATE_OPTIONS = {"golden": "golden", "case": "case", "from_log": "from-log", "model": "model",
                     **_ESTIMATE_INPUTS}


def validate(csv: str | os.PathLike[str] | None = None, **kwargs: Any) -> Result:
    """Accuracy against measured Megatron-LM runs, as ``mme validate CASES.csv --json``:
    ``format``, ``cases``, ``summary``. ``golden=`` and ``case=`` filter the rows by regular
    expression. ``from_log="train.log"`` compares a training log per rank instead, with the run
    described as for :func:`estimate` (``model`` or ``megatron_args_file``, ``num_gpus``, ...)."""
    explicit, setup = _split("validate", kwargs, _VALIDATE_OPTIONS)
    if "megatron_args" in explicit:
        explicit["megatron_args"] = _megatron_text(explicit["megatron_args"])
    args: dict[str, Any] = {}
    if csv is not None:
        args["cases"] = os.fspath(csv)
    model = explicit.pop("model", None)
    if model is not None:
        if csv is not None:
            raise UsageError("validate(): give a CSV file or model= (with from_log=), not both")
        args["cases"] = os.fspath(model)  # the one positional argument: MODEL with --from-log
    args.update(_option_args(explicit, _VALIDATE_OPTIONS))
    args.update(_setup_args("validate", setup, _VALIDATE_OPTIONS))
    return Result(_call("validate", args))


def version() -> dict[str, Any]:
    """The versions: ``mme``, ``libmme``, ``plugin_api``, ``abi_tag``, ``api_version`` (of the
    C entry point's request format)."""
    return _call("version", {})

