"""Variable checkpoints: what an agent run's code changed in the user's namespace, kept so that an
undo of the run (``%agent undo``, the page's "Undo run") puts the variables back.

This module owns the checkpoint of each run and its undo: copies of what the names the code
mentions hold (:mod:`.code_names` finds those names from its ``ast``), taken before the code runs;
what could not be copied (said to the user before the code runs, never skipped silently); the
check after each call of which names really changed; the per-run memory cap; and the restore. It
does not own when the code runs (``run_python`` in :mod:`.tools.python`, ``run_cell`` /
``run_new_cell`` in :mod:`.tools._cell_runs` call :meth:`VariableCheckpoints.before` and ``after``
around it), the cells' undo (the page's, :mod:`.live_notebook`), nor the report's wording
(:mod:`.undo_report`).

How a run's checkpoint is made, per call of the agent's code, on the kernel's main thread:

- *Rebinding* needs no copy: the object a name was bound to before the run is kept by reference,
  and every name whose binding changed during a call is found by comparing the namespace's
  bindings before and after (this also catches ``global`` in functions, ``exec`` and star
  imports, which the ``ast`` cannot see). Names the run created are deleted on undo; names it
  rebound or deleted get their old object back.
- *Mutation* needs a copy taken before the code runs: every name the code mentions (reads,
  assigns, augments, stores into, deletes) that holds a mutable value is copied — a pandas object
  shallow under pandas' copy-on-write (the code's first write to a block copies that block; no
  cost before), else with ``copy(deep=True)``; a numpy array with ``.copy()``; anything else with
  ``copy.deepcopy`` — once per run and object (a second call of the same run, or a second name
  for the same object, reuses the copy). After the call a content check (the same buffers under
  copy-on-write, else ``DataFrame.equals``, ``array_equal``, ``==``) says whether it changed; at
  the end of the run the copies of objects that did not change are dropped, so a checkpoint holds
  only what an undo needs.
- What cannot be copied (a generator, an open file, a socket, an object whose copy raises) or
  would take the run past its memory cap (:data:`CAP_ENV` / ``%config AgentMagics.undo_memory``;
  by default the smaller of 2 GiB and a quarter of the available memory) is reported before the
  code runs. Modules, functions and classes are code, not data: they are not copied, and reported
  only when the code assigns into them (``module.attr = ...``); a call that changes a module's
  state (``np.random.seed``) is not undone.

Undo of a run restores each name it changed, unless a later run changed it too (undo that one
first) or it was rebound since the run (by the user or anyone): those are left as they are and
reported, as the cells the user changed since are. A mutated list, dict, set or numpy array is
put back in place (other names for the same object see it); a DataFrame is rebound to its copy.
Mutations of objects the code does not name (a user function called by the code that changes a
global it does not mention) are not seen. The last :data:`MAX_RUNS` runs keep a checkpoint.
"""

from __future__ import annotations

import copy
import os
import re
import sys
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from .code_names import CodeNames, code_names

__all__ = [
    "CAP_ENV",
    "MAX_RUNS",
    "CallCheckpoint",
    "Uncovered",
    "VariableCheckpoints",
    "VariablesUndone",
    "copy_value",
    "default_cap",
    "estimate_bytes",
    "pandas_copy_on_write",
    "parse_size",
]

#: Environment variable with the per-run memory cap of the copies, e.g. "4GB", "500MB", "0" (none).
CAP_ENV: Final = "IPYAGENT_UNDO_MEMORY"
#: Runs whose checkpoint is kept; an older one's is dropped (its undo says so).
MAX_RUNS: Final = 20
_GIB = 1 << 30


class _Missing:
    """The name was not bound (before the run: the run created it)."""

    def __repr__(self) -> str:
        return "<missing>"


MISSING: Final = _Missing()


# -- copies --------------------------------------------------------------------------------------

_ATOMS = (int, float, complex, str, bytes, bool, type(None), range, type(Ellipsis))


def _immutable(value: Any, depth: int = 0) -> bool:
    if isinstance(value, _ATOMS):
        return True
    if isinstance(value, tuple | frozenset):
        return depth < 3 and len(value) <= 1_000 and all(_immutable(v, depth + 1) for v in value)
    module = type(value).__module__
    if module in ("datetime", "decimal", "fractions"):
        return True
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(value, numpy.generic):
        return True
    pandas = sys.modules.get("pandas")
    return pandas is not None and isinstance(value, pandas.Timestamp | pandas.Timedelta | pandas.Period)


def _is_code(value: Any) -> bool:
    import types

    return isinstance(
        value,
        type
        | types.ModuleType
        | types.FunctionType
        | types.BuiltinFunctionType
        | types.MethodType
        | types.BuiltinMethodType,
    )


def _pandas_kind(value: Any) -> bool:
    pandas = sys.modules.get("pandas")
    return pandas is not None and isinstance(value, pandas.DataFrame | pandas.Series | pandas.Index)


def _numpy_array(value: Any) -> bool:
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(value, numpy.ndarray)


def estimate_bytes(value: Any) -> int:
    """About how many bytes a copy of ``value`` takes (a pandas object's memory without the
    Python objects its object columns point to, which its copy shares; an array's buffer; a
    bounded walk of containers and instance dicts otherwise)."""
    if _pandas_kind(value):
        usage = value.memory_usage(index=True, deep=False)
        return int(usage.sum()) if hasattr(usage, "sum") else int(usage)
    if _numpy_array(value):
        return int(value.nbytes)
    seen: set[int] = set()
    budget = [100_000]

    def walk(item: Any) -> int:
        if id(item) in seen or budget[0] <= 0:
            return 0
        seen.add(id(item))
        budget[0] -= 1
        if _pandas_kind(item) or _numpy_array(item):
            return estimate_bytes(item)
        try:
            size = sys.getsizeof(item)
        except TypeError:
            size = 64
        if isinstance(item, dict):
            size += sum(walk(k) + walk(v) for k, v in item.items())
        elif isinstance(item, list | tuple | set | frozenset):
            size += sum(walk(v) for v in item)
        elif hasattr(item, "__dict__") and not _is_code(item):
            size += walk(vars(item))
        return size

    return walk(value)


def pandas_copy_on_write() -> bool:
    """Whether pandas copies on write (always from pandas 3; an option in pandas 2): then no change
    to one pandas object reaches another that shares its data, and a shallow copy is a snapshot."""
    pandas = sys.modules.get("pandas")
    if pandas is None:
        return False
    try:
        return int(pandas.__version__.split(".")[0]) >= 3 or pandas.options.mode.copy_on_write is True
    except Exception:  # an unusual version string, an option that moved
        return False


def copy_value(value: Any) -> Any:
    """A copy of ``value`` that later changes to ``value`` do not reach: a pandas object's
    ``copy(deep=False)`` under pandas' copy-on-write (no time or memory now: the code's first
    write to a block copies that block, leaving this copy's), else ``copy(deep=True)``; numpy
    ``.copy()``; else ``copy.deepcopy``. Raises what the copy raises."""
    if _pandas_kind(value):
        if not pandas_copy_on_write():
            return value.copy(deep=True)
        saved = value.copy(deep=False)
        if hasattr(value, "attrs"):  # a plain dict, shared by a shallow copy (an Index has none)
            saved.attrs = copy.deepcopy(value.attrs)
        return saved
    if _numpy_array(value):
        return value.copy()
    return copy.deepcopy(value)


def _same_buffers(current: Any, saved: Any) -> bool:
    """Under copy-on-write: whether every column of ``current`` still is ``saved``'s very buffer,
    which nothing can have written into (a shared buffer is read-only to both). O(columns)."""
    if type(current) is not type(saved) or current.shape != saved.shape:
        return False
    if not current.index.equals(saved.index):
        return False
    if hasattr(current, "columns") and not current.columns.equals(saved.columns):
        return False
    if current.ndim == 1:
        pairs = [(current, saved)]
    else:
        pairs = [(current.iloc[:, i], saved.iloc[:, i]) for i in range(current.shape[1])]
    for now, then in pairs:
        a, b = now.to_numpy(), then.to_numpy()
        if a.dtype == object or a.__array_interface__ != b.__array_interface__:
            return False
    return True


def same_content(original: Any, saved: Any) -> bool:
    """Whether ``original`` still holds what ``saved`` (its copy) holds; False when it cannot tell."""
    try:
        if _pandas_kind(original):
            if pandas_copy_on_write() and hasattr(original, "iloc") and _same_buffers(original, saved):
                return True
            return type(original) is type(saved) and bool(original.equals(saved))
        if _numpy_array(original):
            import numpy

            return (
                original.shape == saved.shape
                and original.dtype == saved.dtype
                and bool(numpy.array_equal(original, saved, equal_nan=original.dtype.kind in "fc"))
            )
        return type(original) is type(saved) and bool(original == saved)
    except Exception:  # an __eq__ that raises, or returns an array: say it changed
        return False


def _restore_in_place(current: Any, saved: Any) -> bool:
    """Put ``saved``'s content back into ``current`` itself (so that other names for it see it),
    where that is plain; False where the name must be rebound to ``saved`` instead."""
    try:
        if type(current) is list and type(saved) is list:
            current[:] = saved
        elif type(current) in (dict, set) and type(saved) is type(current):
            current.clear()
            current.update(saved)
        elif (
            _numpy_array(current)
            and current.shape == saved.shape
            and current.dtype == saved.dtype
            and current.flags.writeable
        ):
            current[...] = saved
        else:
            return False
    except Exception:
        return False
    return True


def parse_size(text: str) -> int | None:
    """``"2GB"``, ``"500 MB"``, ``"1.5GiB"``, ``"1000000"`` as bytes; None when not a size."""
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([KMGT]?)(i?B)?\s*", text, re.IGNORECASE)
    if match is None:
        return None
    scale = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}[match.group(2).upper()]
    return int(float(match.group(1)) * scale)


def _available_memory() -> int | None:
    try:
        import importlib

        psutil = importlib.import_module("psutil")  # not a dependency: used where installed
        return int(psutil.virtual_memory().available)
    except Exception:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def default_cap() -> int:
    """The smaller of 2 GiB and a quarter of the memory available now (2 GiB where unknown)."""
    available = _available_memory()
    return 2 * _GIB if available is None else min(2 * _GIB, available // 4)


def _human(size: int) -> str:
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} bytes"


# -- the checkpoints -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Uncovered:
    """A name an undo of the run cannot put back if the code changes it, and why."""

    name: str
    why: str


_NO_COPY: Final = object()


def _ident(value: Any) -> tuple[int, type] | None:
    # The object's id and type, not the object: a checkpoint must not keep alive what the user
    # deleted after the run. (An id reused by a new object of the same type reads as unchanged.)
    return None if value is MISSING else (id(value), type(value))


@dataclass
class _Entry:
    #: What the name was bound to before the run first touched it (MISSING: it did not exist).
    original: Any
    #: A copy of ``original``'s content then (_NO_COPY: none taken).
    saved: Any = _NO_COPY
    #: ``original`` no longer holds what ``saved`` holds.
    mutated: bool = False
    #: What the run left bound there, after its last call.
    left: tuple[int, type] | None = None


@dataclass
class _Run:
    run_id: str
    entries: dict[str, _Entry] = field(default_factory=dict)
    #: Copies by the id of the object copied: one per object and run.
    copies: dict[int, Any] = field(default_factory=dict)
    bytes: int = 0
    #: Names reported as uncovered (once per run).
    reported: set[str] = field(default_factory=set)
    finished: bool = False

    def changed(self) -> dict[str, _Entry]:
        return {
            name: entry
            for name, entry in self.entries.items()
            if entry.mutated or _ident(entry.original) != entry.left
        }


@dataclass(frozen=True)
class CallCheckpoint:
    """One call's checkpoint, from :meth:`VariableCheckpoints.before` to ``after``."""

    run_id: str
    #: The namespace's bindings before the call (references, no copies).
    bindings: dict[str, Any]
    #: What the user should know before the code runs (new this run).
    uncovered: tuple[Uncovered, ...]

    def warning(self) -> str:
        """The warning shown before the code runs; "" when all is covered."""
        if not self.uncovered:
            return ""
        parts = "; ".join(f"{u.name} ({u.why})" for u in self.uncovered)
        it, is_ = ("it", "it is") if len(self.uncovered) == 1 else ("them", "they are")
        return (
            f"An undo of this run cannot put back {parts}: if this code changes {it}, an undo "
            f"leaves {it} as {is_}."
        )


@dataclass(frozen=True)
class VariablesUndone:
    """What an undo of a run's variables did."""

    run: str | None
    #: Names given back the value they had before the run.
    restored: tuple[str, ...] = ()
    #: Names the run created, deleted.
    removed: tuple[str, ...] = ()
    #: Names left as they are, with why.
    kept: tuple[Uncovered, ...] = ()
    #: Why nothing was done at all ("" when the undo ran, or there was nothing to do).
    refused: str = ""

    @property
    def anything(self) -> bool:
        return bool(self.restored or self.removed or self.kept or self.refused)

    def as_json(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "restored": list(self.restored),
            "removed": list(self.removed),
            "kept": [{"name": k.name, "why": k.why} for k in self.kept],
            "refused": self.refused,
        }


_IGNORED = {"In", "Out", "exit", "quit", "get_ipython"}


class VariableCheckpoints:
    """The checkpoints of one kernel's runs (owned by its :class:`~.state.KernelState`)."""

    def __init__(self, shell: Any) -> None:
        self.shell = shell
        #: The cap as configured ("" : :data:`CAP_ENV`, else :func:`default_cap`).
        self.limit = ""
        self._runs: dict[str, _Run] = {}  # oldest first
        #: The runs that ended, in order (``%%agent`` says so, whether their code changed anything).
        self._ended: list[str] = []
        self._forgotten: set[str] = set()
        self._lock = threading.Lock()
        self._active: CallCheckpoint | None = None

    def cap(self) -> int | None:
        """Bytes of copies one run may take; None: no cap."""
        text = self.limit or os.environ.get(CAP_ENV, "")
        size = parse_size(text) if text else None
        if size == 0:
            return None
        return size if size is not None else default_cap()

    def _namespace(self) -> dict[str, Any]:
        ns: dict[str, Any] = self.shell.user_ns
        return ns

    def _tracked(self, name: str) -> bool:
        hidden = getattr(self.shell, "user_ns_hidden", {})
        return not name.startswith("_") and name not in _IGNORED and name not in hidden

    # -- around a call (main thread) ---------------------------------------------------------
    def before(self, run_id: str, source: str) -> CallCheckpoint:
        """Checkpoint what ``source`` may change, before run ``run_id`` runs it: copies of the
        mutable values of the names it mentions (once per run and object), within the run's cap.
        The answer says what could not be covered; pass it to :meth:`after` when the code ends."""
        ns = self._namespace()
        names = code_names(source)
        with self._lock:
            run = self._open(run_id)
            uncovered = list(self._copy_mentioned(run, names, ns))
            reported = [u for u in uncovered if u.name not in run.reported]
            run.reported.update(u.name for u in reported)
            call = CallCheckpoint(run_id=run_id, bindings=dict(ns), uncovered=tuple(reported))
            self._active = call
        return call

    def _open(self, run_id: str) -> _Run:
        for other in self._runs.values():
            if other.run_id != run_id and not other.finished:
                self._finish(other)
        run = self._runs.get(run_id)
        if run is None:
            run = self._runs[run_id] = _Run(run_id)
            self._forgotten.discard(run_id)
            while len(self._runs) > MAX_RUNS:
                oldest = next(iter(self._runs))
                del self._runs[oldest]
                self._forgotten.add(oldest)
        return run

    def _copy_mentioned(self, run: _Run, names: CodeNames, ns: dict[str, Any]) -> Iterable[Uncovered]:
        cap = self.cap()
        for name in sorted(names.mentioned):
            if name not in ns or name in run.entries or not self._tracked(name):
                continue
            value = ns[name]
            if _immutable(value):
                continue
            if _is_code(value):
                if name in names.stored_into:
                    yield Uncovered(name, f"{_kind_name(value)}: code, not copied")
                continue
            entry = _Entry(original=value)
            if id(value) in run.copies:
                entry.saved = run.copies[id(value)]
                run.entries[name] = entry
                continue
            size = estimate_bytes(value)
            if cap is not None and run.bytes + size > cap:
                yield Uncovered(
                    name,
                    f"{_kind_name(value)}, about {_human(size)}: over the undo memory cap of "
                    f"{_human(cap)}; raise it with %config AgentMagics.undo_memory = '8GB' or {CAP_ENV}",
                )
                run.entries[name] = entry
                continue
            try:
                saved = copy_value(value)
            except Exception as exc:
                yield Uncovered(
                    name, f"{_kind_name(value)}: it cannot be copied ({type(exc).__name__}: {str(exc)[:80]})"
                )
                run.entries[name] = entry
                continue
            entry.saved = saved
            run.copies[id(value)] = saved
            run.bytes += size
            run.entries[name] = entry

    def after(self, call: CallCheckpoint) -> None:
        """After the code of ``call`` ran (or failed): record the names whose binding changed,
        and which copied objects the code changed."""
        ns = self._namespace()
        with self._lock:
            if self._active is call:
                self._active = None
            run = self._runs.get(call.run_id)
            if run is None:
                return
            before = call.bindings
            for name in before.keys() | ns.keys():
                if name in run.entries or not self._tracked(name):
                    continue
                if before.get(name, MISSING) is not ns.get(name, MISSING):
                    run.entries[name] = _Entry(original=before.get(name, MISSING))
            for name, entry in run.entries.items():
                if entry.saved is not _NO_COPY and not entry.mutated:
                    entry.mutated = not same_content(entry.original, entry.saved)
                entry.left = _ident(ns.get(name, MISSING))

    def abandon(self, call: CallCheckpoint) -> None:
        """The call will not run (its run was stopped while it waited): nothing to check."""
        with self._lock:
            if self._active is call:
                self._active = None

    def finish(self, run_id: str) -> None:
        """The run ended: drop the copies of what it did not change."""
        with self._lock:
            self._ended = [*self._ended[-(4 * MAX_RUNS) :], run_id]
            run = self._runs.get(run_id)
            if run is not None:
                self._finish(run)

    def _finish(self, run: _Run) -> None:
        run.finished = True
        changed = run.changed()
        run.entries = changed
        keep = {id(e.original) for e in changed.values() if e.mutated}
        run.copies = {k: v for k, v in run.copies.items() if k in keep}
        for entry in changed.values():
            if not entry.mutated:
                entry.saved = _NO_COPY
        if not changed:
            del self._runs[run.run_id]

    # -- undo (any thread; refused while the agent's code runs) -------------------------------
    def latest(self) -> str | None:
        """The latest run with variables left to undo."""
        with self._lock:
            for run in reversed(list(self._runs.values())):
                if run.changed():
                    return run.run_id
        return None

    def newer(self, run_id: str) -> tuple[str, ...]:
        """The runs with variables left to undo that ended after ``run_id`` (none when this
        kernel did not see ``run_id`` end)."""
        with self._lock:
            if run_id not in self._ended:
                return ()
            after = self._ended[self._ended.index(run_id) + 1 :]
            return tuple(r for r in after if r in self._runs and self._runs[r].changed())

    def changed_names(self, run_id: str) -> tuple[str, ...]:
        with self._lock:
            run = self._runs.get(run_id)
            return tuple(sorted(run.changed())) if run is not None else ()

    def undo(self, run_id: str | None) -> VariablesUndone:
        """Put back the variables run ``run_id`` changed (None: the latest run that changed
        some); names a later run changed too, or that were rebound since, are left as they are
        and reported. A run that changed none (or that this kernel does not know) does nothing."""
        run_id = run_id or self.latest()
        if run_id is None:
            return VariablesUndone(run=None)
        with self._lock:
            if self._active is not None:
                return VariablesUndone(
                    run=run_id,
                    refused="the agent's code is running now; undo the run when it has ended",
                )
            if run_id in self._forgotten:
                return VariablesUndone(
                    run=run_id,
                    refused=f"its checkpoint was dropped (only the last {MAX_RUNS} runs keep one)",
                )
            run = self._runs.get(run_id)
            if run is None:
                return VariablesUndone(run=run_id)
            if not run.finished:
                self._finish(run)
            runs = list(self._runs.values())
            later = runs[runs.index(run) + 1 :] if run in runs else []
            answer = self._restore(run, later)
            self._runs.pop(run_id, None)
        return answer

    def _restore(self, run: _Run, later: list[_Run]) -> VariablesUndone:
        ns = self._namespace()
        restored: list[str] = []
        removed: list[str] = []
        kept: list[Uncovered] = []
        by_object: dict[int, Any] = {}  # names for one object get one object back
        for name, entry in sorted(run.changed().items()):
            newer = next((r.run_id for r in later if name in r.changed()), None)
            if newer is not None:
                kept.append(Uncovered(name, f"changed by a later run, {newer}"))
                continue
            now = ns.get(name, MISSING)
            if _ident(now) != entry.left:
                kept.append(Uncovered(name, "changed since the run"))
                continue
            if entry.original is MISSING:
                ns.pop(name, None)
                removed.append(name)
                continue
            value = entry.original
            if entry.mutated and entry.saved is not _NO_COPY:
                key = id(entry.original)
                if key not in by_object:
                    in_place = _restore_in_place(entry.original, entry.saved)
                    by_object[key] = entry.original if in_place else entry.saved
                value = by_object[key]
            elif entry.mutated:  # pragma: no cover - mutated is only ever found against a copy
                kept.append(Uncovered(name, "changed in place, and no copy was kept"))
                continue
            ns[name] = value
            restored.append(name)
        return VariablesUndone(
            run=run.run_id, restored=tuple(restored), removed=tuple(removed), kept=tuple(kept)
        )


def _kind_name(value: Any) -> str:
    kind = type(value)
    if kind.__module__ == "builtins":
        return kind.__name__
    return f"{kind.__module__.split('.')[0]}.{kind.__name__}"
