"""The error hierarchy: structured info on every error, readable messages, and pickling."""

from __future__ import annotations

import copy
import pickle

import pytest

from ipyagent.agentlib import errors
from ipyagent.agentlib.errors import (
    AgentError,
    AgentRunFailed,
    AuthenticationError,
    ContextOverflowError,
    ErrorInfo,
    HookError,
    Layer,
    ModelNotFoundError,
    OutputValidationError,
    PipelineFailed,
    PolicyBlocked,
    ProtocolError,
    ProviderError,
    ProviderUnavailable,
    RateLimitError,
    RunError,
    TransportError,
    UserError,
)

# class -> (layer, default code, retryable by default)
DEFAULTS: dict[type[AgentError], tuple[Layer, str, bool]] = {
    AgentError: ("run", "agent_error", False),
    UserError: ("user", "user_error", False),
    ProviderError: ("provider", "provider_error", False),
    AuthenticationError: ("provider", "authentication_failed", False),
    ModelNotFoundError: ("provider", "model_not_found", False),
    RateLimitError: ("provider", "rate_limited", True),
    ProviderUnavailable: ("provider", "provider_unavailable", True),
    ContextOverflowError: ("provider", "context_overflow", False),
    ProtocolError: ("provider", "protocol_error", False),
    TransportError: ("transport", "transport_error", True),
    HookError: ("hook", "hook_failed", False),
    PolicyBlocked: ("hook", "policy_blocked", False),
    RunError: ("run", "run_failed", False),
    OutputValidationError: ("run", "invalid_output", False),
    AgentRunFailed: ("run", "run_failed", False),
    PipelineFailed: ("run", "pipeline_step_failed", False),
}
CLASSES = list(DEFAULTS)


def test_every_error_class_in_the_module_is_covered() -> None:
    exported = {getattr(errors, name) for name in errors.__all__}
    classes = {obj for obj in exported if isinstance(obj, type) and issubclass(obj, AgentError)}
    assert classes == set(DEFAULTS)


def test_the_retired_tool_error_still_resolves_with_a_warning() -> None:
    import ipyagent.agentlib

    for module in (errors, ipyagent.agentlib):
        with pytest.warns(DeprecationWarning, match="ToolError is deprecated.*catch AgentError"):
            retired = module.ToolError  # type: ignore[attr-defined]
        assert issubclass(retired, AgentError)
        assert "ToolError" not in module.__all__
    with pytest.raises(AttributeError, match="no attribute 'NoSuchError'"):
        errors.NoSuchError  # type: ignore[attr-defined]  # noqa: B018


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_defaults_fill_the_info(cls: type[AgentError]) -> None:
    layer, code, retryable = DEFAULTS[cls]
    err = cls("It broke.")
    assert err.info == ErrorInfo(
        code=code, layer=layer, severity="error", retryable=retryable, message="It broke.", hint=""
    )
    assert (err.code, err.hint, err.retryable) == (code, "", retryable)
    assert err.retry_after is None
    assert str(err) == "It broke."
    assert err.args == ("It broke.",)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_explicit_options_override_the_defaults(cls: type[AgentError]) -> None:
    layer, _, retryable = DEFAULTS[cls]
    err = cls(
        "It broke.",
        hint="Try again later.",
        code="custom_code",
        retryable=not retryable,
        severity="fatal",
        status_code=503,
        retry_after=2.5,
    )
    assert err.info.code == "custom_code"
    assert err.info.layer == layer  # the layer belongs to the class
    assert err.info.severity == "fatal"
    assert err.info.retryable is (not retryable)
    assert err.info.status_code == 503
    assert err.retry_after == 2.5


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_str_includes_the_hint(cls: type[AgentError]) -> None:
    err = cls("No key found.", hint="Set OPENAI_API_KEY or pick another model.")
    assert str(err) == "No key found. — Set OPENAI_API_KEY or pick another model."
    assert str(err.info) == str(err)


def test_retryable_false_is_respected_on_a_retryable_class() -> None:
    assert RateLimitError("quota exhausted", retryable=False).retryable is False
    assert TransportError("bad certificate", retryable=False).info.retryable is False


def test_the_hierarchy() -> None:
    provider_errors = (
        AuthenticationError,
        ModelNotFoundError,
        RateLimitError,
        ProviderUnavailable,
        ContextOverflowError,
        ProtocolError,
    )
    for cls in provider_errors:
        assert issubclass(cls, ProviderError)
    for cls in CLASSES:
        assert issubclass(cls, AgentError)
        assert issubclass(cls, Exception)
    assert not issubclass(TransportError, ProviderError)


def test_error_info_is_frozen() -> None:
    info = UserError("x").info
    with pytest.raises(ValueError, match="frozen"):
        info.code = "other"  # type: ignore[misc]


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_errors_pickle_with_their_info_and_retry_after(cls: type[AgentError]) -> None:
    err = cls(
        "Too many requests.", hint="Wait.", code="c", severity="warning", status_code=429, retry_after=7.0
    )
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is cls
    assert back.info == err.info
    assert back.retry_after == 7.0
    assert str(back) == "Too many requests. — Wait."
    assert back.args == ("Too many requests.",)


def test_an_error_from_a_chained_raise_still_pickles() -> None:
    try:
        try:
            raise ConnectionResetError("peer reset")
        except ConnectionResetError as exc:
            raise TransportError("Connection lost.", hint="Check the network.") from exc
    except TransportError as err:
        back = pickle.loads(pickle.dumps(err))
    assert back.info.code == "transport_error"
    assert back.retryable is True


def test_copy_keeps_the_info() -> None:
    err = RateLimitError("Slow down.", retry_after=3.0)
    duplicate = copy.copy(err)
    assert duplicate is not err
    assert duplicate.info == err.info
    assert duplicate.retry_after == 3.0


def test_errors_can_be_raised_and_caught_by_layer() -> None:
    with pytest.raises(ProviderError) as info:
        raise ModelNotFoundError("No model 'gpt-9'.", hint="Run `%agent models` to list them.")
    assert info.value.info.layer == "provider"
    assert info.value.code == "model_not_found"
