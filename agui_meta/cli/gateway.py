"""``agui-meta gateway --agent NAME=SPEC``: serve AG-UI agents behind the gateway.

Each ``--agent NAME=SPEC`` is an agent at ``/agents/NAME/run`` (and ``connect``, ``stop``):
SPEC is the URL of an AG-UI endpoint, or ``module:attribute`` naming an async callable of the
run input (an async generator function) or an ASGI app serving AG-UI at ``/``. Threads are
kept in memory or in an SQLite file (``--threads sqlite:PATH``: they survive a restart, and a
run in flight at a crash is recorded as ended with an error), or in Redis (``--threads redis
--redis URL``: run it on as many hosts as you like, each replica serves every thread; see
docs/gateway.md, "Across replicas, on Redis"); with ``--no-execute`` a replica is a front whose
runs are dispatched to ``agui-meta executor`` processes. With ``--scope-header NAME``,
every thread belongs to the value of that request header (set it in a trusted proxy): a request
without it is refused, another value's threads are not found. ``--budget-tokens N`` and/or
``--budget-cost X`` (with ``--prices FILE``) hold each scope to a budget per ``--budget-period``
(a day by default): docs/gateway.md, "Budgets".
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Any

from ._args import count, duration, port, positive, seconds
from ._command import Commands
from ._prices import PriceTableError, add_prices_argument, load_prices
from ._render import escape_controls

__all__ = [
    "ArgumentProblem",
    "add_agent_argument",
    "add_budget_arguments",
    "add_parser",
    "budget_of",
    "load_agent",
    "load_agents",
    "redis_client",
    "run",
]


def add_parser(commands: Commands) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = commands.add_parser(
        "gateway",
        help="serve AG-UI agents with runs that outlive their connection (connect, stop, threads)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Serve agents behind the agui-meta gateway: POST /agents/NAME/run (detached runs,\n"
            "resumable with Last-Event-ID), /agents/NAME/connect, /agents/NAME/stop, GET and\n"
            "DELETE /threads/ID, GET /threads. SPEC is an upstream URL or module:attribute\n"
            "(an async callable of the run input, or an ASGI app serving AG-UI at /).\n\n"
            "Exit status: 0 when stopped (Ctrl-C); 2 when an argument is wrong."
        ),
        epilog=(
            "examples:\n"
            "  agui-meta gateway --agent demo=agui_meta.demo:agent --port 8000\n"
            "  agui-meta gateway --agent weather=http://127.0.0.1:9000/agent "
            "--threads sqlite:threads.db\n"
            "  agui-meta gateway --agent bot=myapp.agents:app --scope-header X-User\n"
            "  agui-meta gateway --agent demo=agui_meta.demo:agent "
            "--threads redis --redis redis://127.0.0.1:6379/0"
        ),
    )
    add_agent_argument(parser, "an agent to serve (repeat for several)")
    parser.add_argument("--host", default="127.0.0.1", help="the address (default: 127.0.0.1)")
    parser.add_argument("--port", type=port, default=8000, help="the port (default: 8000)")
    parser.add_argument(
        "--threads",
        default="memory",
        metavar="memory|sqlite:PATH|redis",
        help="where threads are kept (default: memory); redis: runs, run logs and threads in "
        "the Redis of --redis, shared by every replica",
    )
    parser.add_argument(
        "--redis",
        metavar="URL",
        help="the Redis of --threads redis (redis://HOST:PORT/DB, rediss://...)",
    )
    parser.add_argument(
        "--namespace",
        default="agui",
        help="the Redis key namespace of --threads redis (default: agui)",
    )
    parser.add_argument(
        "--no-execute",
        dest="execute",
        action="store_false",
        help="with --threads redis: a front replica, executing no run; the runs it accepts are "
        "dispatched to the executors (agui-meta executor, or replicas without --no-execute)",
    )
    parser.add_argument(
        "--dispatch-timeout",
        type=seconds,
        default=30.0,
        metavar="SECONDS",
        help="with --no-execute: how long a run waits for an executor before it ends with "
        "RUN_ERROR no_executor (default: 30)",
    )
    parser.add_argument(
        "--max-dispatched",
        type=count,
        default=100,
        metavar="N",
        help="with --no-execute: runs dispatched and not ended (waiting for an executor or "
        "executing) per shard, from every front; past it, 503 with Retry-After (default: 100)",
    )
    parser.add_argument(
        "--scope-header",
        metavar="NAME",
        help="the request header whose value is the caller's scope (from a trusted proxy)",
    )
    parser.add_argument(
        "--on-busy",
        choices=("refuse", "supersede"),
        default="refuse",
        help="a run posted to a busy thread is refused (409) or stops the active one",
    )
    parser.add_argument(
        "--max-runs",
        type=count,
        default=100,
        help="active runs at most (default: 100); on a front (--no-execute), runs it dispatched "
        "that have not ended",
    )
    parser.add_argument(
        "--linger",
        type=duration,
        default=30.0,
        metavar="SECONDS",
        help="how long a run goes on with no client reading it (default: 30)",
    )
    add_budget_arguments(parser)
    return parser


def add_agent_argument(parser: argparse.ArgumentParser, help: str) -> None:
    parser.add_argument(
        "--agent", action="append", default=[], required=True, metavar="NAME=SPEC", help=help
    )


def add_budget_arguments(parser: argparse.ArgumentParser) -> None:
    """``--budget-tokens``, ``--budget-cost``, ``--budget-period`` and ``--prices``."""
    parser.add_argument(
        "--budget-tokens",
        type=count,
        metavar="N",
        help="tokens (input plus output) a scope may spend per --budget-period; past it, its "
        "runs end with RUN_ERROR budget_exceeded",
    )
    parser.add_argument(
        "--budget-cost",
        type=positive,
        metavar="X",
        help="cost a scope may spend per --budget-period, by the price table of --prices",
    )
    parser.add_argument(
        "--budget-period",
        type=seconds,
        default=86400.0,
        metavar="SECONDS",
        help="the budget's period (default: 86400, a day)",
    )
    add_prices_argument(parser)


class ArgumentProblem(Exception):
    """An argument that cannot be used (one line, exit status 2)."""


def load_agents(options: list[str]) -> dict[str, Any]:
    """The agents of the ``--agent NAME=SPEC`` options, by name."""
    agents: dict[str, Any] = {}
    for option in options:
        name, sep, spec = option.partition("=")
        if not sep or not name or "/" in name:
            raise ArgumentProblem(f"--agent is NAME=SPEC (a name without '/'), got {option!r}")
        if name in agents:
            raise ArgumentProblem(f"two agents are named {name!r}")
        agents[name] = load_agent(spec)
    return agents


def budget_of(args: argparse.Namespace) -> Any:
    """The :class:`~agui_meta.Budget` of the ``--budget-*`` options (``None``: none given)."""
    if args.budget_tokens is None and args.budget_cost is None:
        return None
    from .._budget import Budget
    from .._exceptions import UsageError

    try:
        return Budget(
            max_tokens=args.budget_tokens,
            max_cost=args.budget_cost,
            period=args.budget_period,
            prices=load_prices(args),
        )
    except (UsageError, PriceTableError, TypeError, ValueError) as exc:
        raise ArgumentProblem(str(exc)) from None


def load_agent(spec: str) -> Any:
    """What ``SPEC`` names: an upstream URL as it is, else ``module:attribute``'s object."""
    if spec.startswith(("http://", "https://")):
        return spec
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise ArgumentProblem(f"an agent is an http(s) URL or module:attribute, got {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ArgumentProblem(f"cannot import {module_name!r} (agent {spec!r}): {exc}") from None
    found: Any = module
    for part in attribute.split("."):
        try:
            found = getattr(found, part)
        except AttributeError:
            raise ArgumentProblem(f"{module_name!r} has no attribute {attribute!r}") from None
    return found


def _gateway(args: argparse.Namespace) -> tuple[Any, Any, list[Any]]:
    """The gateway the arguments describe, the app to serve, and what to close after it."""
    from .._catalog import SQLiteCatalog
    from .._exceptions import UsageError
    from .._gateway import Gateway
    from .._threads import SQLiteThreadStore

    agents = load_agents(args.agent)
    closing: list[Any] = []
    options: dict[str, Any] = {}
    if args.threads.startswith("sqlite:") and args.threads[len("sqlite:") :]:
        path = args.threads[len("sqlite:") :]
        threads, catalog = SQLiteThreadStore(path), SQLiteCatalog(path)
        closing += [threads, catalog]
        options.update(threads=threads, catalog=catalog)
    elif args.threads not in ("memory", "redis"):
        raise ArgumentProblem(f"--threads is memory, sqlite:PATH or redis, got {args.threads!r}")
    if (args.threads == "redis") != bool(args.redis):
        raise ArgumentProblem("--threads redis and --redis URL go together")
    if args.scope_header:
        options["scope"] = _header_scope(args.scope_header)
    options.update(on_busy=args.on_busy, max_runs=args.max_runs, linger=args.linger)
    if not args.execute and args.threads != "redis":
        raise ArgumentProblem("--no-execute needs --threads redis (the executors read Redis)")
    budget = budget_of(args)
    if budget is not None:
        options["budget"] = budget
    try:
        if args.threads == "redis":
            return (*_on_redis(args, agents, options), closing)
        gateway = Gateway(agents, **options)
    except (UsageError, PriceTableError, TypeError, ValueError) as exc:
        raise ArgumentProblem(str(exc)) from None
    return gateway, gateway, closing


#: Connections of the Redis pool of ``gateway --threads redis``: this many per run of
#: ``--max-runs``, plus room for as many readers waiting for events (followers, rejoiners).
REDIS_CONNECTIONS_PER_RUN = 4
REDIS_READER_CONNECTIONS = 256


def redis_client(url: str, max_runs: int) -> Any:
    """The ``redis.asyncio.Redis`` client of a gateway replica serving ``max_runs`` runs.

    A dropped connection (Redis restarted, failed over) is retried rather than failing the
    request; the pool is sized for ``max_runs``: a run holds about four connections at once and
    each waiting reader one (redis-py's default cap of 100 fails past about 25 runs).
    """
    import redis.asyncio
    import redis.exceptions
    from redis.asyncio.retry import Retry
    from redis.backoff import ExponentialBackoff

    return redis.asyncio.Redis.from_url(
        url,
        retry=Retry(ExponentialBackoff(cap=1.0, base=0.01), 8),
        retry_on_error=[redis.exceptions.ConnectionError],
        max_connections=REDIS_CONNECTIONS_PER_RUN * max_runs + REDIS_READER_CONNECTIONS,
    )


def _on_redis(
    args: argparse.Namespace, agents: dict[str, Any], options: dict[str, Any]
) -> tuple[Any, Any]:
    """A gateway replica on the Redis of ``--redis``, and the app serving it (whose lifespan
    closes the Redis client)."""
    import contextlib
    from collections.abc import AsyncIterator

    try:
        import redis  # noqa: F401
    except ImportError:
        raise ArgumentProblem(
            "--threads redis needs the redis extra: pip install 'agui-meta[redis]'"
        ) from None
    from starlette.applications import Starlette
    from starlette.routing import Mount

    from ..gateway import redis_gateway

    client = redis_client(args.redis, args.max_runs)
    gateway = redis_gateway(
        client,
        agents,
        namespace=args.namespace,
        execute=args.execute,
        dispatch_timeout=args.dispatch_timeout,
        max_dispatched=args.max_dispatched,
        **options,
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            async with gateway.running():
                yield
        finally:
            await client.aclose()

    return gateway, Starlette(routes=[Mount("/", gateway)], lifespan=lifespan)


def _header_scope(header: str) -> Any:
    from starlette.exceptions import HTTPException
    from starlette.requests import Request

    def scope(request: Request) -> str:
        value = request.headers.get(header)
        if not value:
            raise HTTPException(401, f"the request has no {header} header (the caller's scope)")
        return value

    return scope


def run(args: argparse.Namespace) -> int:
    import uvicorn

    from .._exceptions import ThreadStoreError

    try:
        gateway, app, closing = _gateway(args)
    except (ArgumentProblem, ThreadStoreError) as exc:  # a store that cannot be opened: one line
        print(f"agui-meta: {escape_controls(str(exc))}", file=sys.stderr)
        return 2
    names = ", ".join(f"/agents/{name}/run" for name in gateway.agents)
    print(f"agui-meta gateway on http://{args.host}:{args.port} ({names})", file=sys.stderr)
    try:
        uvicorn.run(
            app, host=args.host, port=args.port, lifespan="on", log_level="warning", ws="none"
        )
    finally:
        for resource in closing:
            resource.close()
    return 0
