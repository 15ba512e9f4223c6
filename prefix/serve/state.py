"""What the engine server's handlers share: the engine, its async front and settings."""

from __future__ import annotations

from dataclasses import dataclass, field

from prefix.core.hashing import short
from prefix.serve.async_engine import AsyncEngine, dead_message
from prefix.serve.engine import PrefixEngine
from prefix.serve.metrics import EngineMetrics
from protocol.errors import ApiError
from protocol.headers import DEFAULT_NAMESPACE
from protocol.openai import new_id
from protocol.responses import Kind


@dataclass
class EngineServer:
    """Held in ``app.state.server``; ``async_engine`` is set while the lifespan runs."""

    engine: PrefixEngine
    model_name: str
    trusted_key: str | None
    max_body_bytes: int
    metrics: EngineMetrics
    async_engine: AsyncEngine | None = None
    accepted_models: frozenset[str] = field(init=False)
    default_namespace_id: str = field(init=False)

    def __post_init__(self) -> None:
        self.accepted_models = frozenset({self.model_name, self.engine.loaded.model_id})
        # Logged for requests that fail before their namespace is known; computed once.
        self.default_namespace_id = short(self.engine.chain_root(DEFAULT_NAMESPACE))

    def running_engine(self) -> AsyncEngine:
        ae = self.async_engine
        if ae is None or not ae.is_alive:
            error = None if ae is None else ae.error
            raise ApiError(503, dead_message(error), "server_error", None, "engine_dead")
        return ae

    @staticmethod
    def new_request_id(kind: Kind) -> str:
        return new_id("chatcmpl" if kind == "chat" else "cmpl")
