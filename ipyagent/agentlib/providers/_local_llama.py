"""llama-cpp-python under the local model: loading a GGUF file once, and the generation loop.

This module owns everything that touches ``llama_cpp``: the per-process model cache, the worker
job that evaluates a prompt and samples tokens (with a grammar, a nudge to the first token, and
prompt-lookup drafts), and stopping that job from another thread. Prompts, grammars and parsing
are elsewhere (:mod:`.local`). ``llama_cpp`` is imported only when a model is used.

Prompt-lookup decoding: decoding one token reads every weight of the model, so on a CPU it is
bound by memory bandwidth, and evaluating a few tokens in one batch costs little more than one.
An agent's replies copy much of their context (code, names, tool results), so when the last
tokens written also occur earlier in the prompt or the reply, the tokens that followed them
there are evaluated together with the new token as a guess (a *draft*). Each position is still
sampled from the model's own logits, with the same sampler, grammar and random numbers; a draft
token is kept only when it is the token sampled, so the reply is the one decoding token by token
would give (up to the rounding of batched arithmetic), only sooner when the guesses hold.
"""

from __future__ import annotations

import asyncio
import codecs
import ctypes
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ProviderError, UserError

__all__ = [
    "INSTALL_HINT",
    "Done",
    "Job",
    "Loaded",
    "chat_template",
    "context_size",
    "import_llama",
    "load",
    "piece",
    "tokenize",
    "tokenize_prompt",
]

INSTALL_HINT = (
    "The default backend needs no build: `pip install 'ipyagent[local]'` installs xllamacpp. For "
    "llama-cpp-python, build it portably (the default native build crashes on some CPUs): "
    "`scripts/install-llama-cpp.sh`, or "
    'CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON" '
    "pip install --no-binary llama-cpp-python llama-cpp-python"
)


@dataclass
class Loaded:
    llm: Any  # llama_cpp.Llama (untyped)
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: The stop flag of the job holding ``lock``; llama.cpp's abort callback reads it between
    #: graph nodes, so even a long prompt evaluation stops within milliseconds.
    active: threading.Event | None = None
    abort_callback: Any = None  # kept referenced: llama.cpp holds only a C pointer to it


_cache: dict[tuple[str, int], Loaded] = {}
_cache_lock = threading.Lock()


def import_llama() -> Any:
    """The ``llama_cpp`` module, or a :class:`UserError` saying how to install it."""
    try:
        import llama_cpp
    except ImportError as exc:
        raise UserError(
            "The local model needs llama-cpp-python, which is not installed.",
            hint=INSTALL_HINT + ".",
            code="llama_cpp_missing",
        ) from exc
    return llama_cpp


def load(path: Path, n_ctx: int, n_threads: int | None) -> Loaded:
    """The model in ``path`` with an ``n_ctx`` window, loaded on first use, once per process."""
    key = (str(path.resolve()), n_ctx)
    with _cache_lock:
        if key not in _cache:
            llama_cpp = import_llama()
            threads = n_threads or max(1, min(8, os.cpu_count() or 1))
            try:
                llm = llama_cpp.Llama(
                    model_path=str(path),
                    n_ctx=n_ctx,
                    n_threads=threads,
                    n_threads_batch=threads,
                    n_batch=512,
                    verbose=False,
                )
            except (ValueError, RuntimeError, OSError) as exc:
                raise UserError(
                    f"Could not load the local model {path}: {exc}",
                    hint="Check that it is a complete GGUF file; pick another with `local/<path.gguf>`.",
                    code="local_model_load_failed",
                ) from exc
            loaded = Loaded(llm)

            @llama_cpp.ggml_abort_callback  # type: ignore[untyped-decorator]
            def abort(_data: Any) -> bool:
                active = loaded.active
                return active is not None and active.is_set()

            llama_cpp.llama_set_abort_callback(llm.ctx, abort, None)
            loaded.abort_callback = abort
            _cache[key] = loaded
        return _cache[key]


#: Whitespace-only tokens in a row after which a generation is ended as degenerate.
MAX_BLANK_RUN = 48


@dataclass
class Done:
    """How a job ended: tokens generated, prompt tokens reused from the KV cache, and whether
    it stopped at its token budget."""

    generated: int
    reused: int
    truncated: bool


@dataclass
class Job:
    """One generation, run by :meth:`run` in a worker thread while holding the model's lock.

    It puts text pieces, then a :class:`Done` (or the exception that ended it) on an asyncio
    queue. Setting ``stop`` ends it within about a token, even mid-prompt; setting ``enough``
    ends it after the token being evaluated, without aborting that evaluation.
    """

    loaded: Loaded
    tokens: list[int]
    max_tokens: int
    temperature: float
    grammar: str | None
    seed: int | None
    call_bias: float
    #: Draft tokens guessed from the context per step (0: decode token by token).
    lookup: int = 0
    stop: threading.Event = field(default_factory=threading.Event)
    enough: threading.Event = field(default_factory=threading.Event)
    # Progress so far, for the Done of a job stopped mid-token.
    generated: int = field(default=0, init=False)
    reused: int = field(default=0, init=False)
    #: Draft tokens evaluated, and those of them that were the token sampled.
    drafted: int = field(default=0, init=False)
    accepted: int = field(default=0, init=False)

    def run(self, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[Any]) -> None:
        def put(item: Any) -> None:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, item)
            except RuntimeError:  # the loop closed: nobody is listening any more
                self.stop.set()

        try:
            with self.loaded.lock:
                self.loaded.active = self.stop
                try:
                    put(self._generate(put))
                finally:
                    self.loaded.active = None
        except BaseException as exc:
            if self.stop.is_set():  # llama_decode aborted on our request: not a failure
                put(Done(self.generated, self.reused, False))
            else:
                put(exc)

    def _generate(self, put: Callable[[Any], None]) -> Done:
        import llama_cpp
        import numpy as np

        llm, tokens = self.loaded.llm, self.tokens
        # Reuse the KV cache for the prompt prefix shared with the previous request (the whole
        # conversation so far, in an agent loop), then evaluate the rest.
        reused = 0
        for a, b in zip(llm.input_ids[: llm.n_tokens], tokens[:-1], strict=False):
            if a != b:
                break
            reused += 1
        self.reused = reused
        llm.n_tokens = reused
        llm.eval(tokens[reused:])
        vocab = llama_cpp.llama_model_get_vocab(llm.model)
        n_vocab = llm.n_vocab()
        sampler = _Sampler(self.temperature, self.seed)
        grammar = _LazyGrammar(vocab, n_vocab, self.grammar) if self.grammar else None
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        generated = 0
        blank = 0  # consecutive whitespace-only pieces: a small model can emit newlines forever
        # Models write the opener as the special token or as plain text ("<" + "tool_call>"; the
        # Qwen2.5-Coder GGUFs prefer the text): nudge both first tokens.
        openers = {
            *llm.tokenize(b"<tool_call>", add_bos=False, special=True)[:1],
            *llm.tokenize(b"<", add_bos=False, special=False)[:1],
        }
        # The sequence so far, for finding drafts; `pending` are logits of positions already
        # evaluated, `drafts` the guessed tokens evaluated after the first of them.
        history = np.zeros(llm.n_ctx(), dtype=np.intc)
        history[: len(tokens)] = tokens
        length = len(tokens)
        pending = [np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(n_vocab,))]
        drafts: list[int] = []
        try:
            while not (self.stop.is_set() or self.enough.is_set()):
                logits = pending.pop(0)
                if generated == 0 and self.call_bias:
                    logits = logits.copy()
                    for opener in openers:
                        logits[opener] += self.call_bias
                token = sampler.sample(logits)
                if grammar is not None and not grammar.allows(token):
                    token = sampler.sample(grammar.mask(logits))
                if llama_cpp.llama_vocab_is_eog(vocab, token):
                    break
                if grammar is not None:
                    grammar.accept(token)
                generated += 1
                self.generated = generated
                text = decoder.decode(llm.detokenize([token], special=True))
                if text:
                    put(text)
                blank = blank + 1 if not text.strip() else 0
                if generated >= self.max_tokens or blank >= MAX_BLANK_RUN:
                    break
                history[length] = token
                length += 1
                if drafts and drafts[0] == token:  # guessed right: its logits are next in line
                    drafts.pop(0)
                    self.accepted += 1
                    continue
                llm.n_tokens -= len(drafts)  # guessed wrong: forget what followed the guess
                drafts = []
                room = min(self.lookup, llm.n_ctx() - llm.n_tokens - 1, self.max_tokens - generated)
                guess = find_draft(history[:length], room) if room > 0 else []
                if guess:
                    pending = eval_all(llm, [token, *guess], n_vocab)
                    drafts = guess  # only now in the KV cache
                    self.drafted += len(guess)
                else:
                    llm.eval([token])
                    pending = [
                        np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(n_vocab,))
                    ]
        finally:
            # Only what was sampled counts as evaluated: the next request reuses the KV cache
            # up to llm.n_tokens.
            llm.n_tokens -= len(drafts)
            if grammar is not None:
                grammar.close()
        tail = decoder.decode(b"", final=True)
        if tail:
            put(tail)
        return Done(generated, reused, generated >= self.max_tokens)


def find_draft(sequence: Any, size: int, ngrams: tuple[int, ...] = (3, 2)) -> list[int]:
    """Up to ``size`` tokens that followed the latest earlier occurrence of the sequence's last
    3 (else 2) tokens: a guess at what comes next when a reply copies its context. Single-token
    matches are not used: they are common and rarely guess right."""
    import numpy as np

    n = len(sequence)
    for width in ngrams:
        if n <= width:
            continue
        tail = sequence[n - width :]
        windows = np.lib.stride_tricks.sliding_window_view(sequence[: n - 1], width)
        hits = np.flatnonzero((windows == tail).all(axis=1))
        if hits.size:
            start = int(hits[-1]) + width  # the latest: a reply copies what it read last
            return [int(t) for t in sequence[start : min(start + size, n)]]
    return []


def eval_all(llm: Any, tokens: list[int], n_vocab: int) -> list[Any]:
    """Evaluate ``tokens`` in one batch after the first ``llm.n_tokens`` and return the logits
    after each of them (``Llama.eval`` keeps only the last row)."""
    import llama_cpp
    import numpy as np

    # Llama.eval's steps through llama.cpp's own API, with logits asked for every position.
    n_past, n = llm.n_tokens, len(tokens)
    llama_cpp.llama_memory_seq_rm(llama_cpp.llama_get_memory(llm.ctx), 0, n_past, -1)  # old guesses
    batch = llama_cpp.llama_batch_init(n, 0, 1)
    try:
        batch.n_tokens = n
        for i, token in enumerate(tokens):
            batch.token[i] = token
            batch.pos[i] = n_past + i
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = 0
            batch.logits[i] = True
        status = llama_cpp.llama_decode(llm.ctx, batch)
    finally:
        llama_cpp.llama_batch_free(batch)
    if status != 0:  # 2: aborted by the stop flag (see `load`)
        raise RuntimeError(f"llama_decode returned {status}")
    llm.input_ids[n_past : n_past + n] = tokens
    llm.n_tokens = n_past + n
    rows = np.ctypeslib.as_array(llama_cpp.llama_get_logits(llm.ctx), shape=(n, n_vocab))
    return list(rows.copy())


class _Sampler:
    """Temperature, top-k 40, top-p 0.95 and min-p 0.05 sampling (greedy at temperature 0), in
    numpy on the model's logits."""

    def __init__(self, temperature: float, seed: int | None) -> None:
        import numpy as np

        self.temperature = temperature
        self.rng = np.random.default_rng(seed)

    def sample(self, logits: Any) -> int:
        import numpy as np

        if self.temperature <= 0:
            return int(np.argmax(logits))
        top = np.argpartition(logits, -40)[-40:]
        top = top[np.argsort(logits[top])[::-1]]
        weights = np.exp((logits[top] - logits[top[0]]) / self.temperature)
        if not np.isfinite(weights).any() or weights.sum() <= 0:
            return int(top[0])
        probs = weights / weights.sum()
        keep = max(1, int(np.searchsorted(np.cumsum(probs), 0.95)) + 1)
        keep = min(keep, int((probs >= 0.05 * probs[0]).sum()))
        probs = probs[:keep] / probs[:keep].sum()
        return int(top[self.rng.choice(keep, p=probs)])


class _LazyGrammar:
    """A llama.cpp grammar used the cheap way (as llama.cpp's own sampler does): the sampled
    token is checked alone, and only when the grammar rejects it are all the logits masked and
    the token sampled again. Masking a 150k vocabulary on every token would cost more than the
    model itself."""

    def __init__(self, vocab: Any, n_vocab: int, grammar: str) -> None:
        import llama_cpp
        import numpy as np

        self._llama_cpp = llama_cpp
        self._sampler = llama_cpp.llama_sampler_init_grammar(vocab, grammar.encode(), b"root")
        if not self._sampler:
            raise ProviderError("The tool-call grammar did not compile.", code="grammar_error")
        self._one = (llama_cpp.llama_token_data * 1)()
        self._all = np.zeros(
            n_vocab, dtype=np.dtype([("id", np.intc), ("logit", np.single), ("p", np.single)], align=True)
        )
        self._all["id"] = np.arange(n_vocab, dtype=np.intc)

    def _apply(self, data: Any, size: int) -> None:
        lc = self._llama_cpp
        array = lc.llama_token_data_array(data=data, size=size, selected=-1, sorted=False)
        lc.llama_sampler_apply(self._sampler, ctypes.byref(array))

    def allows(self, token: int) -> bool:
        self._one[0] = self._llama_cpp.llama_token_data(token, 0.0, 0.0)
        self._apply(self._one, 1)
        return bool(self._one[0].logit != float("-inf"))

    def mask(self, logits: Any) -> Any:
        self._all["logit"] = logits
        self._apply(self._all.ctypes.data_as(self._llama_cpp.llama_token_data_p), len(self._all))
        return self._all["logit"].copy()

    def accept(self, token: int) -> None:
        self._llama_cpp.llama_sampler_accept(self._sampler, token)

    def close(self) -> None:
        self._llama_cpp.llama_sampler_free(self._sampler)


def piece(llm: Any, token: int) -> str:
    """The text of one token (special tokens included), or "" for none."""
    if token < 0:
        return ""
    return bytes(llm.detokenize([token], special=True)).decode("utf-8", errors="ignore")


def tokenize(llm: Any, prompt: str) -> list[int]:
    """The prompt's tokens, special tokens parsed, with a BOS only when the text has none."""
    # Templates that write the BOS token themselves must not get a second one from the tokenizer.
    bos = piece(llm, llm.token_bos())
    add_bos = not (bos and prompt.startswith(bos))
    return list(llm.tokenize(prompt.encode("utf-8"), add_bos=add_bos, special=True))


def chat_template(loaded: Loaded) -> tuple[str | None, str, str]:
    """The model's chat template (from its GGUF), and its BOS and EOS text."""
    llm = loaded.llm
    return (
        llm.metadata.get("tokenizer.chat_template"),
        piece(llm, llm.token_bos()),
        piece(llm, llm.token_eos()),
    )


def context_size(loaded: Loaded) -> int:
    """The model's context window in tokens, as loaded."""
    return int(loaded.llm.n_ctx())


def tokenize_prompt(loaded: Loaded, prompt: str) -> list[int]:
    """:func:`tokenize` for a loaded model (the interface :mod:`._local_xllama` shares)."""
    return tokenize(loaded.llm, prompt)
