"""Result objects: plain data (a JSON document of the CLI) with attribute access."""

from __future__ import annotations

from ._errors import UsageError


def _wrap(value: Any) -> Any:
    if isinstance(value, dict):
        return Result(value)
    if isinstance(value, list):
        return [_wrap(v) for v in value]
    return value


def normalize_gpu_name(name: str) -> str:
    """The hardware registry's spelling rule: lower case, without '-', '_' and spaces
    (``H100``, ``h100-80gb`` and ``H100 80GB`` are the same alias)."""
    return "".join(c for c in name.lower() if c not in "-_ ")


class Result:
    """A JSON document of the ``mme`` CLI (``--json``) as an object.

    ``r.peak.total_bytes`` and ``r["peak"]["total_bytes"]`` read the same field; nested
    objects are :class:`Result` too, lists are lists. ``to_dict()`` returns the document itself
    (a deep copy), exactly as ``mme ... --json`` prints it. Results are picklable and compare
    equal when their documents are equal.
    """

    __slots__ = ("_doc",)

    def __init__(self, document: dict[str, Any]) -> None:
        object.__setattr__(self, "_doc", document)

    def to_dict(self) -> dict[str, Any]:
        """The document, as ``json.loads`` of the CLI's ``--json`` output gives it."""
        import copy

        return copy.deepcopy(self._doc)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        try:
            return _wrap(self._doc[name])
        except KeyError:
            raise AttributeError(f"{type(self).__name__} has no field '{name}' "
                                 f"(fields: {', '.join(self._doc)})") from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is read-only")

    def __getitem__(self, key: str) -> Any:
        return _wrap(self._doc[key])

    def __contains__(self, key: object) -> bool:
        return key in self._doc

    def __iter__(self) -> Iterator[str]:
        return iter(self._doc)

    def keys(self) -> Any:
        return self._doc.keys()

    def get(self, key: str, default: Any = None) -> Any:
        return _wrap(self._doc.get(key, default))

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(self._doc))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Result):
            return type(self) is type(other) and self._doc == other._doc
        return NotImplemented

    def __hash__(self) -> int:
        raise TypeError(f"unhashable type: '{type(self).__name__}'")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self._doc,))

    def __repr__(self) -> str:
        keys = ", ".join(list(self._doc)[:8])
        more = ", ..." if len(self._doc) > 8 else ""
        return f"{type(self).__name__}({keys}{more})"


class Estimate(Result):
    """The result of :func:`mme.estimate`: the ``mme estimate --json`` document (schema_version
    1, docs/cli.md): ``model``, ``setup``, ``stages`` (one per pipeline rank), ``peak``,
    ``fits`` (one per judged GPU), ``layer_kinds``, ``assumptions``, ``warnings``,
    ``next_steps``. It remembers the names and aliases of the GPUs it judged, from the profiles of
    its own call (its ``hardware_files`` and ``plugin_dirs``), for :meth:`fits`."""

    __slots__ = ("_aliases",)

    def __init__(self, document: dict[str, Any], aliases: dict[str, str] | None = None) -> None:
        super().__init__(document)
        object.__setattr__(self, "_aliases", dict(aliases or {}))

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self._doc, self._aliases))

    def fits(self, gpu: str | None = None) -> bool:
        """Whether the peak fits ``gpu`` (a name or alias among the judged GPUs: ``"H100"``).
        Without ``gpu``: the verdict of the one GPU judged (``estimate(..., gpu=...)``)."""
        return bool(self.fit(gpu)["fits"])

    def fit(self, gpu: str | None = None) -> Result:
        """The ``fits[]`` entry of ``gpu`` (``hardware``, ``capacity_bytes``, ``usable_bytes``,
        ``fits``, ``headroom_bytes``)."""
        entries = self._doc.get("fits", [])
        if gpu is None:
            if len(entries) != 1:
                raise UsageError(f"fits(): {len(entries)} GPUs were judged; name one "
                                 f"({', '.join(e['hardware'] for e in entries)})")
            return Result(entries[0])
        wanted = normalize_gpu_name(gpu)
        for e in entries:
            if normalize_gpu_name(e["hardware"]) == wanted:
                return Result(e)
        # An alias: the canonical name from the profiles of the call that made this estimate.
        canonical = self._aliases.get(wanted)
        for e in entries:
            if canonical and e["hardware"] == canonical:
                return Result(e)
        judged = ", ".join(e["hardware"] for e in entries) or "none"
        raise UsageError(f"fits: GPU '{gpu}' was not judged in this estimate (judged: {judged})")

    @property
    def peak_stage(self) -> Result:
        """The stage with the largest total (``stages[peak.pp_rank]``)."""
        return Result(self._doc["stages"][self._doc["peak"]["pp_rank"]])


class Plan(Result):
    """The result of :func:`mme.plan`: the ``mme plan --json`` document (docs/planner.md)."""

    __slots__ = ()
