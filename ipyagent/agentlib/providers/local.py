"""The embedded model: llama.cpp running a GGUF file inside this process.

:class:`LocalModel` is a :class:`~ipyagent.agentlib.model.Provider` with no network and
no key. What stands in for a wire format here is split by concern:

- :mod:`._local_prompt`: the transcript rendered with the model's own chat template
  (:func:`render_prompt`);
- :mod:`._local_grammar`: what the model may write — a tool call with valid arguments or text
  (:func:`tool_grammar`), an answer envelope (:func:`answer_grammar`), and which tools a turn
  offers (:func:`callable_tools`, :func:`allowed_calls`);
- :mod:`._local_parse`: reading the reply — calls written as text (:class:`ToolTextParser`),
  envelopes, ``<think>`` tags;
- :mod:`._local_xllama` and :mod:`._local_llama`: loading the model and generating, on one of
  two runtimes (*backends*): xllamacpp, llama.cpp's server as a wheel (the default when
  installed), or llama-cpp-python, built from source. Both offer the same few calls (``load``,
  ``chat_template``, ``tokenize_prompt``, ``Job``); :func:`~.local_backend.local_backend`
  picks one.

This module puts them together for one request. Finding the GGUF file is
:mod:`ipyagent.agentlib.local_models`'s job.

The request's ``tool_choice`` becomes the grammar (in ``tool_mode="grammar"``): ``"auto"`` lets
the model call a tool or answer in text; ``"none"`` leaves it only an answer (the envelope, as
after tool results); ``"required"`` makes the reply a call to one of the tools, and tool names a
call to one of those. With ``tool_mode="free"`` nothing constrains the model: calls to tools the
choice rules out are read as text.

The request's ``output_schema`` (a typed answer) becomes grammar too: the reply that is not a
tool call is JSON valid for the schema (llama.cpp's JSON-schema grammar), with no answer
envelope; with no tool to call, the whole reply is that JSON. In ``tool_mode="free"`` it is
not enforced.

Generation runs in a worker thread, one at a time per loaded model (llama.cpp contexts are not
thread-safe). It checks a stop flag between tokens and during prompt evaluation, so cancelling
the consuming task stops it within about a token (within a 256-token prompt batch on xllamacpp),
and the model lock is released right after.
Models load on first use, once per process (cached by path), never at import.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, ClassVar, Literal

from ..errors import ContextOverflowError, ProviderError
from ..messages import FinishReason
from ..model import ModelRequest, ProviderEvent, ResponseEnd, ToolSpec, UsageReport
from ..usage import Usage
from ._local_grammar import (
    AfterResults,
    Dialect,
    allowed_calls,
    answer_grammar,
    callable_tools,
    tool_call_schema,
    tool_grammar,
)
from ._local_llama import Done, import_llama
from ._local_parse import ParsedCall, ReplyReader, ToolTextParser
from ._local_prompt import ANSWER_OPENER, render_opening, render_prompt
from .local_backend import BACKEND_HINT, Backend, local_backend, prompt_cache_dir

INSTALL_HINT = BACKEND_HINT

__all__ = [
    "INSTALL_HINT",
    "AfterResults",
    "LocalModel",
    "ParsedCall",
    "ToolMode",
    "ToolTextParser",
    "callable_tools",
    "import_backend",
    "import_llama",
    "render_prompt",
    "tool_call_schema",
    "tool_grammar",
]

ToolMode = Literal["grammar", "free"]


class LocalModel:
    """A GGUF model run in-process by llama.cpp (through xllamacpp or llama-cpp-python).

    Args:
        path: The GGUF file.
        name: The model part of ``model_id`` (``local/<name>``); defaults to the file's stem.
        n_ctx: Context window in tokens.
        n_threads: CPU threads (default: all cores, at most 8).
        tool_mode: ``"grammar"`` (default) constrains the reply to a valid tool call or text;
            ``"free"`` lets the model write anything and parses calls out of the text.
        temperature: Sampling temperature when the request does not set one; 0 is greedy.
            A recording sends 0 (see :attr:`greedy_at_zero`).
        seed: Sampling seed, for reproducible replies above temperature 0.
        tool_call_bias: Added to the logits of the call openers (``<tool_call>`` and ``<``) as
            the reply's first token when the loop marks the request ``expects_tool_call`` (the
            user's message names an offered tool, see :mod:`ipyagent.agentlib.tool_choice`).
            The adapter never reads the user's words: the loop decides, this maps it.
        after_results: Which tools a ``tool_choice="auto"`` turn after successful tool results
            may call: ``"none"`` (default: it answers, written as a JSON envelope that leaves
            the model no way to call again, and streamed as plain text), ``"others"`` or
            ``"all"``. See :func:`callable_tools`.
        max_reply_tokens: The longest reply when the request sets no ``max_tokens``. Generation
            also ends after a long run of whitespace-only tokens, a degenerate loop seen on the
            1.5B model after several tool results.
        prompt_lookup: Prompt-lookup decoding: up to this many tokens that followed the last
            few tokens where they occur earlier in the context are evaluated with each new
            token as a guess, and kept while the model samples the same ones (see
            :mod:`._local_llama`). 0 decodes token by token. Not used on xllamacpp.
        backend: ``"xllamacpp"`` or ``"llama_cpp"``; default: ``$IPYAGENT_LOCAL_BACKEND``, else
            xllamacpp when installed, else llama-cpp-python (see
            :func:`~.local_backend.local_backend`).
        prompt_cache: The folder where the KV state of the prompt's opening (system prompt and
            tools) is kept between processes, so a new kernel does not read it again
            (:mod:`._local_opening`; xllamacpp only); default:
            :func:`~.local_backend.prompt_cache_dir`; False: not kept.
    """

    #: Temperature 0 decodes greedily: the same request gives the same reply. A recording
    #: (:class:`~ipyagent.agentlib.providers.replay.ReplayModel`) sends requests that set no
    #: temperature at 0 to a model that says so, and recording again gives the same cassette.
    greedy_at_zero: ClassVar[bool] = True

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        name: str | None = None,
        n_ctx: int = 8192,
        n_threads: int | None = None,
        tool_mode: ToolMode = "grammar",
        temperature: float = 0.2,
        seed: int | None = None,
        tool_call_bias: float = 2.0,
        after_results: AfterResults = "none",
        max_reply_tokens: int = 1024,
        prompt_lookup: int = 0,
        backend: Backend | None = None,
        prompt_cache: bool | str | os.PathLike[str] = True,
    ) -> None:
        self.path = Path(path)
        self.name = name or self.path.stem
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.tool_mode: ToolMode = tool_mode
        self.temperature = temperature
        self.seed = seed
        self.tool_call_bias = tool_call_bias
        self.after_results: AfterResults = after_results
        # A reply longer than this is a small model rambling, not an answer: on a CPU it would
        # hold the cell for many minutes.
        self.max_reply_tokens = max_reply_tokens
        self.prompt_lookup = prompt_lookup
        self.backend: Backend = local_backend(backend)
        if isinstance(prompt_cache, bool):
            self.prompt_cache: Path | None = prompt_cache_dir() if prompt_cache else None
        else:
            self.prompt_cache = Path(prompt_cache)
        self._head: tuple[str, list[int]] = ("", [])  # the last opening and its tokens

    @property
    def model_id(self) -> str:
        return f"local/{self.name}"

    @property
    def context_limit(self) -> int | None:
        return self.n_ctx

    def load(self) -> Any:
        """Load the model now (it otherwise loads on the first request) and return the
        backend's handle (``llama_cpp.Llama``, or ``xllamacpp.Server``). Loading happens once
        per process and file."""
        loaded = self._load(_impl(self.backend))
        return loaded.llm if self.backend == "llama_cpp" else loaded.server

    def __repr__(self) -> str:
        return f"LocalModel({self.model_id!r}, path={str(self.path)!r})"

    def _load(self, impl: Any) -> Any:
        if self.backend == "xllamacpp":
            return impl.load(self.path, self.n_ctx, self.n_threads, self.prompt_cache)
        return impl.load(self.path, self.n_ctx, self.n_threads)

    def _opening(
        self,
        impl: Any,
        loaded: Any,
        template: str | None,
        request: ModelRequest,
        tokens: list[int],
        bos: str,
        eos: str,
    ) -> int:
        """How many of ``tokens`` are the opening a new process can restore (0: none, also when
        the prompt's tokens do not start with the opening's)."""
        if self.backend != "xllamacpp" or loaded.openings_dir is None or not request.system:
            return 0
        text = render_opening(template, request, bos=bos, eos=eos)
        if not text:
            return 0
        if self._head[0] != text:
            self._head = (text, impl.tokenize_prompt(loaded, text))
        return _opening_length(tokens, self._head[1])

    async def stream(self, request: ModelRequest) -> AsyncIterator[ProviderEvent]:
        impl = _impl(self.backend)
        dialect: Dialect = "lark" if self.backend == "xllamacpp" else "gbnf"
        loaded = await asyncio.to_thread(self._load, impl)
        template, bos, eos = impl.chat_template(loaded)
        prompt = render_prompt(template, request, bos=bos, eos=eos)
        offered, text = allowed_calls(request, self.after_results)
        constrained = self.tool_mode == "grammar"
        grammar: str | None = None
        answer = request.output_schema.json_schema if request.output_schema and text else None
        # With every tool held back this turn, the reply is an answer envelope (see ANSWER_OPENER),
        # unless the answer is typed: then it is the JSON of its schema.
        envelope = constrained and bool(request.tools) and not offered and answer is None
        if envelope:
            prompt += ANSWER_OPENER
            grammar = answer_grammar()
        elif constrained and (offered or answer is not None):
            grammar = await asyncio.to_thread(_grammar, tuple(offered), text, answer, dialect)
        tokens = await asyncio.to_thread(impl.tokenize_prompt, loaded, prompt)
        opening = await asyncio.to_thread(self._opening, impl, loaded, template, request, tokens, bos, eos)
        window = min(self.n_ctx, impl.context_size(loaded))  # xllamacpp caps it at the model's
        budget = window - len(tokens)
        if budget < 16:
            raise ContextOverflowError(
                f"The conversation ({len(tokens):,} tokens) does not fit the local model's context "
                f"window ({window:,} tokens).",
                hint="Compact the conversation (`/compact`) or start a new one, or use a larger n_ctx.",
            )
        max_tokens = min(budget, request.settings.max_tokens or self.max_reply_tokens)
        temperature = request.settings.temperature
        temperature = self.temperature if temperature is None else temperature
        lean = request.expects_tool_call and request.tool_choice == "auto" and bool(offered) and not envelope
        bias = self.tool_call_bias if lean else 0.0
        job = impl.Job(loaded, tokens, max_tokens, temperature, grammar, self.seed, bias, self.prompt_lookup)
        job.opening = opening
        if bias and self.backend == "xllamacpp":
            # The rest of a reply whose nudged first token opened a call (see _local_xllama).
            rest = (offered, answer)
            job.opened_grammar = lambda first: tool_grammar(
                rest[0], answer=rest[1], dialect="lark", opened=first
            )
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[str | Done | BaseException] = asyncio.Queue()
        thread = threading.Thread(
            target=job.run, args=(loop, queue), name="ipyagent-local-model", daemon=True
        )
        thread.start()
        # In grammar mode, a call to a tool held back this turn is not a call, even in text; in
        # free mode any tool's call counts, unless the request's tool_choice rules it out.
        free_auto = not constrained and request.tool_choice == "auto"
        names = [t.name for t in (request.tools if free_auto else offered)]
        reader = ReplyReader(names, envelope=envelope)
        try:
            while True:
                item = await queue.get()
                if isinstance(item, BaseException):
                    raise ProviderError(
                        f"The local model failed while generating: {item}",
                        hint="Retry; if it keeps failing, the GGUF file may be broken, or try the other "
                        "backend (LocalModel(backend=...) or $IPYAGENT_LOCAL_BACKEND).",
                        code="local_generation_failed",
                    ) from item
                if isinstance(item, str):
                    for event in reader.feed(item):
                        yield event
                    if reader.finished:
                        job.enough.set()  # nothing more to read: save the model the tokens
                    continue
                for event in reader.flush():
                    yield event
                usage = Usage(
                    input_tokens=len(tokens) - item.reused,
                    cache_read_tokens=item.reused,
                    output_tokens=item.generated,
                    requests=1,
                )
                yield UsageReport(usage=usage, context_limit=self.n_ctx)
                finish: FinishReason = (
                    "tool_calls" if reader.calls else ("length" if item.truncated else "stop")
                )
                yield ResponseEnd(finish_reason=finish)
                return
        finally:
            job.stop.set()  # the worker sees it before its next token and lets go of the model


def _opening_length(tokens: list[int], head: list[int]) -> int:
    """How many of ``tokens`` the opening ``head`` is: 0 when the tokens do not start with it
    (a tokenizer that merges across the end of the system turn)."""
    return len(head) if head and tokens[: len(head)] == head else 0


def _impl(backend: Backend) -> Any:
    """The module that runs ``backend``."""
    if backend == "xllamacpp":
        from . import _local_xllama

        return _local_xllama
    from . import _local_llama

    return _local_llama


def import_backend(backend: str | None = None) -> Any:
    """The chosen backend's module (``xllamacpp`` or ``llama_cpp``), or a :class:`UserError`
    saying how to install one."""
    chosen = local_backend(backend)
    if chosen == "xllamacpp":
        from ._local_xllama import import_xllamacpp

        return import_xllamacpp()
    return import_llama()


def _grammar(
    tools: tuple[ToolSpec, ...],
    text: bool = True,
    answer: dict[str, Any] | None = None,
    dialect: Dialect = "gbnf",
) -> str:
    if dialect == "gbnf":
        import_llama()  # the GBNF dialect needs llama_cpp's JSON-schema converter
    return tool_grammar(tools, text=text, answer=answer, dialect=dialect)
