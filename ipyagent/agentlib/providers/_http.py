"""Shared httpx plumbing of the HTTP adapters: one streaming POST, and every error mapped once.

:func:`stream_bytes` opens a streaming request and yields the body's bytes. Everything that can
go wrong on the way is translated here, with ``raise ... from exc``, into the hierarchy of
:mod:`ipyagent.agentlib.errors`:

- an HTTP error status, by :func:`error_for_status` (401/403 authentication, 404 unknown model,
  429 rate limit with ``Retry-After``, 408/409/5xx/529 unavailable, context overflow by message);
- an error the provider reports *inside* a 200 stream, by :func:`error_from_payload` (the
  adapters call it; it reuses the status rules through the error's type or code);
- httpx exceptions (refused, reset, closed mid-body, timeouts) as retryable ``TransportError``.

Requests go through the endpoint's pooled client (:mod:`._clients`), so a conversation's turns
share one kept-alive connection; a request that finds that connection dead (the server closed it
as the request went out) is sent once more on a new one, so a server restart between turns shows
nothing. It also owns :class:`Secret`, the wrapper that keeps API keys out of reprs, and applies
:mod:`..redact` at this boundary: a key a server echoes back in an error body is masked, and
credentials in a base URL (``http://user:KEY@host/v1``) are taken out of it when the provider is
built and sent as an ``Authorization`` header, so no request URL, message, repr or httpx log line
carries them. A key in the base URL's path (``http://gateway/KEY/v1``) must stay in the request
URL; it counts among the endpoint's secrets (:func:`..redact.url_secrets`), so the URL a message
shows, and a server's echo of it, have it masked. A fragment (``#token=KEY``) is dropped: no
server ever receives one. It does not retry: the agent loop does, reading ``retryable`` and
``retry_after``.
"""

from __future__ import annotations

import base64
import email.utils
import json
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager, aclosing, nullcontext
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

import httpx

from ..errors import (
    AgentError,
    AuthenticationError,
    ContextOverflowError,
    ModelNotFoundError,
    ProtocolError,
    ProviderError,
    ProviderUnavailable,
    RateLimitError,
    TransportError,
    UserError,
)
from ..model import ProviderEvent
from ..redact import (
    MASK,
    MIN_SECRET_LEN,
    URLCredentialFilter,
    is_secret_header,
    redact,
    redact_url,
    split_userinfo,
    url_secrets,
)
from ._clients import DEFAULT_TIMEOUT, lease, release

__all__ = [
    "DEFAULT_TIMEOUT",
    "ErrorContext",
    "HTTPProvider",
    "Secret",
    "error_for_status",
    "error_from_payload",
    "parse_json",
    "parse_retry_after",
    "stream_bytes",
    "wire_int",
]

# An error body is read for its message only; a server answering 500 with megabytes of HTML
# should not be buffered whole.
_MAX_ERROR_BODY = 64 * 1024

# httpx logs every request's URL at INFO; a credential in a query string must not reach the log.
# (addFilter ignores a filter already added, so importing this module again adds nothing.)
_URL_FILTER = URLCredentialFilter()
logging.getLogger("httpx").addFilter(_URL_FILTER)

_OVERFLOW_MARKERS = (
    "context_length_exceeded",
    "context length",
    "context window",
    "prompt is too long",
    "input is too long",
    "too many tokens",
    "reduce the length",
    "exceeds the context",
    "maximum context",
    "request_too_large",
)

# Error types and codes that providers put in a JSON error body or an in-stream error event,
# and the HTTP status whose rules apply to them.
_TYPE_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "invalid_api_key": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "model_not_found": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "rate_limit_exceeded": 429,
    "insufficient_quota": 429,
    "api_error": 500,
    "server_error": 500,
    "internal_error": 500,
    "internal_server_error": 500,
    "service_unavailable": 503,
    "overloaded_error": 529,
    "timeout_error": 504,
}


class Secret:
    """An API key. Its repr and str never show it; :meth:`reveal` is called only to build the
    request headers."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def redact(self, text: str) -> str:
        """``text`` with every occurrence of the key masked (servers echo keys in 401 bodies)."""
        return redact(text, [self._value], MASK) if len(self._value) >= MIN_SECRET_LEN else text

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__


@dataclass(frozen=True)
class ErrorContext:
    """What an error message needs to say which endpoint failed and what to do about it."""

    endpoint: str
    model: str
    base_url: str
    key_env: str | None = None
    models_hint: str = ""
    connect_hint: str = ""
    #: The key and any other credential (from the base URL, from headers) a server may echo.
    secrets: tuple[Secret, ...] = field(default=(), repr=False)

    def redact(self, text: str) -> str:
        """``text`` with the endpoint's credentials, and those of any URL in it, masked."""
        return _redact(text, self.secrets)

    @property
    def who(self) -> str:
        return f"{self.endpoint}/{self.model}"


def _redact(text: str, secrets: Iterable[Secret]) -> str:
    text = redact_url(text)
    for secret in sorted(secrets, key=lambda s: len(s.reveal()), reverse=True):
        text = secret.redact(text)
    return text


# The scanner json.loads itself ends in; typeshed leaves this attribute out.
_scan_json: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def parse_json(text: str) -> Any:
    """``json.loads(text)``: the same value, the same errors. It runs once per streamed token,
    and calling the C scanner directly skips the two Python frames that cost a quarter of
    ``json.loads``; anything unusual (leading or trailing whitespace, an error) goes through
    ``json.loads`` itself."""
    try:
        value, end = _scan_json(text, 0)
    except StopIteration:
        return json.loads(text)
    return value if end == len(text) else json.loads(text)


def wire_int(value: Any) -> int:
    """An integer field of a wire payload (a token count, an index): the int, else 0 — absent,
    ``null``, a float or a bool, none of which a server should send there."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date)."""
    lowered = {k.lower(): v for k, v in headers.items()}
    millis = lowered.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when.timestamp() - time.time())


def error_for_status(
    status: int,
    message: str,
    ctx: ErrorContext,
    *,
    err_type: str | None = None,
    err_code: str | None = None,
    retry_after: float | None = None,
) -> ProviderError:
    """The error for an HTTP ``status`` (or the status an in-stream error stands for)."""
    message = ctx.redact(message.strip())[:1000] or f"HTTP {status}"
    said = f"{ctx.endpoint} answered {status} for {ctx.who}: {message}"
    lowered = f"{message} {err_type or ''} {err_code or ''}".lower()
    kw: dict[str, Any] = {"status_code": status, "retry_after": retry_after}
    key = f"the key in {ctx.key_env}" if ctx.key_env else "the endpoint's key"

    if status not in (401, 403, 429) and any(marker in lowered for marker in _OVERFLOW_MARKERS):
        return ContextOverflowError(
            f"The conversation does not fit the context window of {ctx.who}: {message}",
            hint="Compact the conversation (`%agent compact`), start a new one, or use a model with a "
            "larger window.",
            **kw,
        )
    if status == 401:
        return AuthenticationError(
            said, hint=f"Check {key}: the provider rejected it. Set a valid key and run again.", **kw
        )
    if status == 403:
        return AuthenticationError(
            said,
            hint=f"{key[0].upper()}{key[1:]} was refused access to {ctx.model!r} — check the key and "
            "the account's permissions, or pick another model with `%agent model ...`.",
            code="permission_denied",
            **kw,
        )
    if status == 404 or "model_not_found" in lowered or "not a valid model" in lowered:
        return ModelNotFoundError(
            said,
            hint=(ctx.models_hint or "Check the model name.")
            + f" If the model is right, check the endpoint's base URL ({ctx.base_url}).",
            **kw,
        )
    if status == 429:
        if "quota" in lowered or "billing" in lowered or "credit" in lowered:
            return RateLimitError(
                said,
                hint="The account is out of quota or credits — top it up or use another endpoint; "
                "retrying will not help.",
                code="quota_exceeded",
                retryable=False,
                **kw,
            )
        return RateLimitError(said, hint="Rate limited — wait and retry, or slow down the requests.", **kw)
    if status in (408, 409, 425) or status >= 500:
        code = "overloaded" if status == 529 or "overloaded" in lowered else "provider_unavailable"
        return ProviderUnavailable(
            said, hint="A temporary failure on the provider's side — retry in a moment.", code=code, **kw
        )
    return ProviderError(
        said,
        hint="The provider rejected the request; the message above says why. Check the model's options "
        "and the tools' schemas.",
        code="bad_request" if status < 500 else "provider_error",
        **kw,
    )


def error_from_payload(
    error: Any, ctx: ErrorContext, *, status: int | None = None, retry_after: float | None = None
) -> ProviderError:
    """The error for a provider's JSON error object: ``{"message", "type", "code"}``, a bare
    string, or anything else (which is shown as JSON)."""
    if isinstance(error, Mapping):
        message: Any = error.get("message") or error.get("detail") or error.get("error")
        err_type = error.get("type")
        err_code = error.get("code")
        if isinstance(message, Mapping):
            return error_from_payload(message, ctx, status=status, retry_after=retry_after)
        message = _text(error if message is None else message)
    else:
        message, err_type, err_code = _text(error), None, None
    err_type = err_type if isinstance(err_type, str) else None
    err_code = err_code if isinstance(err_code, str | int) and not isinstance(err_code, bool) else None
    if status is None or status < 400:
        # An in-stream error carries no HTTP status; OpenRouter puts one in "code".
        if isinstance(err_code, int) and 400 <= err_code < 600:
            status = err_code
        else:
            status = _TYPE_STATUS.get(err_type or "", _TYPE_STATUS.get(str(err_code), 500))
    return error_for_status(
        status,
        message,
        ctx,
        err_type=err_type,
        err_code=str(err_code) if err_code is not None else None,
        retry_after=retry_after,
    )


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, default=str)[:1000]
    except (ValueError, RecursionError):
        return f"(an unreadable {type(value).__name__})"


def _error_from_body(status: int, body: bytes, headers: httpx.Headers, ctx: ErrorContext) -> ProviderError:
    retry_after = parse_retry_after(headers)
    text = body.decode("utf-8", "replace")
    try:
        payload = json.loads(text)
    except (ValueError, RecursionError):
        payload = None
    if isinstance(payload, Mapping):
        inner = payload.get("error", payload)
        return error_from_payload(inner, ctx, status=status, retry_after=retry_after)
    return error_for_status(
        status, text or httpx.codes.get_reason_phrase(status), ctx, retry_after=retry_after
    )


def map_httpx_error(exc: Exception, ctx: ErrorContext) -> AgentError:
    """The error for an httpx exception raised while sending or reading a request."""
    where = f"{ctx.endpoint} at {ctx.base_url}"
    if isinstance(exc, httpx.ReadTimeout):
        return TransportError(
            f"{ctx.who} sent nothing for longer than the read timeout.",
            hint="Retry; if the model thinks for long, raise the endpoint's timeout.",
            code="read_timeout",
        )
    if isinstance(exc, httpx.TimeoutException):
        return TransportError(
            f"Timed out talking to {where} ({type(exc).__name__}).",
            hint=ctx.connect_hint or "Check the network and the endpoint's base URL, then retry.",
            code="timeout",
        )
    if isinstance(exc, httpx.ConnectError):
        return TransportError(
            f"Could not connect to {where}: {ctx.redact(str(exc))}",
            hint=ctx.connect_hint or "Check the network and the endpoint's base URL, then retry.",
            code="connection_failed",
        )
    if isinstance(exc, httpx.RemoteProtocolError):
        return TransportError(
            f"{where} closed the connection in the middle of the response.",
            hint="Usually a dropped connection or a proxy timeout — retry.",
            code="connection_closed",
        )
    if isinstance(exc, httpx.ReadError | httpx.WriteError):
        return TransportError(
            f"The connection to {where} was reset.",
            hint="Usually a dropped connection — retry.",
            code="connection_reset",
        )
    if isinstance(exc, httpx.DecodingError):
        return ProtocolError(
            f"{where} sent a body that could not be decoded ({exc}).",
            hint="Check the endpoint's base URL; a proxy may be mangling the response.",
            code="decoding_error",
        )
    if isinstance(exc, httpx.UnsupportedProtocol | httpx.InvalidURL):
        return UserError(
            f"The base URL of endpoint {ctx.endpoint!r} is not a usable http(s) URL: {ctx.base_url!r}.",
            hint="Fix the endpoint's base_url (or its environment variable), e.g. http://localhost:8000/v1.",
            code="invalid_base_url",
        )
    return TransportError(
        f"Request to {where} failed: {type(exc).__name__}: {ctx.redact(str(exc))}",
        hint="Check the network and the endpoint's base URL, then retry.",
    )


async def stream_bytes(
    *,
    client: httpx.AsyncClient | None,
    url: str,
    headers: Mapping[str, str],
    body: Mapping[str, Any],
    ctx: ErrorContext,
    timeout: httpx.Timeout | None = None,
    holder: object | None = None,
) -> AsyncGenerator[bytes, None]:
    """POST ``body`` as JSON and yield the response body as it arrives.

    A non-2xx status raises its mapped :class:`ProviderError` before anything is yielded. Without
    a ``client`` the pooled client of ``ctx.endpoint`` on the running loop is used, held open for
    ``holder`` (see :mod:`._clients`). ``timeout=None`` keeps the client's own timeouts
    (:data:`DEFAULT_TIMEOUT` for a pooled one).
    """
    per_request: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
    try:
        async with _client(client, ctx.endpoint, holder) as http:
            request = http.build_request("POST", url, headers=dict(headers), json=body, **per_request)
            response = await _send(http, request)
            try:
                if not response.is_success:
                    raw = b""
                    async for chunk in response.aiter_bytes():
                        raw += chunk
                        if len(raw) >= _MAX_ERROR_BODY:
                            break
                    raise _error_from_body(response.status_code, raw, response.headers, ctx)
                async for chunk in response.aiter_bytes():
                    yield chunk
            finally:
                await response.aclose()
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        raise map_httpx_error(exc, ctx) from exc


def _client(
    given: httpx.AsyncClient | None, endpoint: str, holder: object | None
) -> AbstractAsyncContextManager[httpx.AsyncClient]:
    return nullcontext(given) if given is not None else lease(endpoint, holder=holder)


# What a kept-alive connection that died unnoticed raises when a request goes out on it.
_DEAD_CONNECTION = (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)


async def _send(http: httpx.AsyncClient, request: httpx.Request) -> httpx.Response:
    """Send ``request`` and return once the response's headers are in.

    A server may close an idle connection just as a request goes out on it (its keep-alive timer
    ran out, or it restarted): the request fails before any response. Such a request almost
    surely reached no handler, so it is sent once more, on a new connection (the rule Go's
    ``net/http`` follows for requests that are not idempotent).
    A failure on a connection opened for this request is the server's answer and is raised.
    """
    opened = False

    async def trace(name: str, info: Mapping[str, Any]) -> None:
        nonlocal opened
        if name.endswith(("connect_tcp.started", "connect_unix_socket.started")):
            opened = True

    request.extensions["trace"] = trace
    try:
        return await http.send(request, stream=True)
    except _DEAD_CONNECTION:
        if opened:
            raise
    return await http.send(request, stream=True)


Item = TypeVar("Item")
Item_co = TypeVar("Item_co", covariant=True)
Item_contra = TypeVar("Item_contra", contravariant=True)


class Decoder(Protocol, Generic[Item_co]):
    """Bytes in, framed items (SSE events, NDJSON lines) out — see :mod:`._sse`."""

    def feed(self, data: bytes) -> Iterable[Item_co]: ...
    def close(self) -> Iterable[Item_co]: ...


class Parser(Protocol, Generic[Item_contra]):
    """Framed items in, provider events out: one per wire format. ``feed_many`` takes what one
    network read brought in and returns its events merged per block (see :class:`.EventBatch`)."""

    def feed_many(self, items: Iterable[Item_contra]) -> list[ProviderEvent]: ...
    def finish(self) -> list[ProviderEvent]: ...


class HTTPProvider:
    """What the three HTTP adapters share: identity, credentials, headers, client and timeout.

    Subclasses implement ``stream``. The key lives in a :class:`Secret`; subclasses reveal it
    only to put it in the request headers. Without a ``client``, requests use the endpoint's
    pooled one (see :mod:`._clients`) until :meth:`close`.
    """

    #: Told to the user when a model name is unknown (overridden per wire format).
    models_hint = ""
    connect_hint = ""

    def __init__(
        self,
        model: str,
        *,
        base_url: str,
        api_key: str | Secret | None = None,
        endpoint: str,
        key_env: str | None = None,
        headers: Mapping[str, str] | None = None,
        client: httpx.AsyncClient | None = None,
        timeout: httpx.Timeout | float | None = None,
        context_limit: int | None = None,
    ) -> None:
        self.model = model
        self.endpoint = endpoint
        # Credentials in the URL leave it here: sent as a header (as httpx would send them, Basic
        # auth overriding the adapter's own), never part of a URL that is shown or logged.
        url, userinfo = split_userinfo(base_url)
        # A fragment never reaches a server (and the request's path would go after it): a key
        # written there (``#token=KEY``) is dropped here, so nothing can show it.
        url = url.partition("#")[0]
        # A query (``?api-version=...``, ``?api_key=...``) goes after the request's path, not
        # before it; it is kept apart from ``base_url``, which is shown in messages.
        url, _, query = url.partition("?")
        self.base_url = url.rstrip("/")
        self._query = Secret(f"?{query}" if query else "")  # it may hold a key
        self.key_env = key_env
        self._secret = api_key if isinstance(api_key, Secret) or api_key is None else Secret(api_key)
        self._headers = dict(headers or {})
        self._url_auth = Secret(_basic_auth(*userinfo)) if userinfo is not None else None
        others = url_secrets(base_url) | {v for k, v in self._headers.items() if is_secret_header(k)}
        self._secrets = (
            *((self._secret,) if self._secret is not None else ()),
            *(Secret(value) for value in sorted(others)),
        )
        self._client = client
        # None: the given client's own timeouts, or DEFAULT_TIMEOUT for a pooled client.
        self._timeout = (
            timeout if timeout is None or isinstance(timeout, httpx.Timeout) else httpx.Timeout(timeout)
        )
        self._context_limit = context_limit

    @property
    def model_id(self) -> str:
        return f"{self.endpoint}/{self.model}"

    @property
    def context_limit(self) -> int | None:
        return self._context_limit

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model_id={self.model_id!r}, base_url={self._shown_url()!r})"

    def _shown_url(self) -> str:
        """The base URL as messages show it: a key in its path (a gateway's) masked."""
        return _redact(self.base_url, self._secrets)

    def close(self) -> None:
        """Let go of the endpoint's pooled client: closed once no other provider holds it and its
        requests in flight end (any thread may call this). The provider stays usable: a later
        request opens a new connection. A ``client`` passed in is the caller's to close."""
        release(self)

    def _wire_model(self, requested: str) -> str:
        # The loop may pass the qualified id or nothing; the wire wants the bare model name.
        return self.model if requested in ("", self.model_id) else requested

    def _error_context(self, model: str) -> ErrorContext:
        shown = self._shown_url()
        return ErrorContext(
            endpoint=self.endpoint,
            model=model,
            base_url=shown,
            key_env=self.key_env,
            models_hint=self.models_hint.format(base_url=shown),
            connect_hint=self.connect_hint,
            secrets=self._secrets,
        )

    async def _events(
        self,
        path: str,
        body: Mapping[str, Any],
        headers: Mapping[str, str],
        model: str,
        decoder: Decoder[Item],
        parser: Parser[Item],
    ) -> AsyncIterator[ProviderEvent]:
        """POST ``body``, decode and parse the streamed reply: what one network read brought in
        comes out as one batch, coalesced per block."""
        # Closed explicitly: on a parse error the connection must not wait for the garbage collector.
        async with aclosing(self._stream_bytes(path, body, headers, model)) as chunks:
            async for data in chunks:
                for event in parser.feed_many(decoder.feed(data)):
                    yield event
        for event in parser.feed_many(decoder.close()) + parser.finish():
            yield event

    def _stream_bytes(
        self, path: str, body: Mapping[str, Any], headers: Mapping[str, str], model: str
    ) -> AsyncGenerator[bytes, None]:
        return stream_bytes(
            client=self._client,
            url=self.base_url + path + self._query.reveal(),
            headers={**headers, **self._headers, **self._auth_header()},
            body=body,
            ctx=self._error_context(model),
            timeout=self._timeout,
            holder=self,
        )

    def _auth_header(self) -> dict[str, str]:
        return {} if self._url_auth is None else {"Authorization": self._url_auth.reveal()}


def _basic_auth(user: str, password: str) -> str:
    """The header httpx builds from a URL's userinfo (``httpx.BasicAuth``)."""
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
