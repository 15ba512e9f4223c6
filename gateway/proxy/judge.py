"""The optional second stage for semantic hits inside a tenant's judge band.

A hit whose score falls inside ``policy.judge_band`` is served only if the
upstream model, asked a strict yes/no question, says both questions have the
same answer. Anything else (a "no", unparseable output, an error, a timeout)
refuses the hit: the question then goes to the model as a miss
(``judge_refused``). The prompt and the parsing are the validators' own.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from gateway.errors import BadRequestError, GatewayError
from gateway.proxy.upstream import Delta, Upstream, UpstreamRequest
from protocol.openai import new_id
from validators.judge import JudgeVerdict, LocalModelJudge, parse_yes_no

Kind = Literal["chat", "completion"]


class UpstreamJudge:
    def __init__(self, upstream: Upstream, model: str, timeout: float = 20.0) -> None:
        self.upstream = upstream
        self.model = model
        self.timeout = timeout
        # Only its prompt builder is used; the model is asked through the upstream.
        self._prompts = LocalModelJudge(lambda _prompt: "")

    async def same_answer(
        self,
        q1: str,
        q2: str,
        namespace: str,
        *,
        tenant_id: str | None = None,
        kv_block_quota: int | None = None,
    ) -> JudgeVerdict:
        """The model's verdict, asked in the tenant's own namespace and under its KV
        quota: a judge call takes blocks from the same pool as the tenant's requests."""
        prompt = self._prompts.prompt(q1, q2)

        def request(kind: Kind, body: dict[str, Any]) -> UpstreamRequest:
            return UpstreamRequest(
                kind, body, namespace, new_id("judge"),
                tenant_id=tenant_id, kv_block_quota=kv_block_quota,
            )  # fmt: skip

        params = {"model": self.model, "max_tokens": 3, "temperature": 0}
        chat = params | {"messages": [{"role": "user", "content": prompt}]}
        try:
            try:
                text = await self._ask(request("chat", chat))
            except BadRequestError:
                # A base model without a chat template: ask the same prompt as plain text.
                plain = params | {"prompt": prompt}
                text = await self._ask(request("completion", plain))
        except (TimeoutError, GatewayError) as exc:
            return JudgeVerdict(False, f"judge_error:{type(exc).__name__}")
        answer = parse_yes_no(text)
        if answer is None:
            return JudgeVerdict(False, f"judge_unparseable:{text.strip()[:40]!r}")
        return JudgeVerdict(answer, "judge_yes" if answer else "judge_no")

    async def _ask(self, request: UpstreamRequest) -> str:
        return await asyncio.wait_for(self._collect(request), self.timeout)

    async def _collect(self, request: UpstreamRequest) -> str:
        parts: list[str] = []
        async for event in self.upstream.stream(request):
            if isinstance(event, Delta):
                parts.append(event.text)
        return "".join(parts)
