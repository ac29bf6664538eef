"""What counts as a secret, and how it is masked before text leaves ipyagent.

One owner for both questions, so every boundary masks the same things the same way:

- :func:`known_secrets`: the values that must never be written — key-like environment
  variables (``*_KEY``, ``*TOKEN*``, ``*SECRET*``, ...), the endpoint keys of the config file,
  and the credentials inside URLs (``https://user:KEY@host``, ``?api_key=KEY``) found in either,
  each with the escaped forms it takes inside a JSON string or a repr
  (the endpoints' values come from :mod:`.endpoints`, which registers them with
  :func:`add_secret_source`: the adapters that the endpoint registry builds import this module,
  so it imports none of them);
- :func:`redact` and :func:`redact_strings`: those values masked in a text or in every string
  of a JSON-like value (cassettes, session files, tool results);
- :func:`mask_secrets`: those values *and* text shaped like a credential (``sk-...``,
  ``ghp_...``, ``AKIA...``, ``pypi-...``, ``gsk_...``, ``xai-...``, ``npm_...``, JWTs, PEM,
  OpenSSH and PGP private-key blocks, URL credentials) masked, for what is sent to a model
  (:mod:`.request_redaction`);
- :func:`redact_url`: a URL — or any text holding URLs — with its credentials masked, for
  messages, reprs and logs: the userinfo, key-like query and fragment parameters, and the pieces
  of a path or fragment that :func:`looks_like_key` (a gateway's ``https://host/KEY/v1``);
  :func:`split_userinfo` takes them out of a URL altogether, so that a
  request URL never carries them (they go in a header instead);
- :class:`URLCredentialFilter`: a logging filter that masks URL credentials in log records
  (httpx logs every request's URL).

It does not decide *where* redaction happens: the provider adapters (errors, reprs), the cassette
writer, the session writer and the agent loop (tool results) call it.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import re
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

__all__ = [
    "MASK",
    "REDACTED",
    "URLCredentialFilter",
    "add_secret_source",
    "is_secret_header",
    "known_secrets",
    "looks_like_key",
    "mask_secrets",
    "redact",
    "redact_json_line",
    "redact_strings",
    "redact_text",
    "redact_url",
    "split_userinfo",
    "url_secrets",
]

#: What a secret becomes in files (cassettes, sessions) and in what the model reads.
REDACTED = "[redacted]"
#: What a secret becomes in messages, reprs and logs.
MASK = "***"
#: Shorter values are placeholders ("EMPTY", "ollama") that local servers ignore; masking them
#: would garble ordinary words.
MIN_SECRET_LEN = 8

_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)
# A query parameter that carries a credential: ?api_key=, ?key=, ?access_token=, Azure's ?sig=.
_SECRET_PARAM = re.compile(r"key|token|secret|passw|credential|^sig$|signature|^auth", re.IGNORECASE)
# The userinfo of a URL: everything between "://" and the last "@" before the host ends.
_USERINFO = re.compile(r"(?<=://)[^/?#\s@]*(?:@[^/?#\s@]*)*@")
# Quotes and brackets end a value: a URL is often quoted or parenthesised in a message. A
# fragment's pairs (``#access_token=...``, OAuth's implicit flow) count like the query's.
_QUERY_PAIR = re.compile(r"([?&;#])([^=&#;\s]+)=([^&#;\s'\"<>()\[\]{},]*)")
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S+")
# Where a URL's path ends and its fragment starts, after the authority.
_AUTHORITY = re.compile(r"[^/?#]*")
# A piece of a path or fragment, between the characters that separate pieces.
_PIECE = re.compile(r"[A-Za-z0-9._~+%-]+")
# A run of letters and digits long enough to be a key rather than a word, a version or a name.
_RUN = re.compile(r"[A-Za-z0-9]{16,}")
_HEX = re.compile(r"[0-9a-fA-F]{32,}")


def looks_like_key(piece: str) -> bool:
    """Whether a piece of a URL's path or fragment looks like a key: it holds a run of 16+
    letters and digits that mixes digits, lower- and upper-case letters (base62 and base64
    keys), or 32+ hex digits (hex keys, account ids), or a credential of a known shape.

    Words, versions, deployment and model names (``v1``, ``my-gpt4o-2024-08-06``,
    ``Meta-Llama-3.1-70B-Instruct``) do not: their runs are short or lack a mix. A key of
    lower-case letters and digits only is not recognised by its look; the endpoint's own key and
    the environment's secrets are masked as known values wherever they appear.
    """
    if len(piece) < 16:  # "v1", "api", "openai": most pieces, and no key is this short
        return False
    for run in _RUN.findall(piece):
        if _HEX.fullmatch(run) or (
            not run.isdigit() and not run.isalpha() and not run.islower() and not run.isupper()
        ):
            return True
    return SECRET_SHAPES.search(piece) is not None


def redact_url(text: str, *, paths: bool = True) -> str:
    """``text`` with the credentials of every URL in it masked: the whole userinfo
    (``https://***@host``), the value of key-like query and fragment parameters
    (``?api_key=***``, ``#token=***``) and, unless ``paths=False``, every piece of a path or
    fragment that :func:`looks_like_key` (``https://gateway/***/v1``).

    What is sent to a model passes ``paths=False`` (see :func:`mask_secrets`): there a URL is
    often the work itself (a document's or a commit's address), and guessing by the look would
    take it away; known secrets are masked there wherever they appear, URLs included.
    """
    if "://" not in text:
        return text
    return _URL.sub(lambda m: _redact_one_url(m.group(0), paths), text)


def _redact_one_url(url: str, paths: bool) -> str:
    url = _USERINFO.sub(f"{MASK}@", url, count=1)
    url = _QUERY_PAIR.sub(
        lambda m: f"{m.group(1)}{m.group(2)}={MASK}" if _SECRET_PARAM.search(m.group(2)) else m.group(0), url
    )
    if not paths:
        return url
    scheme, _, rest = url.partition("://")
    authority = _AUTHORITY.match(rest)
    start = len(scheme) + 3 + (authority.end() if authority else 0)
    path, sep, query = url[start:].partition("?")
    path, hash_, fragment = path.partition("#")
    if not hash_:  # a fragment after the query: the query's pairs were masked above
        query, hash_, fragment = query.partition("#")
    masked = _mask_pieces(path) + sep + query + hash_ + _mask_pieces(fragment)
    return url[:start] + masked


def _mask_pieces(part: str) -> str:
    return _PIECE.sub(lambda m: MASK if looks_like_key(m.group(0)) else m.group(0), part) if part else part


def split_userinfo(url: str) -> tuple[str, tuple[str, str] | None]:
    """``url`` without its userinfo, and the (percent-decoded) user and password it held."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url, None
    if "@" not in parts.netloc:
        return url, None
    userinfo, _, host = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    return urlunsplit(parts._replace(netloc=host)), (unquote(user), unquote(password))


def url_secrets(url: str) -> set[str]:
    """The credentials a URL holds, raw and decoded: its userinfo, key-like query and fragment
    values, and the pieces of its path and fragment that :func:`looks_like_key` — a gateway
    that reads its key from the path (``https://gateway/KEY/v1``) shows it in what it echoes."""
    return set(_url_secrets(url))


# Every request asks for the secrets of the same few URLs (the endpoints' base URLs, the
# environment's), and the answer depends on the text alone.
@functools.lru_cache(maxsize=256)
def _url_secrets(url: str) -> frozenset[str]:
    found: set[str] = set()
    for match in _USERINFO.finditer(url):
        userinfo = match.group(0)[:-1]
        user, _, password = userinfo.partition(":")
        found.update({userinfo, user, password, unquote(user), unquote(password)})
    for match in _QUERY_PAIR.finditer(url):
        if _SECRET_PARAM.search(match.group(2)):
            found.update({match.group(3), unquote(match.group(3))})
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return frozenset(s for s in found if s)
    for part in (parts.path, parts.fragment):
        for piece in _PIECE.findall(part):
            if looks_like_key(piece):
                found.update({piece, unquote(piece)})
    return frozenset(s for s in found if s)


def is_secret_header(name: str) -> bool:
    """Whether a configured header carries a credential (``Authorization``, ``api-key``, ...)."""
    return name.lower() == "authorization" or bool(_SECRET_NAME.search(name))


#: What else names secrets (the configured endpoints' keys), registered by who knows them: each
#: with the function that says when its answer may have changed (``None``: at any time).
_SOURCES: list[tuple[Callable[[], Iterable[str]], Callable[[], Hashable] | None]] = []


def add_secret_source(
    source: Callable[[], Iterable[str]], *, version: Callable[[], Hashable] | None = None
) -> None:
    """Have :func:`known_secrets` include what ``source()`` returns (once, however often added).
    ``version()``: a cheap value that changes whenever ``source()``'s answer may change besides
    the environment (a file's mtime, a registry's counter); without one, ``source()`` is asked
    on every call."""
    if all(known is not source for known, _ in _SOURCES):
        _SOURCES.append((source, version))


#: :func:`known_secrets`' last answer and what it was computed from: the environment (a copy,
#: compared at C speed) and each source's version. One tuple, replaced whole: threads may ask.
_last: tuple[dict[Any, Any], tuple[Hashable, ...], tuple[str, ...]] | None = None


def _environ_copy() -> dict[Any, Any]:
    """The process environment as one dict: CPython's ``os.environ`` keeps it in ``_data``, which
    copies and compares without a Python call per variable (a walk of ``os.environ`` decodes
    each one, and was most of the loop's cost); elsewhere, the walk."""
    data = getattr(os.environ, "_data", None)
    return dict(data) if isinstance(data, dict) else dict(os.environ)


def known_secrets(environ: Mapping[str, str] | None = None) -> list[str]:
    """Every value that must never be written, longest first: key-like environment variables,
    credentials in URLs (in the environment or the endpoints' base URLs), endpoint keys and
    credential headers from the config file. Without ``environ`` (the process's), the answer is
    kept until the environment or a source's version changes, so asking is cheap."""
    if environ is not None:
        return _compute(environ)
    global _last
    env = _environ_copy()
    versions = tuple(version() if version is not None else object() for _, version in _SOURCES)
    last = _last
    if last is None or last[0] != env or last[1] != versions:
        last = _last = (env, versions, tuple(_compute(os.environ)))
    return list(last[2])


def _compute(env: Mapping[str, str]) -> list[str]:
    found = {v.strip() for k, v in env.items() if _SECRET_NAME.search(k) and len(v.strip()) >= MIN_SECRET_LEN}
    for value in env.values():
        if "://" in value:
            found.update(url_secrets(value))
    for source, _ in _SOURCES:
        with contextlib.suppress(Exception):  # a broken config file is reported where it is used
            found.update(source())
    found = {s for s in found if len(s) >= MIN_SECRET_LEN}
    return sorted(found.union(*map(_escaped_forms, found)), key=len, reverse=True)


# A character that a JSON string or a Python repr writes differently: quotes, a backslash,
# control characters, anything beyond ASCII.
_ESCAPED = re.compile(r"[\"'\\]|[^\x20-\x7e]")


def _escaped_forms(secret: str) -> set[str]:
    r"""How ``secret`` reads once written inside a string literal, when that differs from the
    value: ``json.dumps(os.environ)`` turns ``"`` into ``\"`` and ``\`` into ``\\``, and
    ``print(os.environ)`` writes the repr. Each form is masked like the value itself."""
    if not _ESCAPED.search(secret):
        return set()  # the common case, checked once per secret and request
    forms = {json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1], repr(secret)[1:-1]}
    forms.discard(secret)
    return forms


def redact_text(text: str) -> str:
    """``text`` with URL credentials masked and every :func:`known_secrets` value redacted: for
    the message of an exception nothing translated (a custom provider's, a bug's)."""
    return redact(redact_url(text), known_secrets())


def redact(text: str, secrets: Iterable[str], marker: str = REDACTED) -> str:
    """``text`` with every occurrence of each of ``secrets`` replaced by ``marker``. Pass the
    secrets longest first (as :func:`known_secrets` returns them), so a key is masked whole."""
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, marker)
    return text


# Credentials recognizable by their shape alone, whoever's they are. Each is anchored on a
# vendor's fixed prefix and needs a long tail, so ordinary words and code ("task-list",
# "disk-usage-report", "AKIAS") do not match; a generic "long random string after key=" is left
# out on purpose: it masks hashes, ids and code the model needs to read.
SECRET_SHAPES = re.compile(
    r"(?<![A-Za-z0-9_-])(?:"
    r"sk-(?=[A-Za-z0-9_-]*[0-9])[A-Za-z0-9_-]{20,}"  # OpenAI (sk-, sk-proj-), Anthropic (sk-ant-)
    r"|(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"  # Stripe
    r"|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}"  # GitHub
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}(?![0-9A-Za-z])"  # AWS access key ids
    r"|xox[abposr]-[A-Za-z0-9-]{10,}"  # Slack
    r"|AIza[0-9A-Za-z_-]{35}"  # Google API keys
    r"|hf_[A-Za-z0-9]{30,}"  # Hugging Face
    r"|glpat-[A-Za-z0-9_-]{20,}"  # GitLab
    r"|pypi-Ag[A-Za-z0-9_-]{40,}"  # PyPI (a macaroon: base64 of a version byte, then the location)
    r"|gsk_[A-Za-z0-9]{20,}"  # Groq
    r"|xai-(?=[A-Za-z0-9]*[0-9])[A-Za-z0-9]{20,}"  # xAI (model names "xai-grok-2" have dashes)
    r"|npm_[A-Za-z0-9]{30,}"  # npm
    r"|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"  # a JWT: {"...}.{"...}.signature
    r")"
    # Private keys (PEM, OpenSSH, PGP's "PRIVATE KEY BLOCK"), to their end or the end of the text.
    r"|-----BEGIN [A-Z ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY(?: BLOCK)?-----|$)"
)


def mask_secrets(text: str, secrets: Sequence[str], marker: str = REDACTED) -> str:
    """``text`` with every one of ``secrets`` (longest first), every credential-shaped string
    (:data:`SECRET_SHAPES`) and every URL credential (userinfo, key-like query and fragment
    parameters; see :func:`redact_url` for why a path is not judged by its look here) masked.
    Text that holds none of them comes back as the same object, so callers can tell cheaply
    that nothing changed."""
    masked = redact(text, secrets, marker)
    if SECRET_SHAPES.search(masked):
        masked = SECRET_SHAPES.sub(marker, masked)
    masked = redact_url(masked, paths=False)
    return text if masked == text else masked


def redact_strings(value: Any, secrets: Sequence[str], marker: str = REDACTED) -> Any:
    """``value`` (JSON-like) with every string in it redacted; mapping keys are left alone."""
    return map_strings(value, lambda text: redact(text, secrets, marker))


def map_strings(value: Any, fn: Callable[[str], str]) -> Any:
    """``value`` (JSON-like) with ``fn`` applied to every string in it, keys excepted."""
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, list | tuple):
        return [map_strings(v, fn) for v in value]
    if isinstance(value, dict):
        return {k: map_strings(v, fn) for k, v in value.items()}
    return value


def redact_json_line(line: str, secrets: Sequence[str] | None = None) -> str:
    """A JSON line with the secrets in its strings redacted. A line that holds none (the common
    case) comes back unchanged, byte for byte; one that does is parsed and written again, so a
    secret is replaced only inside strings and the line stays valid JSON."""
    secrets = known_secrets() if secrets is None else secrets
    # A secret with characters JSON escapes appears escaped in the line.
    if not any(s in line or json.dumps(s)[1:-1] in line for s in secrets):
        return line
    record = redact_strings(json.loads(line), secrets)
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")) + (
        "\n" if line.endswith("\n") else ""
    )


class URLCredentialFilter(logging.Filter):
    """Masks URL credentials in the arguments and message of a log record (httpx logs each
    request as ``HTTP Request: POST <url> ...``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = redact_url(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(_clean_arg(a) for a in record.args)
        elif isinstance(record.args, Mapping):
            record.args = {k: _clean_arg(v) for k, v in record.args.items()}
        return True


def _clean_arg(arg: Any) -> Any:
    if isinstance(arg, int | float | bytes) or arg is None:
        return arg
    text = str(arg)
    cleaned = redact_url(text)
    return arg if cleaned == text else cleaned
