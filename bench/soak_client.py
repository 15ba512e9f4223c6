"""The soak's load generator (bench/soak.py), run in its own process.

It talks to the gateway only over HTTP (asyncio + httpx, bounded concurrency), so its
work never shares the gateway's GIL. Phases: ``seed`` (each repeated question asked
once per tenant: the reference answers), ``warmup`` (a mixed batch), then ``main``
(the mixed requests, with progress reported to the parent, which opens and closes
the outages). Every request becomes one record (kind, tenant, times, status, what
came back and whether it was correct or a clean error); the records go to a JSON
Lines file the parent reads at the end.

Request kinds:

* ``hit``: a repeated question (temperature 0). A ``semantic-hit`` must return the
  reference text exactly; a miss (database down, say) must be a well-formed answer.
* ``miss``: a fresh question with a unique number and a small ``max_tokens``; it
  must never be a semantic hit (the number differs from every stored question).
* ``stream_full``: SSE read to the end; framing, ``[DONE]``, a finish reason, and
  the reference text when it is a semantic hit.
* ``stream_cancel``: SSE closed by the client after a random number of chunks.
* ``bad_input``: junk bytes, wrong types, oversize bodies, too many stop strings,
  NaN, no or a wrong key, a long non-ASCII question; a clean 4xx in the OpenAI
  error shape (the non-ASCII question may also be answered).
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing as mp
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

SYSTEM = (
    "You are a concise assistant for a travel and general-knowledge help desk. "
    "Answer in one short sentence."
)
#: Repeated questions: each is asked once in the seed phase, then again and again.
REPEATED = (
    "What is the capital of France?",
    "What is the capital of Japan?",
    "What color is the sky on a clear day?",
    "How many days are in a week?",
    "What is the largest ocean on Earth?",
    "Which planet is known as the red planet?",
    "What do bees make?",
    "What language is spoken in Brazil?",
    "What is the boiling point of water at sea level in Celsius?",
    "Who wrote Romeo and Juliet?",
    "What is the freezing point of water in Celsius?",
    "Which animal is known as the king of the jungle?",
)
FRESH_TOPICS = ("a train ticket", "a museum visit", "a hotel room", "a city tour", "a ferry ride")
KINDS = ("hit", "miss", "stream_full", "stream_cancel", "bad_input")
WEIGHTS = (0.35, 0.2, 0.1, 0.15, 0.2)
BAD_VARIANTS = (
    "junk_bytes",
    "not_an_object",
    "wrong_types",
    "messages_not_list",
    "oversize",
    "too_many_stops",
    "nan",
    "empty_messages",
    "huge_max_tokens",
    "no_key",
    "wrong_key",
    "long_non_ascii",
)
HIT_MAX_TOKENS = 48
MISS_MAX_TOKENS = 8
STREAM_MAX_TOKENS = 24


@dataclass
class ClientSpec:
    url: str
    model: str
    keys: dict[str, str]  # tenant label → API key
    requests: int  # all requests, seed and warm-up included
    warmup: int
    seed: int
    concurrency: int
    timeout: float
    out: str  # JSON Lines of the records
    max_body_bytes: int


@dataclass
class Plan:
    kind: str
    tenant: str
    question: str = ""
    variant: str = ""
    stream: bool = False
    max_tokens: int = HIT_MAX_TOKENS
    cancel_after: int = 0  # chunks read before a cancelled stream is closed


@dataclass
class Record:
    i: int
    phase: str
    kind: str
    tenant: str
    variant: str
    t0: float
    t1: float = 0.0
    status: int | str = 0  # HTTP status, or "timeout" / "transport:<Exception>"
    ttft: float | None = None
    cache: str = ""
    finish: str = ""
    text: str = ""
    ok: bool = False
    why: str = ""
    matches_reference: bool | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def chat(model: str, question: str, max_tokens: int, stream: bool = False) -> dict[str, Any]:
    return {
        "model": model,
        "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": stream,
    }


def make_plan(rng: random.Random, tenants: list[str], counter: list[int]) -> Plan:
    kind = rng.choices(KINDS, WEIGHTS)[0]
    tenant = rng.choice(tenants)
    if kind == "hit":
        return Plan(kind, tenant, rng.choice(REPEATED))
    if kind == "miss":
        counter[0] += 1
        q = f"What should I know about {rng.choice(FRESH_TOPICS)} for booking {counter[0]}?"
        return Plan(kind, tenant, q, max_tokens=MISS_MAX_TOKENS)
    if kind in ("stream_full", "stream_cancel"):
        if rng.random() < 0.5:
            q = rng.choice(REPEATED)
        else:
            counter[0] += 1
            q = f"Describe {rng.choice(FRESH_TOPICS)} number {counter[0]} briefly."
        mt = STREAM_MAX_TOKENS if kind == "stream_full" else HIT_MAX_TOKENS
        return Plan(kind, tenant, q, stream=True, max_tokens=mt, cancel_after=rng.randint(0, 8))
    return Plan(kind, tenant, variant=rng.choice(BAD_VARIANTS))


# ------------------------------------------------------------------ checks


def clean_error(r: httpx.Response) -> str:
    """'' when ``r`` is a 4xx in the OpenAI error shape, else why not (with the error
    type and code when the body has them)."""
    try:
        err = r.json()["error"]
    except (ValueError, KeyError, TypeError):
        err = None
    if not 400 <= r.status_code < 500:
        if isinstance(err, dict):
            return f"status {r.status_code} {err.get('type')}/{err.get('code')}"
        return f"status {r.status_code}"
    if err is None:
        return "4xx without an OpenAI error body"
    if not isinstance(err, dict) or set(err) != {"message", "type", "param", "code"}:
        return "4xx error object of the wrong shape"
    return ""


def check_answer(rec: Record, refs: dict[tuple[str, str], str], plan: Plan) -> None:
    """Correctness of a completed answer (``rec.text``, ``rec.cache``, ``rec.finish``)."""
    if rec.finish not in ("stop", "length"):
        rec.why = f"finish_reason {rec.finish!r}"
        return
    ref = refs.get((plan.tenant, plan.question))
    if ref is not None:
        rec.matches_reference = rec.text == ref
    if rec.cache == "semantic-hit":
        if plan.kind == "miss" or (ref is None and plan.question not in REPEATED):
            rec.why = "a fresh question was served from the semantic cache"
            return
        if ref is not None and rec.text != ref:
            rec.why = "semantic hit differs from the reference answer"
            return
    rec.ok = True


def bad_request(plan: Plan, spec: ClientSpec, key: str) -> tuple[dict[str, str], bytes, str]:
    """(headers, body, expectation) for a bad-input variant; expectation '4xx' or 'any'."""
    headers = {"Authorization": f"Bearer {key}", "content-type": "application/json"}
    body: Any = chat(spec.model, "What is the capital of France?", 8)
    expect = "4xx"
    v = plan.variant
    if v == "junk_bytes":
        return headers, random.randbytes(256), expect
    if v == "not_an_object":
        body = ["messages", 1, None]
    elif v == "wrong_types":
        body |= {"max_tokens": "many", "temperature": "hot"}
    elif v == "messages_not_list":
        body["messages"] = {"role": 5}
    elif v == "oversize":
        body["messages"][1]["content"] = "x" * (spec.max_body_bytes + 1024)
    elif v == "too_many_stops":
        body["stop"] = [f"s{i}" for i in range(5)]
    elif v == "nan":
        return (
            headers,
            json.dumps(body).replace('"temperature": 0', '"temperature": NaN').encode(),
            expect,
        )
    elif v == "empty_messages":
        body["messages"] = []
    elif v == "huge_max_tokens":
        body["max_tokens"] = 10**9
    elif v == "no_key":
        headers.pop("Authorization")
    elif v == "wrong_key":
        headers["Authorization"] = f"Bearer cg-wrong-{random.getrandbits(64):x}"
    elif v == "long_non_ascii":
        body = chat(spec.model, "这是一个很长的问题" * 40, 8)
        expect = "any"
    return headers, json.dumps(body).encode(), expect


# ------------------------------------------------------------------ one request


async def run_one(
    client: httpx.AsyncClient,
    spec: ClientSpec,
    plan: Plan,
    i: int,
    phase: str,
    refs: dict[tuple[str, str], str],
) -> Record:
    rec = Record(i, phase, plan.kind, plan.tenant, plan.variant, time.time())
    key = spec.keys[plan.tenant]
    try:
        async with asyncio.timeout(spec.timeout):
            if plan.kind == "bad_input":
                headers, raw, expect = bad_request(plan, spec, key)
                r = await client.post("/v1/chat/completions", content=raw, headers=headers)
                rec.status = r.status_code
                why = clean_error(r)
                rec.ok = not why or (expect == "any" and r.status_code == 200)
                rec.why = "" if rec.ok else why
            elif plan.stream:
                await _stream(client, spec, plan, rec, key, refs)
            else:
                body = chat(spec.model, plan.question, plan.max_tokens)
                r = await client.post(
                    "/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {key}"}
                )
                rec.status = r.status_code
                rec.cache = r.headers.get("x-cachegate-cache", "")
                if r.status_code == 200:
                    choice = r.json()["choices"][0]
                    rec.text, rec.finish = choice["message"]["content"], choice["finish_reason"]
                    check_answer(rec, refs, plan)
                else:
                    rec.why = clean_error(r)
                    rec.ok = not rec.why
    except TimeoutError:
        rec.status, rec.why = "timeout", f"no answer within {spec.timeout}s"
    except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as exc:
        rec.status, rec.why = f"transport:{type(exc).__name__}", str(exc)[:200]
    rec.t1 = time.time()
    return rec


async def _stream(
    client: httpx.AsyncClient,
    spec: ClientSpec,
    plan: Plan,
    rec: Record,
    key: str,
    refs: dict[tuple[str, str], str],
) -> None:
    body = chat(spec.model, plan.question, plan.max_tokens, stream=True)
    headers = {"Authorization": f"Bearer {key}"}
    async with client.stream("POST", "/v1/chat/completions", json=body, headers=headers) as r:
        rec.status = r.status_code
        rec.cache = r.headers.get("x-cachegate-cache", "")
        if r.status_code != 200:
            await r.aread()
            rec.why = clean_error(r)
            rec.ok = not rec.why
            return
        parts: list[str] = []
        done = False
        chunks = 0
        async for line in r.aiter_lines():
            if not line:
                continue
            if not line.startswith("data: "):
                rec.why = "SSE line without 'data: '"
                return
            data = line[len("data: ") :]
            if data == "[DONE]":
                done = True
                break
            payload = json.loads(data)
            if "error" in payload:
                rec.why = f"error event: {str(payload['error'])[:120]}"
                return
            for choice in payload.get("choices", []):
                delta = choice.get("delta", {}).get("content")
                if delta:
                    if rec.ttft is None:
                        rec.ttft = time.time() - rec.t0
                    parts.append(delta)
                if choice.get("finish_reason"):
                    rec.finish = choice["finish_reason"]
            chunks += 1
            if plan.kind == "stream_cancel" and chunks > plan.cancel_after:
                rec.ok, rec.extra["cancelled_after_chunks"] = True, chunks
                return  # leaving the block closes the connection mid-stream
        rec.text = "".join(parts)
        if plan.kind == "stream_cancel":  # it ended before the cancel point: a full answer
            rec.extra["cancelled_after_chunks"] = None
        if not done:
            rec.why = "stream ended without [DONE]"
            return
        check_answer(rec, refs, plan)


# ------------------------------------------------------------------ the process


async def _run(spec: ClientSpec, events: Any, control: Any) -> None:
    rng = random.Random(spec.seed)
    tenants = sorted(spec.keys)
    counter = [0]
    refs: dict[tuple[str, str], str] = {}
    records: list[Record] = []
    limits = httpx.Limits(max_connections=spec.concurrency * 2)
    timeout = httpx.Timeout(spec.timeout, connect=10.0)
    async with httpx.AsyncClient(base_url=spec.url, limits=limits, timeout=timeout) as client:

        async def batch(phase: str, plans: list[Plan], report: bool) -> list[Record]:
            sem = asyncio.Semaphore(spec.concurrency)
            state = {"done": 0, "bad": 0, "5xx": 0}
            step = max(1, len(plans) // 50)
            first = len(records)

            async def one(i: int, plan: Plan) -> Record:
                async with sem:
                    rec = await run_one(client, spec, plan, first + i, phase, refs)
                records.append(rec)
                state["done"] += 1
                state["bad"] += not rec.ok
                state["5xx"] += isinstance(rec.status, int) and rec.status >= 500
                if report and (state["done"] % step == 0 or state["done"] == len(plans)):
                    events.put(("progress", phase, state["done"], len(plans), dict(state)))
                return rec

            return list(await asyncio.gather(*(one(i, p) for i, p in enumerate(plans))))

        seeds = [Plan("hit", t, q) for t in tenants for q in REPEATED]
        seeded = await batch("seed", seeds, report=False)
        for rec, plan in zip(seeded, seeds, strict=True):
            if rec.status == 200 and rec.finish == "stop":
                refs[(plan.tenant, plan.question)] = rec.text
        events.put(("seeded", len(refs), len(seeds)))
        warm = [make_plan(rng, tenants, counter) for _ in range(spec.warmup)]
        await batch("warmup", warm, report=False)
        events.put(("warm", len(records)))
        await asyncio.to_thread(control.get)  # the parent measured RSS after warm-up
        main_n = max(0, spec.requests - len(records))
        plans = [make_plan(rng, tenants, counter) for _ in range(main_n)]
        await batch("main", plans, report=True)
    with Path(spec.out).open("w") as f:
        for rec in records:
            f.write(json.dumps(asdict(rec)) + "\n")
    events.put(("done", spec.out, len(records)))


def client_main(spec: ClientSpec, events: Any, control: Any) -> None:
    """The load-generator process's entry point."""
    try:
        asyncio.run(_run(spec, events, control))
    except BaseException as exc:  # the parent must learn of it rather than wait forever
        events.put(("failed", f"{type(exc).__name__}: {exc}"))
        raise


def start_client(spec: ClientSpec) -> tuple[Any, Any, Any]:
    """(process, events queue, control queue) of a started load generator (spawned: a
    fresh interpreter, no torch, no inherited threads)."""
    ctx = mp.get_context("spawn")
    events, control = ctx.Queue(), ctx.Queue()
    proc = ctx.Process(target=client_main, args=(spec, events, control), name="soak-client")
    proc.start()
    return proc, events, control
