"""The headless agent core: messages, events, tools, providers and the loop.

Nothing here imports IPython, ipykernel or widget libraries; the kernel and widget layers build
on this package, never the other way round.
"""

# endpoints is imported for what importing it does: it registers the configured keys with
# redact.known_secrets, and here it has done so before anything in the core can write a record.
from . import endpoints, events  # noqa: F401
from .agent import Agent
from .budget import Budget
from .checkpoint import MapCheckpointWarning
from .compaction import CompactionResult
from .delegation import Delegation
from .deprecation import retired_names as _retired_names
from .errors import (
    AgentError,
    AgentRunFailed,
    AuthenticationError,
    ContextOverflowError,
    ErrorInfo,
    HookError,
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
from .errors import retired_errors as _retired_errors
from .executors import DaskExecutor
from .hooks import BlockToolCall, Hooks, ToolCallInfo
from .maps import ItemResult, LoopExecutor, MapExecutor, MapResult
from .memory import Memory
from .messages import (
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from .model import ModelRequest, ModelSettings, OutputSchema, Provider, ToolChoice, ToolSpec
from .pipeline_log import PipelineWarning, StepError, StepRecord
from .pipeline_steps import agent_step, map_step
from .pipelines import BudgetExhausted, Pipeline, PipelineRun, RunInfo, Step, StepContext
from .plugins import Plugin, PluginRun, Plugins
from .policy import Block, Pass
from .result import RunResult
from .retry import RetryPolicy
from .sessions import Session, SessionWarning
from .summaries import Summaries
from .tools import RunContext, Tool, ToolOutput, tool
from .usage import ContextWindow, Usage

__all__ = [
    "Agent",
    "AgentError",
    "AgentRunFailed",
    "AuthenticationError",
    "Block",
    "BlockToolCall",
    "Budget",
    "BudgetExhausted",
    "CompactionResult",
    "ContextOverflowError",
    "ContextWindow",
    "DaskExecutor",
    "Delegation",
    "ErrorInfo",
    "HookError",
    "Hooks",
    "ImageBlock",
    "ItemResult",
    "LoopExecutor",
    "MapCheckpointWarning",
    "MapExecutor",
    "MapResult",
    "Memory",
    "Message",
    "ModelNotFoundError",
    "ModelRequest",
    "ModelSettings",
    "OutputSchema",
    "OutputValidationError",
    "Pass",
    "Pipeline",
    "PipelineFailed",
    "PipelineRun",
    "PipelineWarning",
    "Plugin",
    "PluginRun",
    "Plugins",
    "PolicyBlocked",
    "ProtocolError",
    "Provider",
    "ProviderError",
    "ProviderUnavailable",
    "RateLimitError",
    "RetryPolicy",
    "RunContext",
    "RunError",
    "RunInfo",
    "RunResult",
    "Session",
    "SessionWarning",
    "Step",
    "StepContext",
    "StepError",
    "StepRecord",
    "Summaries",
    "TextBlock",
    "ThinkingBlock",
    "Tool",
    "ToolCallBlock",
    "ToolCallInfo",
    "ToolChoice",
    "ToolOutput",
    "ToolResultBlock",
    "ToolSpec",
    "TransportError",
    "Usage",
    "UserError",
    "agent_step",
    "events",
    "map_step",
    "tool",
]

__getattr__ = _retired_names(__name__, _retired_errors)
