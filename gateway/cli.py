"""The ``cachegate`` command line: one program, subcommands."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gateway.settings import Settings


def _cmd_lab(args: argparse.Namespace) -> int:
    from prefix.lab.experiment import explain, run_experiment
    from prefix.lab.numbers import format_numbers
    from prefix.lab.trace import TraceConfig, compare_policies

    result = run_experiment(
        num_tokens=args.tokens,
        change_position=args.change_position,
        block_size=args.block_size,
        namespace_b=args.namespace_b,
    )
    print(
        explain(result) if args.explain else f"reused={result.reused} recompute={result.recompute}"
    )
    if args.trace:
        print()
        print(compare_policies(TraceConfig(capacity_blocks=args.capacity)))
    if args.numbers or args.measure:
        measured = None
        if args.measure:
            from prefix.lab.measure import measure_ttft_model
            from prefix.serve.engine import PrefixEngine

            print("\nloading the engine to measure TTFT coefficients ...", flush=True)
            measured = measure_ttft_model(PrefixEngine())
        print()
        print(format_numbers(measured))
    return 0


def _cmd_generate(args: argparse.Namespace) -> int:
    from prefix.config import EngineConfig
    from prefix.model.sampling import SamplingParams
    from prefix.serve.engine import PrefixEngine

    engine = PrefixEngine(EngineConfig(model_path=args.model, block_size=args.block_size))
    params = SamplingParams(
        max_tokens=args.max_tokens, temperature=args.temperature, seed=args.seed
    )
    messages = [{"role": "user", "content": args.prompt}]
    if args.system:
        messages.insert(0, {"role": "system", "content": args.system})
    for i in range(args.repeat):
        r = engine.generate(messages, params, namespace=args.namespace)
        print(
            json.dumps(
                {
                    "run": i + 1,
                    "prompt_tokens": r.prompt_tokens,
                    "cached_tokens": r.cached_tokens,
                    "completion_tokens": r.completion_tokens,
                    "finish_reason": r.finish_reason,
                    "ttft_ms": round(r.ttft_s * 1000, 1),
                }
            )
        )
        print(r.text)
    return 0


def _cmd_engine(args: argparse.Namespace) -> int:
    from gateway.app import engine_config
    from gateway.logging_setup import configure_logging, uvicorn_log_config
    from gateway.settings import get_settings
    from prefix.serve.server import run_server

    s = get_settings()
    configure_logging(s)  # text or JSON lines (gateway/logging_setup.py)
    config = engine_config(
        s,
        s.server_salt.get_secret_value() if s.server_salt else "",
        model_path=args.model,
        device=args.device,
        dtype=args.dtype,
        block_size=args.block_size,
        kv_cache_bytes=args.kv_cache_mib * 1024 * 1024 if args.kv_cache_mib is not None else None,
        eviction_policy=args.eviction_policy,
        max_num_seqs=args.max_num_seqs,
        kernels=args.kernels,
    )
    if args.no_prefix_caching:
        config = dataclasses.replace(config, enable_prefix_caching=False)
    if args.threads is not None:
        config = dataclasses.replace(config, num_threads=args.threads or None)
    if args.no_pack_linears:
        config = dataclasses.replace(config, pack_linears=False)
    key = s.engine_key.get_secret_value() if s.engine_key else None
    provider = None
    if s.otlp_endpoint:  # the engine's spans (prefix/serve/tracing.py) over OTLP
        from gateway.tracing import build_provider

        provider = build_provider(s.otlp_endpoint, "cachegate-engine")
    run_server(
        args.host or s.host,
        args.port or s.engine_port,
        config,
        trusted_key=key,
        tracer_provider=provider,
        # uvicorn's access log wrote each raw path and query string (a client's model id,
        # tenant ids in admin paths); the engine's own access lines say what is needed
        uvicorn_options={"log_config": uvicorn_log_config(s), "access_log": False},
        one_pool=not args.legacy_threads,
    )
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    """Ask a running gateway for the misfire report (JSON) and print its summary."""
    import httpx

    from gateway.admin_client import default_admin_url, error_message
    from gateway.reports.text import format_summary
    from gateway.settings import get_settings
    from gateway.url_redaction import shown

    s = get_settings()
    url = (args.url or default_admin_url(s)).rstrip("/")
    token = args.token or (s.admin_token.get_secret_value() if s.admin_token else None)
    if not token:
        raise ValueError("no admin token: pass --token or set CACHEGATE_ADMIN_TOKEN")
    params: dict[str, str | float] = {"format": "json", "target": args.target}
    params |= {"hours": args.hours, "criterion": args.criterion}
    if args.tenant:
        params["tenant"] = args.tenant
    try:
        r = httpx.get(
            f"{url}/admin/reports/misfires",
            params=params,
            headers={"Authorization": f"Bearer {token}"},
            timeout=120,
        )
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        print(f"error: cannot reach the gateway at {shown(url)}: {exc}", file=sys.stderr)
        return 1
    if r.status_code != 200:  # its message, as the other admin commands print it
        print(f"error: {r.status_code}: {error_message(r)}", file=sys.stderr)
        return 1
    try:
        report = r.json()
        print(json.dumps(report, indent=2) if args.json else format_summary(report))
    except (ValueError, KeyError, TypeError, AttributeError):
        print(f"error: the answer from {shown(url)} is not a cachegate report", file=sys.stderr)
        return 1
    return 0


DEV_TENANT = "dev"


def serve_settings(args: argparse.Namespace, s: Settings) -> Settings:
    """The settings ``serve`` runs with: only ``--dev`` (``make serve``) turns the
    development tenant on; a production start never creates one by default. ``--host``
    and ``--port`` replace the settings', so what the start prints (the development
    key's base URL) names where it listens."""
    update: dict[str, object] = {}
    if getattr(args, "dev", False) and not s.dev_tenant:
        update["dev_tenant"] = DEV_TENANT
    if getattr(args, "host", None):
        update["host"] = args.host
    if getattr(args, "port", None) is not None:
        update["port"] = args.port
    # validated as the environment's values are: --port 86896 listened on 21360 (65536
    # wraps) where CACHEGATE_PORT=86896 was refused (session 45's review)
    return type(s).model_validate({**s.model_dump(), **update}) if update else s


def _cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from gateway.app import create_app
    from gateway.logging_setup import configure_logging, uvicorn_log_config
    from gateway.settings import get_settings
    from gateway.startup_checks import check_database
    from prefix.serve.threads import reserve_for_engine_thread

    s = serve_settings(args, get_settings())
    host, port = s.host, s.port
    configure_logging(s)  # text or JSON lines (gateway/logging_setup.py)
    check_database(s.resolved_database_url())  # one line, not uvicorn's traceback
    if s.model_path and not Path(s.model_path).expanduser().exists():  # nor the lifespan's
        raise ValueError(f"CACHEGATE_MODEL_PATH {s.model_path} does not exist")
    print(f"cachegate gateway on http://{host}:{port} (loading model and embedder ...)", flush=True)
    # torch's intra-op pool only in the in-process engine's thread (prefix/serve/threads.py);
    # the embedder and verifier set their own counts (1 by default)
    reserve_for_engine_thread()
    app = create_app(s)
    # No uvicorn access log: it wrote each raw path and query string (a client's model
    # id, tenant ids in admin paths whatever CACHEGATE_LOG_TENANT_IDS says); the gateway
    # writes its own access line per /v1 request (gateway/request_log.py), the audit
    # log records admin changes.
    uvicorn.run(
        app,
        host=host,
        port=port,
        log_level="info",
        log_config=uvicorn_log_config(s),
        access_log=False,
        timeout_keep_alive=s.keep_alive_seconds,
    )
    return 0


def _port(text: str) -> int:
    """A TCP port flag: 86896 listened on 21360 (uvicorn wraps at 65536) and 0 fell back
    to the setting (session 45's review)."""
    value = _positive(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a port (1-65535)")
    return value


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1")
    return value


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("cachegate")
    except PackageNotFoundError:  # run from a checkout that was never pip-installed
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    from gateway.cli_admin import add_admin_commands
    from gateway.cli_migrate import add_migrate_command
    from gateway.doctor import add_doctor_command

    parser = argparse.ArgumentParser(prog="cachegate", description=__doc__)
    parser.add_argument("--version", action="version", version=f"cachegate {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="the gateway: semantic cache + prefix engine")
    serve.add_argument("--host", default=None, help="default CACHEGATE_HOST or 127.0.0.1")
    serve.add_argument("--port", type=_port, default=None, help="default CACHEGATE_PORT or 8000")
    serve.add_argument(
        "--dev",
        action="store_true",
        help="development start: create the development tenant 'dev' and print its key",
    )
    serve.set_defaults(func=_cmd_serve)

    lab = sub.add_parser("lab", help="the prefix-cache experiment and the seed's worked numbers")
    lab.add_argument("--tokens", type=int, default=13, help="prompt length (default 13)")
    lab.add_argument("--change-position", type=int, default=5, help="0-based token to change")
    lab.add_argument("--block-size", type=int, default=4)
    lab.add_argument("--namespace-b", default=None, help="namespace of the second prompt")
    lab.add_argument("--explain", action="store_true", help="first diff, block boundary, keys")
    lab.add_argument("--trace", action="store_true", help="replay a trace through LRU and coverage")
    lab.add_argument("--capacity", type=int, default=512, help="trace pool capacity in blocks")
    lab.add_argument("--numbers", action="store_true", help="the seed's worked numbers")
    lab.add_argument("--measure", action="store_true", help="also fit TTFT on the real engine")
    lab.set_defaults(func=_cmd_lab)

    eng = sub.add_parser("engine", help="the engine's own OpenAI-compatible model server")
    # Every option defaults to its CACHEGATE_* setting (gateway/settings.py); the shared
    # secret that lets a caller pick a namespace comes only from CACHEGATE_ENGINE_KEY.
    eng.add_argument("--host", default=None, help="default CACHEGATE_HOST (127.0.0.1)")
    eng.add_argument(
        "--port", type=_port, default=None, help="default CACHEGATE_ENGINE_PORT (8001)"
    )
    eng.add_argument("--model", default=None, help="model path (default: bundled SmolLM2)")
    eng.add_argument("--device", default=None, help="cpu or cuda[:N] (default: CUDA if present)")
    eng.add_argument("--dtype", default=None, choices=["auto", "float32", "float16", "bfloat16"])
    eng.add_argument("--block-size", type=int, default=None, help="default 16")
    eng.add_argument("--kv-cache-mib", type=_positive, default=None, help="KV pool budget (256)")
    eng.add_argument("--eviction-policy", default=None, choices=["lru", "coverage"])
    eng.add_argument("--max-num-seqs", type=int, default=None, help="default 32")
    eng.add_argument("--no-prefix-caching", action="store_true")
    eng.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch threads of the engine's step (CACHEGATE_ENGINE_THREADS; 0: torch's default)",
    )
    eng.add_argument(
        "--legacy-threads",
        action="store_true",
        help="let the main thread keep torch's thread pool too (the behaviour before "
        "prefix/serve/threads.py; for comparison)",
    )
    eng.add_argument(
        "--no-pack-linears",
        action="store_true",
        help="keep plain linear weights (CACHEGATE_ENGINE_PACK_LINEARS=false); packing "
        "applies to bf16 on CPU only",
    )
    eng.add_argument(
        "--kernels",
        choices=["auto", "native", "torch"],
        help="attention and element-wise kernels (CACHEGATE_ENGINE_KERNELS; default auto: our "
        "native bf16 flash kernel where the CPU has AVX512-BF16, else torch's SDPA)",
    )
    eng.set_defaults(func=_cmd_engine)

    gen = sub.add_parser(
        "generate", help="run a chat prompt through the engine (repeat to see reuse)"
    )
    gen.add_argument("prompt")
    gen.add_argument("--system", default="You are a concise assistant.")
    gen.add_argument("--model", default=None, help="model path (default: bundled SmolLM2)")
    gen.add_argument("--block-size", type=int, default=16)
    gen.add_argument("--max-tokens", type=int, default=48)
    gen.add_argument("--temperature", type=float, default=0.0)
    gen.add_argument("--seed", type=int, default=None)
    gen.add_argument("--namespace", default="cli")
    gen.add_argument("--repeat", type=int, default=2)
    gen.set_defaults(func=_cmd_generate)

    rep = sub.add_parser(
        "report", help="misfire and cache report of a running gateway (admin token)"
    )
    rep.add_argument(
        "--url", default=None, help="gateway URL (default CACHEGATE_ADMIN_URL, else HOST:PORT)"
    )
    rep.add_argument("--token", default=None, help="admin token (default CACHEGATE_ADMIN_TOKEN)")
    rep.add_argument("--tenant", default=None, help="one tenant (default: all)")
    rep.add_argument("--target", type=float, default=0.01, help="target misfire rate (0.01)")
    rep.add_argument("--criterion", default="wilson_upper", choices=["wilson_upper", "point"])
    rep.add_argument("--hours", type=float, default=168.0, help="window in hours (168)")
    rep.add_argument("--json", action="store_true", help="print the whole report as JSON")
    rep.set_defaults(func=_cmd_report)

    add_admin_commands(sub)  # tenants, keys, policy, cache: over the admin API
    add_doctor_command(sub)
    add_migrate_command(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from gateway.logging_setup import configure_cli_logging

    configure_cli_logging()  # one handler, which serve's configure_logging replaces
    from prefix.errors import ModelLoadError

    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except (ValueError, ModelLoadError) as exc:  # config, request and model path errors
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `cachegate tenants list | head -1`: the reader left
        # stdout's buffer would fail again at exit: point it at devnull, quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
