"""The embedded model: llama-cpp-python running a GGUF file inside this process.

:class:`LocalModel` is a :class:`~ipyagent.agentlib.providers.base.Provider` with no network and
no key. This module owns what stands in for a wire format here: rendering the transcript with
the model's own chat template (:func:`render_prompt`), the grammar that lets a small model
either call one of the tools with valid arguments or answer in text (:func:`tool_grammar`), and
:class:`ToolTextParser`, which finds tool calls in the generated text (``<tool_call>`` tags,
fenced or bare JSON). Finding the GGUF file is :mod:`ipyagent.agentlib.local_models`'s job.

Generation runs in a worker thread, one at a time per loaded model (llama.cpp contexts are not
thread-safe). It checks a stop flag between tokens and between prompt batches, so cancelling the
consuming task stops it within about a token, and the model lock is released right after.
Models load on first use, once per process (cached by path), never at import.
"""

from __future__ import annotations

import asyncio
import codecs
import ctypes
import json
import os
import re
import threading
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..errors import ContextOverflowError, ProviderError, UserError
from ..messages import FinishReason, ImageBlock, Message, TextBlock, ToolCallBlock
from ..usage import Usage
from ._think_tags import ThinkTagSplitter
from .base import (
    ModelRequest,
    ProviderEvent,
    ResponseEnd,
    TextChunk,
    ThinkingChunk,
    ToolCallChunk,
    ToolSpec,
    UsageReport,
)

__all__ = [
    "INSTALL_HINT",
    "AfterResults",
    "LocalModel",
    "ToolMode",
    "ToolTextParser",
    "callable_tools",
    "render_prompt",
    "tool_grammar",
]

ToolMode = Literal["grammar", "free"]

INSTALL_HINT = (
    "Install it with `pip install 'ipyagent[local]'` after building llama-cpp-python portably "
    "(the default native build crashes on some CPUs): `scripts/install-llama-cpp.sh`, or "
    'CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON" '
    "pip install --no-binary llama-cpp-python llama-cpp-python"
)

_RANDOM_SEED = 0xFFFFFFFF  # llama.cpp's LLAMA_DEFAULT_SEED: a new random seed each time

# Used when a GGUF file carries no chat template (rare): ChatML, which most small models know.
_CHATML = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

# For templates that know nothing of tools: the Hermes/Qwen convention, said in the system prompt.
_TOOL_PROMPT = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{tools}\n"
    "</tools>\n\nFor each function call, return a json object with function name and arguments "
    'within <tool_call></tool_call> XML tags:\n<tool_call>\n{{"name": <function-name>, '
    '"arguments": <args-json-object>}}\n</tool_call>'
)


# -- prompt ---------------------------------------------------------------------------------------


def _tool_json(tool: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": tool.parameters},
    }


def _hf_messages(request: ModelRequest, *, native_tools: bool) -> list[dict[str, Any]]:
    """Our transcript in the Hugging Face chat-template convention (OpenAI-like dicts)."""
    system = request.system
    if request.tools and not native_tools:
        listing = "\n".join(json.dumps(_tool_json(t), ensure_ascii=False) for t in request.tools)
        system = f"{system}\n\n{_TOOL_PROMPT.format(tools=listing)}".strip()
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for message in request.messages:
        out.extend(_hf_message(message, native_tools=native_tools))
    return out


def _hf_message(message: Message, *, native_tools: bool) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if message.role == "user":
        for result in message.tool_results:
            content = result.content
            if result.is_error and not content.lower().startswith("error"):
                content = f"Error: {content}"  # templates have no error flag: say it in words
            if native_tools:
                out.append({"role": "tool", "name": result.name, "content": content})
            else:
                out.append({"role": "user", "content": f"<tool_response>\n{content}\n</tool_response>"})
        text = "".join(
            b.text if isinstance(b, TextBlock) else "[image omitted]"
            for b in message.content
            if isinstance(b, TextBlock | ImageBlock)
        )
        if text:
            out.append({"role": "user", "content": text})
        return out
    text = "".join(b.text for b in message.content if isinstance(b, TextBlock))
    calls = [b for b in message.content if isinstance(b, ToolCallBlock)]
    entry: dict[str, Any] = {"role": "assistant", "content": text}
    if calls and native_tools:
        entry["tool_calls"] = [
            {"type": "function", "id": c.id, "function": {"name": c.name, "arguments": _args(c)}}
            for c in calls
        ]
    elif calls:
        entry["content"] = text + "".join(
            f"\n<tool_call>\n{json.dumps({'name': c.name, 'arguments': _args(c)})}\n</tool_call>"
            for c in calls
        )
    if entry["content"] or calls:
        out.append(entry)
    return out


def _args(call: ToolCallBlock) -> dict[str, Any] | str:
    return call.arguments if call.arguments is not None else call.raw_arguments


def render_prompt(template: str | None, request: ModelRequest, *, bos: str = "", eos: str = "") -> str:
    """The prompt text for ``request``, rendered with a GGUF chat template (Jinja, as in
    Hugging Face ``apply_chat_template``), ending with the assistant's generation prompt."""
    import jinja2.sandbox

    source = template or _CHATML
    native_tools = "tools" in source
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)

    def raise_exception(message: str) -> None:
        raise jinja2.TemplateError(message)

    def tojson(value: Any, indent: int | None = None, ensure_ascii: bool = False, **_: Any) -> str:
        # jinja's own tojson escapes <, > and & for HTML; chat templates want plain JSON.
        return json.dumps(value, indent=indent, ensure_ascii=ensure_ascii)

    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: __import__("datetime").datetime.now().strftime(fmt)
    variables: dict[str, Any] = {
        "messages": _hf_messages(request, native_tools=native_tools),
        "add_generation_prompt": True,
        "bos_token": bos,
        "eos_token": eos,
    }
    if request.tools and native_tools:
        variables["tools"] = [_tool_json(t) for t in request.tools]
    if request.settings.thinking is not None:
        variables["enable_thinking"] = request.settings.thinking != "none"  # Qwen3's switch
    try:
        return env.from_string(source).render(**variables)
    except jinja2.TemplateError as exc:
        raise ProviderError(
            f"The model's chat template failed to render this conversation: {exc}",
            hint="Use another GGUF file, or one whose chat template supports system and tool messages.",
            code="template_error",
        ) from exc


# -- grammar ------------------------------------------------------------------------------------


def _prefixed_refs(value: Any, prefix: str) -> Any:
    if isinstance(value, dict):
        return {
            k: (
                f"#/$defs/{prefix}{v.removeprefix('#/$defs/')}"
                if k == "$ref" and isinstance(v, str) and v.startswith("#/$defs/")
                else _prefixed_refs(v, prefix)
            )
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_prefixed_refs(v, prefix) for v in value]
    return value


def tool_call_schema(tools: Sequence[ToolSpec]) -> dict[str, Any]:
    """A JSON schema matching ``{"name": <a tool>, "arguments": <valid for that tool>}``."""
    defs: dict[str, Any] = {}
    options = []
    for i, tool in enumerate(tools):
        params = _prefixed_refs(dict(tool.parameters), f"t{i}-")
        defs.update({f"t{i}-{k}": v for k, v in params.pop("$defs", {}).items()})
        # Small models invent arguments ("units" for a calculator): only declared ones are allowed.
        params = {"type": "object", "additionalProperties": False, **params}
        options.append(
            {
                "type": "object",
                "properties": {"name": {"const": tool.name}, "arguments": params},
                "required": ["name", "arguments"],
                "additionalProperties": False,
            }
        )
    schema: dict[str, Any] = {"oneOf": options} if len(options) > 1 else options[0]
    return {**schema, "$defs": defs} if defs else schema


# A text reply may not open the way a tool call does: "<" (a tag), "{" (bare JSON) or a fenced
# JSON block, which is how small models such as Qwen2.5-Coder-0.5B like to write calls; those
# openings belong to the call branches, where the JSON is held to the tools' schemas. Other code
# fences ("```python") and everything after the first characters are free.
_TEXT_RULES = (
    'x-text ::= [^<{`] x-any | "`" ([^`] x-any | "`" ([^`] x-any | "`" x-fence-tail)?)?\n'
    'x-fence-tail ::= ([^j\\n] x-any | "j" ([^s] x-any | "s" ([^o] x-any | "o" ([^n] x-any)?)?)?)?\n'
    "x-any ::= [^\\x00]*\n"
)


def tool_grammar(tools: Sequence[ToolSpec]) -> str:
    """GBNF for "call tools with valid arguments (in ``<tool_call>`` tags, or as a fenced JSON
    block) | answer in text". The model's own first tokens pick the branch; once it opens a
    call, the name is one of ``tools`` and the arguments match that tool's schema. With no
    tools: text only."""
    if not tools:
        return "root ::= x-text\n" + _TEXT_RULES
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    calls = json_schema_to_gbnf(json.dumps(tool_call_schema(tools)))
    calls = re.sub(r"^root ::=", "x-tool-call-json ::=", calls, count=1, flags=re.MULTILINE)
    return (
        "root ::= x-tool-calls | x-fenced-call | x-text\n"
        'x-tool-calls ::= x-tool-call ("\\n" x-tool-call)*\n'
        'x-tool-call ::= "<tool_call>\\n" x-tool-call-json "\\n</tool_call>"\n'
        'x-fenced-call ::= "```json\\n" x-tool-call-json "\\n```"\n' + _TEXT_RULES + calls
    )


AfterResults = Literal["all", "others", "none"]


def callable_tools(request: ModelRequest, after_results: AfterResults = "none") -> list[ToolSpec]:
    """The tools the grammar offers for this turn.

    After a turn whose tool calls all returned without error, small models tend to call a tool
    again instead of answering with the result (Qwen2.5-Coder-0.5B did on most tasks of
    bench/local_model.py, and called *other* tools when only the same one was held back). So by
    default (``"none"``) such a turn may only answer in text; ``"others"`` holds back only the
    tools that just answered; ``"all"`` offers every tool. A failed call keeps every tool, so
    the model can fix it.
    """
    last = request.messages[-1] if request.messages else None
    results = last.tool_results if last is not None and last.role == "user" else []
    if not results or after_results == "all" or any(r.is_error for r in results):
        return list(request.tools)
    if after_results == "none":
        return []
    answered = {r.name for r in results}
    return [t for t in request.tools if t.name not in answered]


# -- tool calls in text -------------------------------------------------------------------------


@dataclass
class ParsedCall:
    name: str
    arguments: str


_OPENERS = ("<tool_call>", "```")


class ToolTextParser:
    """Sans-IO: split generated text into text and tool calls.

    Recognises ``<tool_call>{json}</tool_call>`` (Qwen, Hermes), a fenced block holding
    ``{"name": ..., "arguments": {...}}`` for a known tool (how small models often answer), and a
    reply that is only such a JSON object. Anything held back that turns out not to be a call is
    given back as text, unchanged.
    """

    def __init__(self, tool_names: Sequence[str]) -> None:
        self._names = set(tool_names)
        self._held = ""
        self._started = False  # any non-space text seen yet

    def feed(self, text: str) -> list[str | ParsedCall]:
        self._held += text
        out: list[str | ParsedCall] = []
        while self._held:
            if not self._started and self._names:
                stripped = self._held.lstrip()
                if not stripped:
                    return out
                if stripped.startswith("{"):
                    return out  # maybe a bare JSON call: decided at the end
                self._started = True
            start = min((i for i in (self._held.find(o) for o in _OPENERS) if i >= 0), default=-1)
            if start < 0 or not self._names:
                keep = 0 if not self._names else _partial_opener(self._held)
                if len(self._held) > keep:
                    out.append(self._held[: len(self._held) - keep])
                self._held = self._held[len(self._held) - keep :]
                return out
            if start:
                out.append(self._held[:start])
                self._held = self._held[start:]
            block, rest = _complete_block(self._held)
            if block is None:
                return out  # wait for the closing tag or fence
            call = self._call(_block_body(block))
            out.append(call if call is not None else block)
            self._held = rest
        return out

    def flush(self) -> list[str | ParsedCall]:
        held, self._held = self._held, ""
        if not held:
            return []
        call = self._call(held)
        if call is None and held.lstrip().startswith("<tool_call>"):
            call = self._call(_block_body(held + "</tool_call>"))  # cut off before its end tag
        return [call if call is not None else held]

    def _call(self, body: str) -> ParsedCall | None:
        try:
            value = json.loads(body.strip())
        except ValueError:
            return None
        if not isinstance(value, dict) or value.get("name") not in self._names:
            return None
        arguments = value.get("arguments", value.get("parameters", {}))
        if isinstance(arguments, str):  # some models double-encode the arguments
            return ParsedCall(value["name"], arguments)
        return ParsedCall(value["name"], json.dumps(arguments, ensure_ascii=False))


def _partial_opener(text: str) -> int:
    """Length of the longest end of ``text`` that could start an opener."""
    best = 0
    for opener in _OPENERS:
        for size in range(min(len(opener) - 1, len(text)), best, -1):
            if opener.startswith(text[-size:]):
                best = size
                break
    return best


def _complete_block(text: str) -> tuple[str | None, str]:
    """``text`` starts with an opener: the whole block and what follows, or ``None`` if open."""
    if text.startswith("<tool_call>"):
        end = text.find("</tool_call>")
        return (None, text) if end < 0 else (text[: end + 12], text[end + 12 :])
    end = text.find("```", 3)
    return (None, text) if end < 0 else (text[: end + 3], text[end + 3 :])


def _block_body(block: str) -> str:
    if block.startswith("<tool_call>"):
        return block[len("<tool_call>") : -len("</tool_call>")]
    body = block[3:-3]
    first, _, rest = body.partition("\n")
    return rest if first.strip().isalpha() or not first.strip() else body  # drop "json", "tool_call"


# -- the model ------------------------------------------------------------------------------------


@dataclass
class _Loaded:
    llm: Any  # llama_cpp.Llama (untyped)
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: The stop flag of the job holding ``lock``; llama.cpp's abort callback reads it between
    #: graph nodes, so even a long prompt evaluation stops within milliseconds.
    active: threading.Event | None = None
    abort_callback: Any = None  # kept referenced: llama.cpp holds only a C pointer to it


_cache: dict[tuple[str, int], _Loaded] = {}
_cache_lock = threading.Lock()


def _import_llama() -> Any:
    try:
        import llama_cpp
    except ImportError as exc:
        raise UserError(
            "The local model needs llama-cpp-python, which is not installed.",
            hint=INSTALL_HINT + ".",
            code="llama_cpp_missing",
        ) from exc
    return llama_cpp


def _load(path: Path, n_ctx: int, n_threads: int | None) -> _Loaded:
    key = (str(path.resolve()), n_ctx)
    with _cache_lock:
        if key not in _cache:
            llama_cpp = _import_llama()
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
            loaded = _Loaded(llm)

            @llama_cpp.ggml_abort_callback  # type: ignore[untyped-decorator]
            def abort(_data: Any) -> bool:
                active = loaded.active
                return active is not None and active.is_set()

            llama_cpp.llama_set_abort_callback(llm.ctx, abort, None)
            loaded.abort_callback = abort
            _cache[key] = loaded
        return _cache[key]


class LocalModel:
    """A GGUF model run in-process by llama-cpp-python.

    Args:
        path: The GGUF file.
        name: The model part of ``model_id`` (``local/<name>``); defaults to the file's stem.
        n_ctx: Context window in tokens.
        n_threads: CPU threads (default: all cores, at most 8).
        tool_mode: ``"grammar"`` (default) constrains the reply to a valid tool call or text;
            ``"free"`` lets the model write anything and parses calls out of the text.
        temperature: Sampling temperature when the request does not set one.
        seed: Sampling seed, for reproducible replies.
        tool_call_bias: Added to the logit of ``<tool_call>`` as the reply's first token when
            tools are offered: small models too often answer from memory what a tool would
            have looked up.
        after_results: Which tools the turn after successful tool results may call: ``"none"``
            (answer in text: best for small models), ``"others"`` or ``"all"``. See
            :func:`callable_tools`.
    """

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

    @property
    def model_id(self) -> str:
        return f"local/{self.name}"

    @property
    def context_limit(self) -> int | None:
        return self.n_ctx

    def load(self) -> Any:
        """Load the model now (it otherwise loads on the first request) and return the
        ``llama_cpp.Llama``. Loading happens once per process and file."""
        return _load(self.path, self.n_ctx, self.n_threads).llm

    def __repr__(self) -> str:
        return f"LocalModel({self.model_id!r}, path={str(self.path)!r})"

    async def stream(self, request: ModelRequest) -> AsyncIterator[ProviderEvent]:
        loaded = await asyncio.to_thread(_load, self.path, self.n_ctx, self.n_threads)
        llm = loaded.llm
        prompt = render_prompt(
            llm.metadata.get("tokenizer.chat_template"),
            request,
            bos=_piece(llm, llm.token_bos()),
            eos=_piece(llm, llm.token_eos()),
        )
        tokens = _tokenize(llm, prompt)
        budget = self.n_ctx - len(tokens)
        if budget < 16:
            raise ContextOverflowError(
                f"The conversation ({len(tokens):,} tokens) does not fit the local model's context "
                f"window ({self.n_ctx:,} tokens).",
                hint="Compact the conversation (`/compact`) or start a new one, or use a larger n_ctx.",
            )
        max_tokens = min(budget, request.settings.max_tokens or budget)
        grammar: str | None = None
        offered = callable_tools(request, self.after_results)
        if request.tools and self.tool_mode == "grammar":
            grammar = await asyncio.to_thread(_grammar, tuple(offered))
        temperature = request.settings.temperature
        temperature = self.temperature if temperature is None else temperature
        bias = self.tool_call_bias if offered else 0.0
        job = _Job(loaded, tokens, max_tokens, temperature, grammar, self.seed, bias)
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[str | _Done | BaseException] = asyncio.Queue()
        thread = threading.Thread(
            target=job.run, args=(loop, queue), name="ipyagent-local-model", daemon=True
        )
        thread.start()
        splitter = ThinkTagSplitter()
        # In grammar mode, a call to a tool held back this turn is not a call, even in text.
        parser = ToolTextParser([t.name for t in (offered if self.tool_mode == "grammar" else request.tools)])
        calls = 0
        try:
            while True:
                item = await queue.get()
                if isinstance(item, BaseException):
                    raise ProviderError(
                        f"The local model failed while generating: {item}",
                        hint="Retry; if it keeps failing, the GGUF file or the llama-cpp-python build "
                        "may be broken (see scripts/install-llama-cpp.sh).",
                        code="local_generation_failed",
                    ) from item
                done = item if isinstance(item, _Done) else None
                pieces = splitter.flush() if done else splitter.feed(item)  # type: ignore[arg-type]
                for kind, text in pieces:
                    if kind == "thinking":
                        yield ThinkingChunk(text=text)
                        continue
                    for part in parser.feed(text):
                        if isinstance(part, str):
                            yield TextChunk(text=part)
                        else:
                            yield ToolCallChunk(key=calls, name=part.name, arguments=part.arguments)
                            calls += 1
                if done is None:
                    continue
                for part in parser.flush():
                    if isinstance(part, str):
                        yield TextChunk(text=part)
                    else:
                        yield ToolCallChunk(key=calls, name=part.name, arguments=part.arguments)
                        calls += 1
                usage = Usage(
                    input_tokens=len(tokens) - done.reused,
                    cache_read_tokens=done.reused,
                    output_tokens=done.generated,
                    requests=1,
                )
                yield UsageReport(usage=usage, context_limit=self.n_ctx)
                finish: FinishReason = "tool_calls" if calls else ("length" if done.truncated else "stop")
                yield ResponseEnd(finish_reason=finish)
                return
        finally:
            job.stop.set()  # the worker sees it before its next token and lets go of the model


@dataclass
class _Done:
    generated: int
    reused: int
    truncated: bool


@dataclass
class _Job:
    loaded: _Loaded
    tokens: list[int]
    max_tokens: int
    temperature: float
    grammar: str | None
    seed: int | None
    call_bias: float
    stop: threading.Event = field(default_factory=threading.Event)

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
                put(_Done(0, 0, False))
            else:
                put(exc)

    def _generate(self, put: Any) -> _Done:
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
        llm.n_tokens = reused
        llm.eval(tokens[reused:])
        vocab = llama_cpp.llama_model_get_vocab(llm.model)
        n_vocab = llm.n_vocab()
        sampler = _Sampler(self.temperature, self.seed)
        grammar = _LazyGrammar(vocab, n_vocab, self.grammar) if self.grammar else None
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        generated = 0
        # Models write the opener as the special token or as plain text ("<" + "tool_call>"; the
        # Qwen2.5-Coder GGUFs prefer the text): nudge both first tokens.
        openers = {
            *llm.tokenize(b"<tool_call>", add_bos=False, special=True)[:1],
            *llm.tokenize(b"<", add_bos=False, special=False)[:1],
        }
        try:
            while not self.stop.is_set():
                logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(n_vocab,))
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
                text = decoder.decode(llm.detokenize([token], special=True))
                if text:
                    put(text)
                if generated >= self.max_tokens:
                    break
                llm.eval([token])
        finally:
            if grammar is not None:
                grammar.close()
        tail = decoder.decode(b"", final=True)
        if tail:
            put(tail)
        return _Done(generated, reused, generated >= self.max_tokens)


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


def _grammar(tools: tuple[ToolSpec, ...]) -> str:
    _import_llama()
    return tool_grammar(tools)


def _piece(llm: Any, token: int) -> str:
    if token < 0:
        return ""
    return bytes(llm.detokenize([token], special=True)).decode("utf-8", errors="ignore")


def _tokenize(llm: Any, prompt: str) -> list[int]:
    # Templates that write the BOS token themselves must not get a second one from the tokenizer.
    bos = _piece(llm, llm.token_bos())
    add_bos = not (bos and prompt.startswith(bos))
    return list(llm.tokenize(prompt.encode("utf-8"), add_bos=add_bos, special=True))
