"""xllamacpp under the local model: llama.cpp's server embedded in this process.

This module owns everything that touches ``xllamacpp`` (a wheel on PyPI: nothing to compile):
the per-process server cache (one per GGUF file and window), the model's chat template and
BOS/EOS text, tokenizing a prompt, and the worker job that streams a completion onto an asyncio
queue exactly as :class:`._local_llama.Job` does. ``xllamacpp`` is imported only when a model
is used.

The job sends the prompt we rendered, as token ids, to the server's completion handler with our
grammar (:mod:`._local_grammar`, ``"lark"`` dialect, or GBNF for the answer envelope),
``n_predict``, ``temperature``, ``seed`` and ``cache_prompt`` (the server reuses the KV cache
for the prefix shared with the previous request). The handler calls back with each piece of
text; returning True cancels the task, which is how ``stop`` and ``enough`` end a job. With
``return_progress`` the server also calls back after each prompt batch (:data:`N_BATCH`
tokens), so a stop lands within one batch of a long prompt, not only after the first token.

What differs from the llama-cpp-python loop:

- The first-token nudge. llama.cpp applies ``logit_bias`` to every token of a reply, and a bias
  on ``<`` throughout would push ``<`` into code and text. So a nudged request is split: one
  token is sampled with the bias (and the grammar); when it is a prefix of ``<tool_call>\\n``
  the rest is generated after it without bias under the grammar's call branch (``opened``);
  otherwise that token is dropped and the whole reply is generated without bias. At temperature
  0 this is exactly the old nudge (a token the bias did not make win wins without it too); above
  0 a reply that did not open a call samples its first token again, unbiased, so a call is a
  little more likely than with the old nudge.
- Prompt-lookup drafts (``prompt_lookup``) are not used: the server's own n-gram speculation is
  a server-wide setting, not per request, and was not measured here. Replies are decoded token
  by token.
- Sampling is llama.cpp's (top-k 40, top-p 0.95, min-p 0.05, then temperature, as ours), with its
  own random numbers: the same seed gives other replies than on llama-cpp-python.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ProviderError, UserError
from . import _local_opening as opening
from ._local_grammar import CALL_OPENER
from ._local_llama import MAX_BLANK_RUN, Done

__all__ = [
    "INSTALL_HINT",
    "Job",
    "Loaded",
    "chat_template",
    "context_size",
    "import_xllamacpp",
    "load",
    "tokenize_prompt",
]

INSTALL_HINT = "Install it with `pip install 'ipyagent[local]'` (xllamacpp, a wheel: nothing to compile)"

#: Prompt tokens per batch: the server reports progress (and so can be cancelled) after each.
#: Smaller batches stop sooner mid-prompt but evaluate long prompts a little slower.
N_BATCH = 256


@dataclass
class Loaded:
    server: Any  # xllamacpp.Server (untyped)
    address: str
    chat_template: str | None
    bos: str
    eos: str
    #: The first token of each way a call opens (``<tool_call>`` and ``<``), for the nudge.
    openers: list[int]
    #: The window the server gave its slot: llama.cpp caps a larger one at the model's
    #: training context.
    n_ctx: int
    client: Any = None  # httpx.Client to the server's loopback endpoint
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: Prompt tokens evaluated (from the cache or computed) and the prompt's length, as last
    #: reported by the server: a job stopped mid-prompt leaves the first below the second.
    progress: tuple[int, int] = (0, 0)
    #: The GGUF file (its size and date name the saved openings).
    path: Path | None = None
    #: Where the server saves and restores prompt openings (:mod:`._local_opening`), or None.
    openings_dir: Path | None = None
    #: The saved opening the slot's KV cache starts with now (its state name), if known.
    slot_opening: str | None = None


_cache: dict[tuple[str, int], Loaded] = {}
_cache_lock = threading.Lock()


def import_xllamacpp() -> Any:
    """The ``xllamacpp`` module, or a :class:`UserError` saying how to install it."""
    try:
        import xllamacpp  # type: ignore[import-untyped]
    except ImportError as exc:
        raise UserError(
            "The local model needs xllamacpp (or llama-cpp-python), which is not installed.",
            hint=INSTALL_HINT + ".",
            code="llama_cpp_missing",
        ) from exc
    return xllamacpp


def load(path: Path, n_ctx: int, n_threads: int | None, openings_dir: Path | None = None) -> Loaded:
    """The server for the model in ``path`` with an ``n_ctx`` window, started on first use,
    once per process. ``openings_dir``: where prompt openings are kept between processes (the
    first load's choice holds for the process)."""
    import os

    key = (str(path.resolve()), n_ctx)
    with _cache_lock:
        if key not in _cache:
            xlc = import_xllamacpp()
            import httpx

            if not path.is_file():
                raise UserError(
                    f"Could not load the local model {path}: no such file",
                    hint="Pick another with `local/<path.gguf>`.",
                    code="local_model_load_failed",
                )
            threads = n_threads or max(1, min(8, os.cpu_count() or 1))
            params = xlc.CommonParams()
            params.model.path = str(path)
            params.n_ctx = n_ctx
            params.n_parallel = 1  # one slot: its KV cache is the conversation's
            params.n_batch = params.n_ubatch = N_BATCH
            params.cpuparams.n_threads = threads
            params.cpuparams_batch.n_threads = threads
            params.verbosity = -1
            if openings_dir is not None:
                try:
                    openings_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
                    params.slot_save_path = f"{openings_dir}{os.sep}"  # the server joins by concatenation
                except OSError:
                    openings_dir = None  # a read-only cache folder: read the opening each time
            try:
                server = xlc.Server(params)
            except Exception as exc:  # the binding's errors are plain RuntimeError/ValueError
                raise UserError(
                    f"Could not load the local model {path}: {exc}",
                    hint="Check that it is a complete GGUF file; pick another with `local/<path.gguf>`.",
                    code="local_model_load_failed",
                ) from exc
            address = str(server.listening_address).rstrip("/")
            client = httpx.Client(base_url=address, timeout=60, trust_env=False)
            props = client.get("/props").json()
            loaded = Loaded(
                server,
                address,
                props.get("chat_template") or None,
                props.get("bos_token") or "",
                props.get("eos_token") or "",
                [],
                int((props.get("default_generation_settings") or {}).get("n_ctx") or n_ctx),
                client,
                path=path,
                openings_dir=openings_dir,
            )
            loaded.openers = sorted(
                {
                    *_tokens(loaded, "<tool_call>", special=True)[:1],
                    *_tokens(loaded, "<", special=False)[:1],
                }
            )
            _cache[key] = loaded
        return _cache[key]


def _tokens(loaded: Loaded, text: str, *, special: bool, add_bos: bool = False) -> list[int]:
    reply = loaded.client.post(
        "/tokenize", json={"content": text, "add_special": add_bos, "parse_special": special}
    )
    reply.raise_for_status()
    return [int(t) for t in reply.json()["tokens"]]


def chat_template(loaded: Loaded) -> tuple[str | None, str, str]:
    """The model's chat template (from its GGUF), and its BOS and EOS text."""
    return loaded.chat_template, loaded.bos, loaded.eos


def context_size(loaded: Loaded) -> int:
    """The model's context window in tokens, as loaded."""
    return loaded.n_ctx


def tokenize_prompt(loaded: Loaded, prompt: str) -> list[int]:
    """The prompt's tokens, special tokens parsed, with a BOS only when the text has none."""
    add_bos = not (loaded.bos and prompt.startswith(loaded.bos))
    return _tokens(loaded, prompt, special=True, add_bos=add_bos)


@dataclass
class Job:
    """One generation, run by :meth:`run` in a worker thread while holding the model's lock.

    It puts text pieces, then a :class:`Done` (or the exception that ended it) on an asyncio
    queue. Setting ``stop`` or ``enough`` cancels the server's task at its next callback: the
    next token, or the next prompt batch.
    """

    loaded: Loaded
    tokens: list[int]
    max_tokens: int
    temperature: float
    grammar: str | None
    seed: int | None
    call_bias: float
    #: Not used on this backend (see the module's docstring).
    lookup: int = 0
    #: The grammar for the rest of a reply whose first token opened a call, given the text of
    #: that token; needed when ``call_bias`` is set.
    opened_grammar: Callable[[str], str] | None = None
    #: How many of ``tokens`` are the prompt's opening (the system turn), kept on disk between
    #: processes (:mod:`._local_opening`); 0: none.
    opening: int = 0
    stop: threading.Event = field(default_factory=threading.Event)
    enough: threading.Event = field(default_factory=threading.Event)
    generated: int = field(default=0, init=False)
    reused: int = field(default=0, init=False)

    def run(self, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[Any]) -> None:
        def put(item: Any) -> None:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, item)
            except RuntimeError:  # the loop closed: nobody is listening any more
                self.stop.set()

        try:
            with self.loaded.lock:
                put(self._generate(put))
        except BaseException as exc:
            if self.stop.is_set():
                put(Done(self.generated, self.reused, False))
            else:
                put(exc)

    def _generate(self, put: Callable[[Any], None]) -> Done:
        read = self._open()
        done = self._reply(put)
        # The opening read just now was computed for this request: the reply's request found it
        # in the cache, but it was not reused from an earlier one.
        return Done(done.generated, max(0, done.reused - read), done.truncated)

    def _open(self) -> int:
        """Make the slot's cache start with the prompt's opening unless it does already: restore
        it from disk, or read it alone and save it. The opening's tokens read here (0 when
        restored or already there)."""
        loaded, count = self.loaded, self.opening
        if (
            loaded.openings_dir is None
            or loaded.path is None
            or not opening.MIN_TOKENS <= count < len(self.tokens)
        ):
            loaded.slot_opening = None
            return 0
        head = self.tokens[:count]
        name = opening.state_name(loaded.path, loaded.n_ctx, N_BATCH, head)
        if loaded.slot_opening == name:
            return 0  # the server's own prompt cache reuses it, and what follows it
        loaded.slot_opening = None
        if opening.restore(loaded.client, loaded.openings_dir, name):
            loaded.slot_opening = name
            return 0
        self._complete(head, None, 0, lambda _: None)
        read = count - self.reused
        self.reused = self.generated = 0  # the reply's request counts its own
        if self.stop.is_set() or self.enough.is_set():
            return read  # stopped mid-opening: a partial state is not saved
        loaded.slot_opening = name
        opening.save(loaded.client, loaded.openings_dir, name)
        return read

    def _reply(self, put: Callable[[Any], None]) -> Done:
        tokens, grammar, budget = self.tokens, self.grammar, self.max_tokens
        if self.call_bias and self.opened_grammar is not None and self.loaded.openers:
            first, token, reused = self._first_token()
            self.reused = reused
            if first is not None and token is not None and first and CALL_OPENER.startswith(first):
                put(first)
                self.generated = 1
                if budget <= 1 or self.stop.is_set() or self.enough.is_set():
                    return Done(1, reused, budget <= 1)
                tokens, grammar, budget = [*tokens, token], self.opened_grammar(first), budget - 1
        done = self._complete(tokens, grammar, budget, put)
        return Done(self.generated, self.reused, done)

    def _body(self, tokens: list[int], grammar: str | None, n_predict: int) -> dict[str, Any]:
        body: dict[str, Any] = {
            "prompt": tokens,
            "n_predict": n_predict,
            "temperature": self.temperature,
            "top_k": 40,
            "top_p": 0.95,
            "min_p": 0.05,
            "cache_prompt": True,
        }
        if self.seed is not None:
            body["seed"] = self.seed
        if grammar:
            body["grammar"] = grammar
        return body

    def _first_token(self) -> tuple[str | None, int | None, int]:
        """One token sampled with the nudge: its text, its id, and the prompt tokens reused."""
        body = self._body(self.tokens, self.grammar, 1)
        body["logit_bias"] = [[t, self.call_bias] for t in self.loaded.openers]
        body["n_probs"] = 1  # the sampled token's id comes with its probability
        reply = self.loaded.server.handle_completions(body)
        _check(reply)
        reused = int((reply.get("timings") or {}).get("cache_n", 0))
        choice = (reply.get("choices") or [{}])[0]
        sampled = ((choice.get("logprobs") or {}).get("content")) or []
        if not sampled:  # the reply ended at once
            return None, None, reused
        return str(choice.get("text") or ""), int(sampled[0]["id"]), reused

    def _complete(
        self, tokens: list[int], grammar: str | None, n_predict: int, put: Callable[[Any], None]
    ) -> bool:
        """Stream the completion of ``tokens``; whether it ended at its token budget."""
        state: dict[str, Any] = {"blank": 0, "truncated": False, "error": None}
        first_request = self.generated == 0
        before = self.generated

        def callback(chunk: dict[str, Any]) -> bool:
            if "error" in chunk:
                state["error"] = chunk["error"]
                return True
            progress = chunk.get("prompt_progress")
            if progress is not None:
                self.loaded.progress = (int(progress.get("processed", 0)), int(progress.get("total", 0)))
                if first_request:
                    self.reused = int(progress.get("cache", 0))
            for choice in chunk.get("choices") or []:
                text = choice.get("text") or ""
                if text:
                    put(text)
                    state["blank"] = state["blank"] + 1 if not text.strip() else 0
                finish = choice.get("finish_reason")
                if finish == "length":
                    state["truncated"] = True
                elif finish is None and progress is None:
                    # One streamed chunk per sampled token: counting them counts the tokens
                    # of a cancelled task too, which gets no final chunk.
                    self.generated += 1
            usage = chunk.get("usage")
            if usage:
                self.generated = before + int(usage.get("completion_tokens", 0))
            timings = chunk.get("timings")
            if timings and first_request:
                self.reused = int(timings.get("cache_n", self.reused))
            return bool(self.stop.is_set() or self.enough.is_set() or state["blank"] >= MAX_BLANK_RUN)

        body = self._body(tokens, grammar, n_predict)
        body.update(stream=True, return_progress=True)
        reply = self.loaded.server.handle_completions(body, callback)
        if isinstance(reply, dict):
            _check(reply)
        if state["error"] is not None:
            _check({"error": state["error"]})
        return bool(state["truncated"])


def _check(reply: Any) -> None:
    if isinstance(reply, dict) and "error" in reply:
        error = reply["error"]
        message = error.get("message", error) if isinstance(error, dict) else error
        raise ProviderError(
            f"The local model's server refused the request: {message}", code="local_generation_failed"
        )
