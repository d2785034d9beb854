"""agui-inspector session files (format version 0): one recorded exchange, for the browser.

agui-inspector (a browser inspector for AG-UI agents) imports a session file: ``{"version": 0,
"session": {"id", "exchanges", "runs", "frames", "findings", "derived"}}``, every record with
exactly its documented fields (the project's ``docs/recordings.md``; version 0 is its
pre-stable format, refused by a build that reads another). :class:`InspectorRecording` keeps
the chunks of one response with their arrival times, and :meth:`InspectorRecording.session`
turns them into that file:

- one exchange (kind ``conversation``): method, path, the request body as sent, the status,
  the wall-clock start, the elapsed time, how the transport ended, its frames' ids;
- frames in arrival order: each SSE event block (or JSON line) with its delimiters as received,
  its data, the offset in milliseconds from the request, its type, a summary, whether the data
  is JSON and whether it is a valid AG-UI event (agui-meta's decoder, which follows the
  reference client); blocks without data are ``control``, an unterminated tail ``partial``;
- runs, from agui-meta's run ledger (ids, the input as sent, start and end times, outcome with
  the pending tool calls as the reference client counts them);
- findings: ``agui-meta validate``'s, each on the frame of its event (or on the exchange), its
  kind mapped (``json``, ``schema``, ``sequence``, ``terminal``, ``transport``);
- no ``derived`` entries, no headers (the format has no field for them).

:func:`record_exchange` makes the request and feeds a recording (``agui-meta record
--inspector`` and :meth:`agui_meta.HttpAgent.record_inspector` both use it).
"""

from __future__ import annotations

import codecs
import contextlib
import re
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

import msgspec

from ._decode import decode_event
from ._events import EVENT_TYPES
from ._exceptions import DataError, HttpStatusError, Report
from ._framing import aiter_body

if TYPE_CHECKING:
    import httpx

__all__ = ["ERROR_BODY", "FORMAT_VERSION", "InspectorRecording", "record_exchange", "unreachable"]

#: Bytes of an error response's body read, and recorded (the rest is not read).
ERROR_BODY: Final = 512

#: The version of the session format written.
FORMAT_VERSION: Final = 0

_LINE: Final = re.compile(r"[^\r\n]*(\r\n|\r|\n)")
_BREAK: Final = re.compile(r"\r\n|\r|\n")
_decode = msgspec.json.Decoder().decode
_encode = msgspec.json.Encoder().encode


def _json(value: Any) -> Any:
    """Structs (camelCase wire names) to plain JSON values."""
    return _decode(_encode(value))


class _Frame:
    __slots__ = ("envelope", "offset_ms", "partial")

    def __init__(self, envelope: str, offset_ms: float, partial: bool = False) -> None:
        self.envelope = envelope
        self.offset_ms = offset_ms
        self.partial = partial


class InspectorRecording:
    """The chunks of one response as they arrive, then the session file that shows them.

    :param url: the endpoint (only its path and query are written).
    :param request_body: the request body as sent.
    """

    def __init__(self, url: str, request_body: bytes, *, method: str = "POST") -> None:
        parts = urlsplit(url)
        self.path = parts.path + (f"?{parts.query}" if parts.query else "") or "/"
        self.method = method
        self.request_body = request_body.decode("utf-8", "replace")
        self.started_at = time.time() * 1000.0
        self._clock = time.monotonic()
        self.status: int | None = None
        self.jsonl = False
        self.response_body: str | None = None
        self.transport_error: str | None = None
        self.elapsed_ms: float | None = None
        self._text = codecs.getincrementaldecoder("utf-8")("replace")
        self._pending = ""
        self._frames: list[_Frame] = []
        self._bytes: list[bytes] = []

    @property
    def events(self) -> int:
        """The complete frames with data recorded so far: the events received, bad ones too."""
        if self.jsonl:
            return sum(1 for f in self._frames if not f.partial and f.envelope.strip())
        return sum(
            1
            for f in self._frames
            if not f.partial and any(line.startswith("data:") for line in _BREAK.split(f.envelope))
        )

    def _now(self) -> float:
        return round((time.monotonic() - self._clock) * 1000.0, 3)

    def response(self, status: int, content_type: str) -> None:
        """The response began: its status and content type (JSON lines or SSE)."""
        self.status = status
        media = content_type.split(";", 1)[0].strip().lower()
        self.jsonl = media in (
            "application/jsonl",
            "application/x-ndjson",
            "application/json-lines",
        )

    def feed(self, chunk: bytes) -> None:
        """A chunk of the body arrived now."""
        self._bytes.append(chunk)
        self._split(self._text.decode(chunk), self._now())

    def error_body(self, body: bytes) -> None:
        """A body that is not a stream (an error status): kept whole as the response body."""
        self.response_body = body.decode("utf-8", "replace")

    def end(self, error: str | None = None) -> None:
        """The body ended, or the transport failed with ``error``."""
        now = self._now()
        self._split(self._text.decode(b"", final=True), now)
        if self._pending:
            self._frames.append(_Frame(self._pending, now, partial=True))
            self._pending = ""
        self.transport_error = error
        self.elapsed_ms = now

    def _split(self, text: str, at: float) -> None:
        """Cut complete envelopes: SSE blocks up to their blank line, or JSON lines."""
        buffer = self._pending + text
        start = 0
        for line in _LINE.finditer(buffer):
            end = line.end()
            if line.group(1) == "\r" and end == len(buffer):
                break  # a CR at the very end may be the first half of a CRLF
            if self.jsonl or line.start(1) == line.start():  # a line, or a blank line
                self._frames.append(_Frame(buffer[start:end], at))
                start = end
        self._pending = buffer[start:]

    # -----------------------------------------------------------------------------------------

    async def session(self, run_input: Any = None) -> bytes:
        """The session file (UTF-8 JSON, two-space indented), once the exchange has ended.

        ``run_input`` is the runs' input (by default the request body, when it is JSON).
        """
        from ._defaults import DefaultStages
        from ._lint import Lint
        from ._pipeline import wrap
        from ._verify import Verify

        exchange_id = "exchange-1"
        frames: list[dict[str, Any]] = []
        data_frames: list[dict[str, Any]] = []  # event index -> frame
        for n, raw in enumerate(self._frames):
            frame = self._frame(raw, n, exchange_id)
            frames.append(frame)
            if frame["classification"] == "data":
                data_frames.append(frame)

        reports: list[Report] = []
        stages = DefaultStages(verify=Verify(report_unfinished=True))
        if self.response_body is None and self._bytes:
            try:
                async with wrap(
                    b"".join(self._bytes),
                    *stages,
                    Lint(),
                    mode="keep_going",
                    on_report=reports.append,
                    format="jsonl" if self.jsonl else "sse",
                ) as stream:
                    await stream.drain()
            except DataError as exc:
                reports.append(exc.to_report())

        body_json: Any = None
        with contextlib.suppress(msgspec.DecodeError):
            body_json = _decode(self.request_body)
        runs = self._runs(stages.ledger.runs, data_frames, exchange_id, run_input or body_json)
        exchange: dict[str, Any] = {
            "id": exchange_id,
            "kind": "conversation",
            "method": self.method,
            "path": self.path,
            "requestBody": self.request_body,
        }
        if body_json is not None:
            exchange["requestBodyJson"] = body_json
        if self.status is not None:
            exchange["status"] = self.status
        if self.response_body is not None:
            exchange["responseBody"] = self.response_body
        exchange["startedAt"] = round(self.started_at, 3)
        if self.elapsed_ms is not None:
            exchange["elapsedMs"] = self.elapsed_ms
        exchange["transport"] = "transport-error" if self.transport_error else "completed"
        if self.transport_error:
            exchange["transportError"] = self.transport_error
        exchange["frameIds"] = [f["id"] for f in frames]
        if self.transport_error:
            reports.append(
                Report(code="http.dropped", message=self.transport_error, severity="error")
            )
        findings = [
            _finding(n, report, data_frames, exchange_id) for n, report in enumerate(reports)
        ]
        document = {
            "version": FORMAT_VERSION,
            "session": {
                "id": f"agui-meta-{uuid.uuid4()}",
                "exchanges": [exchange],
                "runs": runs,
                "frames": frames,
                "findings": findings,
                "derived": [],
            },
        }
        return msgspec.json.format(_encode(document), indent=2) + b"\n"

    def _frame(self, raw: _Frame, index: int, exchange_id: str) -> dict[str, Any]:
        frame: dict[str, Any] = {
            "id": f"frame-{index}",
            "exchangeId": exchange_id,
            "index": index,
        }
        data: str | None = None
        if raw.partial:
            classification = "partial"
        elif self.jsonl:
            data = raw.envelope.rstrip("\r\n")
            classification = "data" if data.strip() else "control"
            if classification == "control":
                data = None
        else:
            lines = [
                line[5:].removeprefix(" ")
                for line in _BREAK.split(raw.envelope)
                if line.startswith("data:")
            ]
            classification = "data" if lines else "control"
            data = "\n".join(lines) if lines else None
        frame["classification"] = classification
        frame["envelope"] = raw.envelope
        if data is not None:
            frame["data"] = data
        frame["offsetMs"] = raw.offset_ms
        summary, json_verdict, schema_verdict, parsed, kind = _judge(data, classification)
        if kind is not None:
            frame["eventType"] = kind
        frame["summary"] = summary
        frame["jsonVerdict"] = json_verdict
        frame["schemaVerdict"] = schema_verdict
        if parsed is not _NOTHING:
            frame["parsed"] = parsed
        frame["provenance"] = "raw"
        return frame

    def _runs(
        self,
        records: Sequence[Any],
        data_frames: list[dict[str, Any]],
        exchange_id: str,
        run_input: Any,
    ) -> list[dict[str, Any]]:
        def at(index: int | None) -> float | None:
            if index is None or not 0 <= index < len(data_frames):
                return None
            offset: float = data_frames[index]["offsetMs"]
            return round(self.started_at + offset, 3)

        runs: list[dict[str, Any]] = []
        for record in records:
            if record.run_id is None or record.thread_id is None:
                continue
            run: dict[str, Any] = {
                "id": f"run-{len(runs) + 1}",
                "threadId": record.thread_id,
                "runId": record.run_id,
            }
            if record.parent_run_id is not None:
                run["parentRunId"] = record.parent_run_id
            run["input"] = run_input if isinstance(run_input, dict) else {}
            run["exchangeId"] = exchange_id
            started = at(record.started_index)
            run["startedAt"] = started if started is not None else round(self.started_at, 3)
            ended = at(
                record.finished_index if record.finished_index is not None else record.error_index
            )
            if ended is not None:
                run["endedAt"] = max(ended, run["startedAt"])
            run["outcome"] = _outcome(record)
            runs.append(run)
        return runs


def unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` says the endpoint cannot be reached at all (nothing was exchanged)."""
    import httpx

    return isinstance(
        exc,
        (httpx.ConnectError, httpx.ConnectTimeout, httpx.UnsupportedProtocol, httpx.InvalidURL),
    )


async def record_exchange(
    client: httpx.AsyncClient,
    url: str,
    body: bytes,
    headers: Mapping[str, str],
    *,
    recording: InspectorRecording | None = None,
    on_chunk: Callable[[bytes], object] | None = None,
) -> None:
    """POST ``body`` to ``url``; the response body's chunks go to ``recording`` and to
    ``on_chunk`` as they arrive, unchanged. The recording is ended when this returns or raises,
    except when the endpoint could not be reached at all (nothing was exchanged).

    :raises HttpStatusError: the status is not 2xx (a redirect is not followed: its body is
        not the run); the first :data:`ERROR_BODY` bytes of the body are recorded.
    :raises httpx.HTTPError: the transport failed (recorded as the exchange's transport error
        once something was exchanged).
    """
    import httpx

    try:
        async with client.stream("POST", url, content=body, headers=headers) as response:
            if recording is not None:
                recording.response(response.status_code, response.headers.get("content-type", ""))
            if not response.is_success:
                preview = b""
                async with contextlib.aclosing(aiter_body(response)) as chunks:
                    async for chunk in chunks:
                        preview += chunk[: ERROR_BODY - len(preview)]
                        if len(preview) >= ERROR_BODY:
                            break
                if recording is not None:
                    recording.error_body(preview)
                    recording.end()
                raise HttpStatusError(
                    response.status_code, preview, url, response.headers.get("location")
                )
            async with contextlib.aclosing(aiter_body(response)) as chunks:
                async for chunk in chunks:
                    if recording is not None:
                        recording.feed(chunk)
                    if on_chunk is not None:
                        on_chunk(chunk)
    except httpx.HTTPError as exc:
        if recording is not None and not unreachable(exc):
            recording.end(error=f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
        raise
    if recording is not None:
        recording.end()


class _Nothing:
    pass


_NOTHING: Final = _Nothing()


def _judge(data: str | None, classification: str) -> tuple[str, str, str, Any, str | None]:
    """(summary, jsonVerdict, schemaVerdict, parsed, eventType) of a frame's data."""
    if classification != "data" or data is None:
        what = "an unterminated tail" if classification == "partial" else "no data (control)"
        return what, "not-applicable", "not-applicable", _NOTHING, None
    try:
        parsed = _decode(data)
    except msgspec.DecodeError as exc:
        return f"not JSON: {exc}", "invalid", "not-applicable", _NOTHING, None
    kind = parsed.get("type") if isinstance(parsed, dict) else None
    kind = kind if isinstance(kind, str) else None
    if kind is not None and kind not in EVENT_TYPES:
        return f"unknown event type {kind}", "valid", "unknown-type", parsed, kind
    try:
        decoded = decode_event(data.encode("utf-8", "surrogatepass"))
    except DataError as exc:
        return f"{kind or 'event'}: {exc}", "valid", "invalid", parsed, kind
    except Exception as exc:  # noqa: BLE001 - a verdict, whatever the decoder says
        return f"{kind or 'event'}: {type(exc).__name__}", "valid", "invalid", parsed, kind
    if decoded is None:
        return f"unknown event type {kind}", "valid", "unknown-type", parsed, kind
    return str(kind), "valid", "valid", parsed, kind


def _outcome(record: Any) -> dict[str, Any]:
    if record.status == "error":
        outcome: dict[str, Any] = {"kind": "error", "message": record.error_message or ""}
        if record.error_code is not None:
            outcome["code"] = record.error_code
        return outcome
    result = record.outcome
    if result is None:
        return {"kind": "unknown"}
    if result.type == "interrupt":
        return {"kind": "interrupt", "interrupts": _json(result.interrupts)}
    if result.type == "cancelled":
        return {"kind": "cancelled"}
    outcome = {"kind": "success", "pendingToolCallIds": list(result.pending_tool_call_ids)}
    if result.result is not None:
        outcome["result"] = _json(result.result)
    return outcome


def _finding(
    n: int, report: Report, data_frames: list[dict[str, Any]], exchange_id: str
) -> dict[str, Any]:
    code = report.code
    if code.startswith("http."):
        kind = "transport"
    elif code in ("stream-ended-open", "stream-ended-empty"):
        kind = "terminal"
    elif code == "DecodeError" and "invalid JSON" in report.message:
        kind = "json"
    elif code in ("DecodeError", "FramingError", "MetadataError", "unknown-event-type"):
        kind = "schema"
    else:
        kind = "sequence"
    index = report.index
    if index is not None and 0 <= index < len(data_frames):
        subject = {"type": "frame", "id": data_frames[index]["id"]}
    else:
        subject = {"type": "exchange", "id": exchange_id}
    return {
        "id": f"finding-{n}",
        "kind": kind,
        "message": f"{report.severity}: [{code}] {report.message}",
        "subject": subject,
    }
