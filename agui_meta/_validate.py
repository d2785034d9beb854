"""Lint one AG-UI stream — recorded bytes, a file, a URL or an ASGI app — into findings.

What ``agui-meta validate`` does to a file, for Python callers (the pytest plugin's
``agui_validate`` fixture is built on it): the stream goes through the default stages in
keep-going mode with the end-of-stream check, then through :class:`~agui_meta._lint.Lint`.
The reference client's rules give errors; the hygiene rules warnings or information;
``rules`` changes a code's severity (``"off"`` drops it). An agent (a URL, or an ASGI app
served in-process through httpx) is run once with ``run_input``; an error status, or a
content type that is not an AG-UI stream's, a dropped connection, a silence longer than the
keepalive window, a body that arrived in one piece late (buffered): the transport rules of
:data:`TRANSPORT_RULES`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import Any, Final, Literal

import anyio
import msgspec

from ._defaults import DefaultStages
from ._exceptions import DataError, Report, Severity, UsageError
from ._framing import aiter_body, media_format, media_type
from ._lint import Lint, Rule
from ._pipeline import wrap
from ._verify import Verify

__all__ = ["DEFAULT_RUN_INPUT", "TRANSPORT_RULES", "Findings", "at_start", "validate_stream"]

#: The run input posted to an agent when none is given.
DEFAULT_RUN_INPUT: Final[Mapping[str, Any]] = {
    "threadId": "agui-meta-validate",
    "runId": "agui-meta-validate-run",
    "messages": [{"id": "agui-meta-validate-user", "role": "user", "content": "Hello"}],
    "state": {},
    "tools": [],
    "context": [],
    "forwardedProps": {},
}

_SEVERITIES: Final = ("error", "warning", "info", "off")

#: The transport rules, checked when an agent is run (a URL or an ASGI app).
TRANSPORT_RULES: Final[dict[str, Rule]] = {
    rule.code: rule
    for rule in (
        Rule("http.status", "error", "the agent answered an error status"),
        Rule(
            "http.content-type",
            "warning",
            "the response's content type is not text/event-stream or JSON lines",
        ),
        Rule("http.dropped", "error", "the connection dropped before the body ended"),
        Rule(
            "http.no-keepalive",
            "info",
            "a silence longer than the keepalive window, with no event or keepalive line",
        ),
        Rule(
            "http.buffered",
            "info",
            "the whole body arrived in one piece, late: buffered, not streamed",
        ),
    )
}


class Findings:
    """What one stream gave: the findings (each with its severity after ``rules``), counted.

    ``findings`` keeps the first ``max_findings`` (``hidden`` counts the rest); ``counts``
    counts every one by severity; ``events`` is how many events the linter saw.
    """

    def __init__(self, source: str, max_findings: int | None) -> None:
        self.source = source
        self.findings: list[tuple[Report, Severity]] = []
        self.counts: dict[Severity, int] = {"error": 0, "warning": 0, "info": 0}
        self.hidden = 0
        self.events = 0
        self._max = max_findings

    def add(self, report: Report, severity: Severity) -> None:
        self.counts[severity] += 1
        if self._max is not None and len(self.findings) >= self._max:
            self.hidden += 1
        else:
            self.findings.append((report, severity))

    @property
    def codes(self) -> list[str]:
        """The codes of the findings kept, in order."""
        return [report.code for report, _ in self.findings]

    def failed(self, strict: bool = False) -> bool:
        """Errors, or (``strict``) warnings."""
        return bool(self.counts["error"] or (strict and self.counts["warning"]))

    def lines(self) -> list[str]:
        """One line a finding (``severity: [code] message (event N, line L, byte B)``)."""
        lines = [f"{severity}: {report}" for report, severity in self.findings]
        if self.hidden:
            lines.append(f"… and {self.hidden} more")
        return lines

    def summary(self) -> str:
        c = self.counts
        return (
            f"{self.source}: {self.events} events, {c['error']} errors, {c['warning']} warnings, "
            f"{c['info']} information"
        )

    def __repr__(self) -> str:
        return f"<Findings {self.summary()}>"


def at_start(report: Report) -> Report:
    """``report``, placed at the start of its byte stream (line 1, byte 0) when it is the
    ``stream-ended-empty`` finding: a stream with no event has no event to point at, so the
    place where its first event was expected stands for the end (SARIF's ``region`` and the
    ``FILE:LINE:BYTE`` of the text report need one, as every other finding has)."""
    if report.code == "stream-ended-empty" and report.line is None and report.offset is None:
        return msgspec.structs.replace(report, line=1, offset=0)
    return report


def _check_rules(rules: Mapping[str, str] | None) -> dict[str, str]:
    checked = dict(rules or {})
    for code, severity in checked.items():
        if severity not in _SEVERITIES:
            raise UsageError(
                f"rules[{code!r}] must be one of {', '.join(_SEVERITIES)}, got {severity!r}"
            )
    return checked


async def validate_stream(
    source: Any,
    *,
    run_input: Mapping[str, Any] | None = None,
    rules: Mapping[str, str] | None = None,
    headers: Mapping[str, str] | None = None,
    path: str = "/",
    http_timeout: float = 60.0,
    max_findings: int | None = 100,
    format: Literal["auto", "sse", "jsonl", "json-array"] = "auto",
    keepalive_window: float | None = 15.0,
    buffered_after: float | None = 1.0,
) -> Findings:
    """Lint a stream and return its :class:`Findings`.

    :param source: recorded ``bytes``/``bytearray``, a file (``os.PathLike``), an iterable of
        events (dicts or :class:`~agui_meta.events.Event`), an ``http(s)://`` URL, or an ASGI
        application (called in-process through httpx, at ``path``). An agent is run once,
        with ``run_input`` (:data:`DEFAULT_RUN_INPUT` by default).
    :param rules: ``{code: "error" | "warning" | "info" | "off"}``.
    :param http_timeout: httpx's timeout (connect, write, and each read), in seconds.
    :param keepalive_window: for an agent, the longest silence (seconds) without an event or
        a keepalive line before ``http.no-keepalive`` (``None``: not checked).
    :param buffered_after: for an agent, ``http.buffered`` when the whole body (more than one
        event) arrived in one piece more than this many seconds after the request.
    :raises UsageError: a source of another kind, or a bad severity in ``rules``.
    """
    overrides = _check_rules(rules)
    if isinstance(source, (bytes, bytearray, memoryview)):
        return await _lint(
            _once(bytes(source)), "recorded bytes", overrides, max_findings, format, framed=True
        )
    if isinstance(source, os.PathLike):
        return await _lint(source, os.fspath(source), overrides, max_findings, format, framed=True)
    if isinstance(source, str):
        if not source.startswith(("http://", "https://")):
            raise UsageError(
                f"a str source must be an http(s) URL, got {source[:60]!r}: give a recording as "
                "bytes or as a Path"
            )
        return await _agent(
            source,
            None,
            run_input,
            overrides,
            headers,
            http_timeout,
            max_findings,
            format,
            keepalive_window,
            buffered_after,
        )
    if callable(source):  # an ASGI application
        return await _agent(
            path,
            source,
            run_input,
            overrides,
            headers,
            http_timeout,
            max_findings,
            format,
            keepalive_window,
            buffered_after,
        )
    if isinstance(source, Iterable) and not isinstance(source, Mapping):
        return await _lint(source, "events", overrides, max_findings, format, framed=False)
    raise UsageError(
        "source must be bytes, a Path, an iterable of events, an http(s) URL or an ASGI app, "
        f"not {type(source).__name__}"
    )


async def _once(data: bytes) -> AsyncIterator[bytes]:
    yield data


async def _lint(
    source: Any,
    name: str,
    overrides: dict[str, str],
    max_findings: int | None,
    format: Literal["auto", "sse", "jsonl", "json-array"],
    found: Findings | None = None,
    *,
    framed: bool,
) -> Findings:
    """Lint ``source``; ``framed``: a byte stream (its findings have lines and offsets)."""
    found = found if found is not None else Findings(name, max_findings)

    def collect(report: Report) -> None:
        severity = overrides.get(report.code, report.severity)
        if severity != "off":
            found.add(at_start(report) if framed else report, severity)  # type: ignore[arg-type]

    lint = Lint()
    stages = DefaultStages(verify=Verify(report_unfinished=True))
    try:
        async with wrap(
            source, *stages, lint, mode="keep_going", on_report=collect, format=format
        ) as stream:
            await stream.drain()
    except DataError as exc:  # a framing error ends the stream
        collect(exc.to_report())
    found.events = lint.events
    return found


class _Watch:
    """The response body's chunks as they arrive: gaps, how many, and a dropped connection."""

    def __init__(self, response: Any, keepalive_window: float | None) -> None:
        self.response = response
        self.window = keepalive_window
        self.chunks = 0
        self.bytes = 0
        self.longest_gap = 0.0
        self.first_after = 0.0  # seconds from the request to the first byte
        self.dropped: str | None = None

    async def body(self, started: float) -> AsyncIterator[bytes]:
        import httpx

        last = started
        try:
            # Inflated in bounded steps (a small gzip body may inflate to gigabytes).
            async with contextlib.aclosing(aiter_body(self.response)) as chunks:
                async for chunk in chunks:
                    now = anyio.current_time()
                    if not self.chunks:
                        self.first_after = now - started
                    else:
                        self.longest_gap = max(self.longest_gap, now - last)
                    last = now
                    self.chunks += 1
                    self.bytes += len(chunk)
                    yield chunk
        except httpx.TransportError as exc:  # the connection dropped, or a read timed out
            self.dropped = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


async def _head(response: Any, limit: int) -> bytes:
    """The first ``limit`` bytes of a response's body (an error's), inflated in bounds."""
    head = b""
    async with contextlib.aclosing(aiter_body(response)) as chunks:
        async for chunk in chunks:
            head += chunk
            if len(head) >= limit:
                break
    return head[:limit]


async def _agent(
    url: str,
    app: Callable[..., Any] | None,
    run_input: Mapping[str, Any] | None,
    overrides: dict[str, str],
    headers: Mapping[str, str] | None,
    http_timeout: float,
    max_findings: int | None,
    format: Literal["auto", "sse", "jsonl", "json-array"],
    keepalive_window: float | None,
    buffered_after: float | None,
) -> Findings:
    try:
        import httpx
    except ImportError:
        raise UsageError("running an agent needs httpx: pip install 'agui-meta[httpx]'") from None

    found = Findings(url if app is None else f"ASGI app at {url}", max_findings)

    def report(code: str, message: str) -> None:
        severity = overrides.get(code, TRANSPORT_RULES[code].severity)
        if severity != "off":
            found.add(Report(code=code, message=message, severity=severity), severity)  # type: ignore[arg-type]

    transport = httpx.ASGITransport(app=app) if app is not None else None
    base = "http://agent.invalid" if app is not None else ""
    sent = {"Accept": "text/event-stream", **(headers or {})}
    body = dict(run_input if run_input is not None else DEFAULT_RUN_INPUT)
    started = anyio.current_time()
    async with (
        httpx.AsyncClient(transport=transport, base_url=base, timeout=http_timeout) as client,
        client.stream("POST", url, json=body, headers=sent) as response,
    ):
        if response.status_code >= 300:
            excerpt = (await _head(response, 300)).decode("utf-8", "replace")
            report("http.status", f"the agent answered HTTP {response.status_code}: {excerpt}")
            return found
        media = media_type(response.headers.get("content-type"))
        if media_format(media) is None:
            report(
                "http.content-type",
                f"the response's content type is {media or '(none)'!r}, not text/event-stream "
                "or JSON lines",
            )
        if format == "auto" and media_format(media) == "sse":
            format = "sse"
        watch = _Watch(response, keepalive_window)
        await _lint(
            watch.body(started), found.source, overrides, max_findings, format, found, framed=True
        )
    if watch.dropped is not None:
        report(
            "http.dropped",
            f"the connection dropped after {watch.bytes} bytes ({watch.dropped})",
        )
    if keepalive_window is not None and watch.longest_gap > keepalive_window:
        report(
            "http.no-keepalive",
            f"{watch.longest_gap:.1f} s passed without an event or a keepalive line (the window "
            f"is {keepalive_window:g} s): proxies may cut an idle connection",
        )
    if (
        buffered_after is not None
        and watch.chunks == 1
        and found.events > 1
        and watch.first_after > buffered_after
    ):
        report(
            "http.buffered",
            f"all {found.events} events arrived at once, {watch.first_after:.1f} s after the "
            "request: the response looks buffered, not streamed",
        )
    return found
