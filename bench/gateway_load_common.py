"""Gateway load benchmark: what the client and the server process share.

The workload's constants (API key, tenant, ready marker, client count), the shared
system prompt and few-shot turns, the chat request body, percentile summaries and
the CPU / load / git accounting recorded with every phase. See bench/gateway_load.py.
"""

from __future__ import annotations

import math
import os
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data"
API_KEY = "cg-bench-gateway-load-key-0123456789abcdef"
TENANT = "bench"
READY = "@@READY "
CLIENTS = 32

SYSTEM_PROMPT = (
    "You are the customer support assistant of Northwind Bank, a digital bank that offers "
    "current accounts, physical and virtual debit cards, international transfers, currency "
    "exchange and top-ups, all managed in the Northwind mobile app. Rules for every reply: "
    "answer in one short sentence of at most ten words; do not greet the customer; do not "
    "apologise; do not repeat the question; do not offer further help; never ask for card "
    "numbers, passwords or codes. Facts you may rely on: new cards arrive within five to seven "
    "working days and can be tracked in the app under Cards. A lost or stolen card should be "
    "frozen at once in the app, then reported so that a replacement is sent. Virtual cards "
    "are free, work for online payments only and can be deleted at any time. Disposable "
    "virtual cards change their number after every payment. Top-ups by debit card are free; "
    "top-ups by credit card cost 0.5 percent; bank transfer top-ups take up to one working "
    "day. Transfers in euro and pounds usually arrive within one working day, other "
    "currencies within three to five. Currency exchange uses the interbank rate on weekdays "
    "and adds 0.5 percent at weekends. Cash withdrawals are free up to 200 pounds a month, "
    "then cost two percent. Contactless payments are limited to 100 pounds each. Refunds "
    "from merchants appear within five working days. A pending payment disappears or is "
    "completed within seven days. Customers must be at least 18 years old and live in the "
    "European Economic Area or the United Kingdom. Supported currencies include euro, "
    "pounds, US dollars, Swiss francs and Polish zloty. Identity checks need a passport or "
    "national identity card and a selfie. Accounts can be closed in the app under Profile. "
    "A declined payment usually means a frozen card, a low balance or a blocked merchant. "
    "Direct debits and standing orders are set up under Payments. Apple Pay and Google Pay "
    "are supported. Statements can be downloaded as PDF files from the app."
)

# Three example turns after the system prompt: SmolLM2-135M ignores "answer in ten words"
# on its own (about 1 answer in 7 ended within 24 tokens in a probe), with the examples
# about 7 in 10 do. They are part of the shared context (prefix and partition).
FEW_SHOT = (
    ("How long does a new card take to arrive?", "Five to seven working days."),
    ("Can I pay with Apple Pay?", "Yes, Apple Pay is supported."),
    ("What does it cost to top up by credit card?", "0.5 percent of the amount."),
)

PHASE2_ANSWER = (
    "You can do this in the Northwind app: open the Cards tab, choose the card, then follow "
    "the steps shown on screen. Most requests are handled at once; if something looks wrong, "
    "freeze the card first and then contact support from Help in the app, where an agent "
    "answers within a few minutes during working hours and the next morning otherwise."
)


def pct(values: list[float], q: float) -> float:
    """Percentile with linear interpolation (q in [0, 100])."""
    if not values:
        return math.nan
    s = sorted(values)
    k = (len(s) - 1) * q / 100
    lo, hi = math.floor(k), math.ceil(k)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def summary(values: list[float], digits: int = 2) -> dict[str, Any]:
    if not values:
        return {"n": 0}
    return {
        "n": len(values),
        "mean": round(statistics.fmean(values), digits),
        "p50": round(pct(values, 50), digits),
        "p90": round(pct(values, 90), digits),
        "p99": round(pct(values, 99), digits),
        "min": round(min(values), digits),
        "max": round(max(values), digits),
    }


def loadavg() -> list[float]:
    try:
        return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    except OSError:
        return []


def proc_cpu_s(pid: int) -> float:
    """utime + stime of a process (all its threads), in seconds."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return math.nan
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_busy_s() -> float:
    """CPU seconds all cores spent busy since boot (from /proc/stat)."""
    try:
        parts = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except OSError:
        return math.nan
    idle = parts[3] + (parts[4] if len(parts) > 4 else 0)
    return (sum(parts[:8]) - idle) / os.sysconf("SC_CLK_TCK")


class CpuWindow:
    """CPU seconds used by the client (this process), the server and the whole machine."""

    def __init__(self, server_pid: int) -> None:
        self.server_pid = server_pid
        self.t0 = time.perf_counter()
        self.c0 = proc_cpu_s(os.getpid())
        self.s0 = proc_cpu_s(server_pid)
        self.m0 = machine_busy_s()
        self.l0 = loadavg()

    def close(self, requests: int) -> dict[str, Any]:
        wall = time.perf_counter() - self.t0
        client = proc_cpu_s(os.getpid()) - self.c0
        server = proc_cpu_s(self.server_pid) - self.s0
        machine = machine_busy_s() - self.m0
        cores = os.cpu_count() or 1
        per = max(requests, 1)
        return {
            "wall_s": round(wall, 2),
            "client_cpu_s": round(client, 2),
            "server_cpu_s": round(server, 2),
            "machine_busy_cpu_s": round(machine, 2),
            "others_cpu_s": round(machine - client - server, 2),
            "machine_capacity_cpu_s": round(wall * cores, 2),
            "client_cpu_ms_per_request": round(1000 * client / per, 2),
            "server_cpu_ms_per_request": round(1000 * server / per, 2),
            "loadavg_start": self.l0,
            "loadavg_end": loadavg(),
        }


def git_state() -> dict[str, Any]:
    """The commit measured and the files that differed from it (others edit the tree)."""

    def git(*args: str) -> str:
        try:
            return subprocess.run(
                ["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10
            ).stdout.rstrip("\n")
        except (OSError, subprocess.SubprocessError):
            return ""

    changed = [line[3:] for line in git("status", "--porcelain").splitlines() if line]
    return {"head": git("rev-parse", "HEAD").strip(), "uncommitted": changed}


def chat_body(model: str, question: str, max_tokens: int, system: str | None = None) -> dict:
    messages = []
    if system:
        messages.append({"role": "system", "content": system})
        for user, assistant in FEW_SHOT:
            messages += [
                {"role": "user", "content": user},
                {"role": "assistant", "content": assistant},
            ]
    messages.append({"role": "user", "content": question})
    return {"model": model, "messages": messages, "max_tokens": max_tokens, "temperature": 0}


def bench_keying(tenants: Any, engine: Any) -> tuple[str, str]:
    """(namespace, weights revision) the gateway keys the bench tenant's requests with:
    ``tenant:<id>:<minted id>`` (gateway/tenants.py) and the in-process engine's weights
    digest (gateway/app.py ``_model_revisions``). Entries prepared under other keys sit
    in partitions the gateway never searches (every phase-2 request then misses)."""
    minted = tenants.namespace_id(TENANT)
    namespace = f"tenant:{TENANT}:{minted}" if minted else f"tenant:{TENANT}"
    return namespace, engine.fingerprint.weights_digest[:16]


def bench_query(body: dict[str, Any], keying: tuple[str, str]) -> Any:
    """The semantic query the gateway builds for ``body`` from the bench tenant."""
    from dataclasses import replace

    from semantic import SemanticQuery

    namespace, revision = keying
    query = SemanticQuery.from_chat(tenant=TENANT, body=body, namespace=namespace)
    return replace(query, model=f"{query.model}@{revision}")
