"""A pipeline's state as JSON: what can be persisted after every step, and refusing the rest.

A state is a dict with string keys or a pydantic model. Its values may be JSON's own (``None``,
``bool``, ``int``, ``float``, ``str``, lists and dicts of them) and, tagged so that they come
back as they went:

- tuples, dicts whose keys are not all strings, ``datetime``/``date``, enum members;
- pydantic models, dataclasses (their class found again by its import path: a class defined in a
  notebook cell is found in ``__main__`` once that cell has run again);
- numpy scalars (as the Python number they hold: ``df["x"].sum()`` is one);
- pandas DataFrames and Series: a parquet file in the run's folder when pyarrow is installed
  (named by the hash of its bytes, so a frame that no step changed is stored once), else inline as
  pandas' ``to_json(orient="table")``.

Anything else is refused by :func:`encode` with a :class:`UserError` naming where in the state it
is and what to store instead. This module owns the encoding; when to persist is
:mod:`.pipelines`'.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import hashlib
import importlib
import importlib.util
import io
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from .atomic import atomic_bytes
from .errors import UserError

__all__ = ["FrameFormat", "StateCodec", "class_path", "find_class"]

#: How DataFrames are stored: ``auto`` is parquet when pyarrow is installed, else ``json``.
FrameFormat = Literal["auto", "parquet", "json"]
TAG = "$ipyagent"
_SUPPORTED = (
    "JSON values (None, bool, int, float, str, lists, dicts), tuples, dates, enums, pydantic "
    "models, dataclasses, numpy scalars, pandas DataFrames and Series"
)


class StateCodec:
    """Encodes states to JSON and back; DataFrames as parquet files in ``folder``."""

    def __init__(self, folder: Path, frames: FrameFormat = "auto") -> None:
        self.folder = folder
        if frames == "auto":
            frames = "parquet" if _has_pyarrow() else "json"
        elif frames not in ("parquet", "json"):
            raise UserError(
                f"frames must be 'auto', 'parquet' or 'json', not {frames!r}.",
                hint="Pass frames='auto' (parquet when pyarrow is installed).",
                code="invalid_option",
            )
        self.frames = frames

    def check(self) -> None:
        """Refuse now what writing a DataFrame would refuse later: parquet without pyarrow."""
        if self.frames == "parquet" and not _has_pyarrow():
            raise UserError(
                "Storing DataFrames as parquet needs pyarrow, which is not installed.",
                hint="pip install pyarrow, or pass frames='json' to keep them inline in the run's file.",
                code="invalid_option",
            )

    def encode_state(self, state: Any) -> Any:
        """``state`` (a dict with string keys or a pydantic model) as JSON."""
        if isinstance(state, BaseModel):
            return self.encode(state, "state")
        if not isinstance(state, Mapping) or not all(isinstance(key, str) for key in state):
            raise UserError(
                f"A pipeline's state is a dict with string keys or a pydantic model, not {_kind(state)}.",
                hint='Pass e.g. {"path": "tickets.csv"}.',
                code="invalid_pipeline_state",
            )
        return {key: self.encode(value, f"state[{key!r}]") for key, value in state.items()}

    def encode(self, value: Any, where: str) -> Any:
        """One value as JSON; ``where`` says where it sits in the state, for the error."""
        if type(value) in (type(None), bool, int, str):
            return value
        if type(value) is float:
            return value if math.isfinite(value) else {TAG: "float", "value": repr(value)}
        if isinstance(value, enum.Enum):
            return {
                TAG: "enum",
                "class": class_path(type(value), where),
                "value": self.encode(value.value, where),
            }
        if isinstance(value, (list, tuple)) and type(value) in (list, tuple):
            items = [self.encode(item, f"{where}[{i}]") for i, item in enumerate(value)]
            return items if type(value) is list else {TAG: "tuple", "items": items}
        if isinstance(value, dict) and type(value) is dict:
            if all(isinstance(key, str) for key in value) and TAG not in value:
                return {key: self.encode(item, f"{where}[{key!r}]") for key, item in value.items()}
            pairs = [[self.encode(k, where), self.encode(v, f"{where}[{k!r}]")] for k, v in value.items()]
            return {TAG: "dict", "items": pairs}
        if type(value) is datetime.datetime:
            return {TAG: "datetime", "value": value.isoformat()}
        if type(value) is datetime.date:
            return {TAG: "date", "value": value.isoformat()}
        if isinstance(value, BaseModel):
            return self._model(value, where)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            fields = {
                f.name: self.encode(getattr(value, f.name), f"{where}.{f.name}")
                for f in dataclasses.fields(value)
                if f.init
            }
            return {TAG: "dataclass", "class": class_path(type(value), where), "fields": fields}
        module = type(value).__module__
        if module.startswith("numpy") and hasattr(value, "item") and getattr(value, "ndim", None) == 0:
            return self.encode(value.item(), where)
        if module.startswith("pandas") and type(value).__name__ in ("DataFrame", "Series"):
            return self._frame(value, where)
        raise UserError(
            f"{where} is of type {_kind(value)}, which a pipeline cannot persist.",
            hint=f"A state holds {_SUPPORTED}. Convert it (e.g. to a list or a dict), or keep it "
            "outside the state and make it again in the step that needs it.",
            code="state_unserializable",
        )

    def _model(self, value: BaseModel, where: str) -> Any:
        path = class_path(type(value), where)
        try:
            return {TAG: "model", "class": path, "data": value.model_dump(mode="json")}
        except Exception:  # a field JSON does not know (a DataFrame, say): field by field, then
            fields = {
                name: self.encode(getattr(value, name), f"{where}.{name}")
                for name in type(value).model_fields
            }
            return {TAG: "model", "class": path, "fields": fields}

    def _frame(self, value: Any, where: str) -> Any:
        series = type(value).__name__ == "Series"
        frame = value.to_frame(name="value") if series else value
        extra: dict[str, Any] = {"name": self.encode(value.name, where)} if series else {}
        if self.frames == "json":
            try:
                text = frame.to_json(orient="table", date_format="iso")
            except Exception as exc:
                raise _frame_error(where, value, exc, "JSON") from exc
            return {TAG: "series" if series else "frame", "json": json.loads(text), **extra}
        self.check()
        buffer = io.BytesIO()
        try:
            frame.to_parquet(buffer)
        except Exception as exc:
            raise _frame_error(where, value, exc, "parquet") from exc
        data = buffer.getvalue()
        name = f"frame-{hashlib.sha256(data).hexdigest()[:16]}.parquet"
        target = self.folder / name
        if not target.exists():
            with atomic_bytes(target) as handle:
                handle.write(data)
        return {TAG: "series" if series else "frame", "parquet": name, **extra}

    def decode(self, data: Any) -> Any:
        """A value :meth:`encode` made, as it was."""
        if isinstance(data, list):
            return [self.decode(item) for item in data]
        if not isinstance(data, dict):
            return data
        tag = data.get(TAG)
        if tag is None:
            return {key: self.decode(item) for key, item in data.items()}
        if tag == "float":
            return float(data["value"])
        if tag == "tuple":
            return tuple(self.decode(item) for item in data["items"])
        if tag == "dict":
            return {self.decode(k): self.decode(v) for k, v in data["items"]}
        if tag == "datetime":
            return datetime.datetime.fromisoformat(data["value"])
        if tag == "date":
            return datetime.date.fromisoformat(data["value"])
        if tag == "enum":
            return find_class(data["class"])(self.decode(data["value"]))
        if tag == "model":
            cls = find_class(data["class"])
            raw = data["data"] if "data" in data else {k: self.decode(v) for k, v in data["fields"].items()}
            try:
                return cls.model_validate(raw)
            except ValidationError as exc:
                raise UserError(
                    f"The persisted {data['class']} no longer validates: {exc.error_count()} problem(s).",
                    hint="The class changed since the run: change it back, or resume from an earlier step.",
                    code="state_unreadable",
                ) from exc
        if tag == "dataclass":
            cls = find_class(data["class"])
            return cls(**{k: self.decode(v) for k, v in data["fields"].items()})
        if tag in ("frame", "series"):
            return self._read_frame(data, series=tag == "series")
        raise UserError(f"Unknown value {tag!r} in a pipeline's state.", code="state_unreadable")

    def _read_frame(self, data: dict[str, Any], *, series: bool) -> Any:
        pd = importlib.import_module("pandas")
        if "parquet" in data:
            path = self.folder / data["parquet"]
            try:
                frame = pd.read_parquet(path)
            except (OSError, ImportError) as exc:
                raise UserError(
                    f"Cannot read the DataFrame {path}: {exc}",
                    hint="The file beside the run's log holds a step's DataFrame: restore it, or resume "
                    "from the step that made it.",
                    code="state_unreadable",
                ) from exc
        else:
            frame = pd.read_json(io.StringIO(json.dumps(data["json"])), orient="table")
        if series:
            column = frame["value"]
            column.name = self.decode(data.get("name"))
            return column
        return frame


def class_path(cls: type, where: str) -> str:
    """``module:qualname`` of ``cls``, checked to lead back to it (a :class:`UserError` if not)."""
    path = f"{cls.__module__}:{cls.__qualname__}"
    try:
        found = find_class(path)
    except UserError:
        found = None
    if found is not cls:
        raise UserError(
            f"{where} is a {cls.__qualname__}, a class that cannot be found again by its name "
            f"({path}), so a resumed pipeline could not rebuild it.",
            hint="Define the class at the top level of a module or a notebook cell (not inside a function).",
            code="state_unserializable",
        )
    return path


def find_class(path: str) -> Any:
    """The class at ``module:qualname``."""
    module_name, _, qualname = path.partition(":")
    try:
        found: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError):
        raise UserError(
            f"The pipeline's state holds a {qualname}, which is not defined now ({path}).",
            hint="Run the cell (or import the module) that defines it, then resume.",
            code="state_unreadable",
        ) from None
    return found


def _frame_error(where: str, value: Any, exc: Exception, how: str) -> UserError:
    return UserError(
        f"{where} is a {type(value).__name__} that {how} cannot store: {type(exc).__name__}: {exc}",
        hint="Give its columns plain types (e.g. df[col].astype(str) for a column of objects) and "
        "string column names.",
        code="state_unserializable",
    )


def _has_pyarrow() -> bool:
    return importlib.util.find_spec("pyarrow") is not None


def _kind(value: Any) -> str:
    cls = type(value)
    return cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
