"""Megatron-LM's parsed arguments (``megatron.training.get_args()``) as input: the attribute
names of the argparse.Namespace are Megatron-LM's flag names with '_' for '-', and the setup
schema knows which of them mme reads (docs/python.md, "From a Megatron-LM training script")."""

from __future__ import annotations

import functools
import sys

from ._api import estimate, schema
from ._errors import OutOfMemoryError, UsageError
from ._result import Estimate

# Megatron-LM store_false switches whose attribute is not the flag's name without "no-".
_INVERTED = {
    "add_bias_linear": "disable-bias-linear",
    "apply_rope_fusion": "no-rope-fusion",
    "add_position_embedding": "no-position-embedding",
}
# Value flags whose attribute has another name (argparse dest=).
_RENAMED = {"fp8": "fp8-format"}
# Attributes validate_args() sets from another when their flag was not given (arguments.py:
# encoder_num_layers = num_layers, encoder_seq_length = seq_length): equal to it, left out.
_DERIVED = {"encoder_num_layers": "num_layers", "encoder_seq_length": "seq_length"}
# validate_args() turns the dtype flags into torch dtypes (main_grads_dtype "fp32" ->
# torch.float32): their flag spellings back.
_TORCH_DTYPES = {"torch.float32": "fp32", "torch.bfloat16": "bf16", "torch.float16": "fp16", "torch.uint8": "fp8"}


@functools.lru_cache(maxsize=None)
def known_megatron_flags() -> frozenset[str]:
    """The Megatron-LM flags mme reads (without "--"): each knob's Megatron-LM spellings, the
    flags that describe the model, and those with a memory effect mme names as not modelled."""
    s = schema()
    flags: set[str] = set(s["megatron_model_flags"]) | set(s["megatron_not_modelled_flags"])
    for knob in s["knobs"]:
        for key in ("megatron", "megatron_off", "megatron_extra"):
            flags.update(knob[key])
    return frozenset(flags)


def _text(value: Any) -> str:
    enum = sys.modules.get("enum")  # an Enum value exists only once enum is imported
    if enum is not None and isinstance(value, enum.Enum):
        return str(value.name)  # AttnBackend.flash -> flash
    text = str(value)
    if not isinstance(value, str) and text in _TORCH_DTYPES:
        return _TORCH_DTYPES[text]
    return text


def megatron_flags(args: Any) -> list[str]:
    """The Megatron-LM flags (``["--num-layers", "32", "--bf16", ...]``) that give ``args``, an
    argparse.Namespace as Megatron-LM parses it (or a mapping of the same names). Attributes mme
    does not read are left out (learning rates, data paths, ...), as are ``None`` values and the
    lengths Megatron-LM copies from others (``encoder_seq_length`` from ``seq_length``). A
    Namespace after Megatron-LM's tokenizer holds ``padded_vocab_size``, the rows the model was
    built with: it becomes ``--padded-vocab-size``, which mme takes as it is."""
    values: Mapping[str, Any] = args if hasattr(args, "items") else vars(args)
    known = known_megatron_flags()
    out: list[str] = []
    for name in sorted(values):
        value = values[name]
        if value is None or (name in _DERIVED and values.get(_DERIVED[name]) == value):
            continue
        flag = _RENAMED.get(name, name.replace("_", "-"))
        if isinstance(value, bool):
            if name in _INVERTED:
                if not value and _INVERTED[name] in known:
                    out.append("--" + _INVERTED[name])
            elif value and flag in known:
                out.append("--" + flag)
            elif not value and "no-" + flag in known:
                out.append("--no-" + flag)
            continue
        if flag not in known:
            continue
        if isinstance(value, (list, tuple)):
            if not value:
                continue
            if flag in ("moe-layer-freq", "window-attn-skip-freq"):  # parsed into one 0/1 per layer
                out += ["--" + flag, "[" + ",".join(_text(v) for v in value) + "]"]
            elif flag == "window-size":  # arguments.py tuple_type: "left,right"
                out += ["--" + flag, ",".join(_text(v) for v in value)]
            else:
                out += ["--" + flag, *(_text(v) for v in value)]
            continue
        out += ["--" + flag, _text(value)]
    return out


def megatron_args_line(args: Any) -> str:
    """:func:`megatron_flags` as one launch line (shell-quoted), as ``megatron_args=`` takes it."""
    import shlex

    return shlex.join(megatron_flags(args))


def from_megatron_args(args: Any, **options: Any) -> Estimate:
    """The estimate of a Megatron-LM run from its parsed arguments (``get_args()``): the same as
    ``estimate(megatron_args=...)`` with the flags of :func:`megatron_flags`. ``options`` are
    :func:`estimate`'s keywords (``gpu``, ``headroom``, a setup knob that overrides the run's)."""
    if "megatron_args" in options or "model" in options or "config" in options:
        raise UsageError("from_megatron_args(): the run is described by args; drop megatron_args/model/config")
    # Megatron-LM has no flag for the GPU count: get_args() holds it as world_size (from the launcher).
    values: Mapping[str, Any] = args if hasattr(args, "items") else vars(args)
    if values.get("world_size") is not None and "num_gpus" not in options:
        options["num_gpus"] = values["world_size"]
    return estimate(megatron_args=megatron_args_line(args), **options)


def preflight(args: Any, gpu: str | None = None, *, raise_if_oom: bool = True, **options: Any) -> Estimate:
    """A check before the model is built, one line in a training script::

        mme.preflight(get_args(), gpu="H100")

    Estimates the run of ``args`` (:func:`from_megatron_args`) and judges its peak stage on
    ``gpu``. If it does not fit, raises :class:`OutOfMemoryError` (``raise_if_oom=True``) or warns
    (``False``). Returns the :class:`Estimate` either way."""
    if not gpu:
        raise UsageError("preflight(): gpu= is required (a name or alias, see mme.hardware())")
    result = from_megatron_args(args, gpu=gpu, **options)
    verdict = result.fit(gpu)
    if verdict["fits"]:
        return result
    gib = 2.0**30
    needed = verdict["usable_bytes"] - verdict["headroom_bytes"]  # the peak, or its upper bound
    message = (f"{result['model']['name']} does not fit {verdict['hardware']}: pipeline stage "
               f"{result['peak']['pp_rank']} needs {needed / gib:.2f} GiB per GPU, "
               f"{verdict['usable_bytes'] / gib:.2f} GiB are usable "
               f"({-verdict['headroom_bytes'] / gib:.2f} GiB short)")
    steps = [s["change"] for s in result.to_dict().get("next_steps", [])]
    if steps:
        message += "; it would with " + " or ".join(steps[:3])
    if raise_if_oom:
        raise OutOfMemoryError(message, result=result)
    import warnings

    from ._errors import MmeWarning

    warnings.warn(message, MmeWarning, stacklevel=2)
    return result
