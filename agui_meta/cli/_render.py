"""Text output of the command line: the conversation, the run ledger and the reports, for people.

Everything here turns finished results (a store, ledger records, reports) into lines of text;
nothing reads input or runs a pipeline. Colour is ANSI SGR, applied by :class:`Style` only
when asked to (the command decides: a terminal, ``NO_COLOR``, ``--color``).

Text from the stream (ids, names, content, arguments, results, report messages) can hold
control characters: a recorded ``ESC[2J`` would clear the screen. When the output goes to a
terminal or is coloured, :meth:`Style.text` shows each as an escape (``\x1b``, ``\u202e``):
C0 controls but the tab, DEL, C1 controls, and the bidirectional overrides and isolates.
Written to a file or a pipe without colour, text is left as it is.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import msgspec
from msgspec import UNSET

from .._exceptions import Report
from .._ledger import RunCancelled, RunInterrupted, RunRecord, RunSuccess
from .._store import ItemStore, MessageItem, ToolCallItem

__all__ = [
    "ReportGroups",
    "Style",
    "compact_json",
    "escape_controls",
    "format_report",
    "json_for_terminal",
    "metadata_text",
    "pretty_json",
    "render_ledger",
    "render_transcript",
    "usage_text",
    "where",
]

_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder().decode

#: Longest metadata line (characters, inside the braces), and longest value in it.
METADATA_WIDTH = 300
VALUE_WIDTH = 80
#: Longest pretty-printed JSON block (lines) for tool arguments, results and state.
JSON_LINES = 40
#: Longest one-line JSON (activity content).
ACTIVITY_WIDTH = 300

_ROLE_COLOURS = {
    "user": "1;36",
    "assistant": "1;32",
    "tool": "1;33",
    "reasoning": "1;35",
    "activity": "1;34",
}
_SEVERITY_COLOURS = {"error": "1;31", "warning": "33", "info": "36"}


#: What :func:`escape_controls` escapes: C0 but the tab, DEL, C1, bidirectional controls.
_CONTROLS = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape_controls(text: str) -> str:
    r"""``text`` with its control characters shown as escapes, safe to write to a terminal.

    >>> print(escape_controls("\x1b[2J\x1b[Hhi\nthere\u202e"))
    \x1b[2J\x1b[Hhi\x0athere\u202e
    """
    return _CONTROLS.sub(_escape, text)


#: What JSON leaves as it is in a string but a terminal may act on: DEL, C1, bidi controls.
_JSON_CONTROLS = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _json_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def json_for_terminal(data: bytes) -> bytes:
    r"""JSON (UTF-8) with the characters a terminal may act on written as ``\uXXXX`` escapes.

    The same JSON value (they can only stand inside strings, where an escape means the same
    character); C0 controls and ESC are escaped by every JSON encoder already.

    >>> json_for_terminal('["\u202eevil\u009b"]'.encode())
    b'["\\u202eevil\\u009b"]'
    """
    text = data.decode("utf-8")
    return (
        _JSON_CONTROLS.sub(_json_escape, text).encode("utf-8")
        if _JSON_CONTROLS.search(text)
        else data
    )


class Style:
    """ANSI colours, or none; and whether text from the stream is escaped (:meth:`text`).

    Every colouring method returns its text unchanged when ``color`` is false. ``escape``
    (default: ``color``) is true when the output goes to a terminal or is coloured.
    """

    __slots__ = ("color", "escape")

    def __init__(self, color: bool, escape: bool | None = None) -> None:
        self.color = color
        self.escape = color if escape is None else escape

    def text(self, text: object) -> str:
        """Text from the stream, control characters escaped when :attr:`escape` is set."""
        shown = text if isinstance(text, str) else str(text)
        return escape_controls(shown) if self.escape else shown

    def lines(self, lines: Iterable[str]) -> list[str]:
        """:meth:`text` for each line."""
        return [self.text(line) for line in lines]

    def paint(self, sgr: str, text: str) -> str:
        return f"\x1b[{sgr}m{text}\x1b[0m" if self.color and text else text

    def bold(self, text: str) -> str:
        return self.paint("1", text)

    def dim(self, text: str) -> str:
        return self.paint("2", text)

    def role(self, role: str, text: str) -> str:
        return self.paint(_ROLE_COLOURS.get(role, "1"), text)

    def severity(self, severity: str, text: str) -> str:
        return self.paint(_SEVERITY_COLOURS.get(severity, "1"), text)


# ---------------------------------------------------------------------------------------------
# JSON for people


#: Width that pretty-printed JSON tries to stay within.
JSON_WIDTH = 88
#: Values whose compact JSON is longer than this are indented by msgspec, not fitted.
_FIT_LIMIT = 100_000


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


def _one_line(value: Any) -> str:
    """JSON on one line, with a space after ``,`` and ``:`` (UTF-8 kept, integers exact)."""
    if isinstance(value, dict):
        items = ", ".join(f"{_encode(str(k)).decode()}: {_one_line(v)}" for k, v in value.items())
        return "{" + items + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_one_line(v) for v in value) + "]"
    return _encode(value).decode()


def compact_json(value: Any, width: int | None = None) -> str:
    """One-line JSON, cut to ``width`` characters with ``…``."""
    text = _one_line(value)
    return text if width is None else _cut(text, width)


def metadata_text(metadata: Mapping[str, Any], width: int = METADATA_WIDTH) -> str:
    """A metadata object on one line: ``{"key": value, ...}``.

    Each value is cut to :data:`VALUE_WIDTH` characters; keys that do not fit in ``width`` are
    counted (``… +3 more``) rather than shown.
    """
    parts: list[str] = []
    used = 0
    for n, (key, value) in enumerate(metadata.items()):
        part = f"{compact_json(key, VALUE_WIDTH)}: {compact_json(value, VALUE_WIDTH)}"
        if parts and used + len(part) > width:
            parts.append(f"… +{len(metadata) - n} more")
            break
        parts.append(part)
        used += len(part) + 2
    return "{" + ", ".join(parts) + "}"


def _fit(value: Any, indent: int, width: int, lead: int = 0) -> list[str]:
    """``value`` on one line if it fits in ``width``, else one member a line, recursively.

    ``indent`` is the column of the lines this block starts; ``lead`` the number of characters
    that share its line (a key before it, a comma after it).
    """
    one = _one_line(value)
    if indent + lead + len(one) <= width or not isinstance(value, (dict, list)) or not value:
        return [one]
    inner = indent + 2
    lines = ["{" if isinstance(value, dict) else "["]
    members = list(value.items()) if isinstance(value, dict) else [(None, v) for v in value]
    for n, (key, member) in enumerate(members):
        prefix = "" if key is None else f"{_encode(str(key)).decode()}: "
        comma = "," if n < len(members) - 1 else ""
        sub = _fit(member, inner, width, len(prefix) + len(comma))
        sub[0] = prefix + sub[0]
        sub[-1] += comma
        lines.extend("  " + line for line in sub)
    lines.append("}" if isinstance(value, dict) else "]")
    return lines


def pretty_json(value: Any, max_lines: int = JSON_LINES, width: int = JSON_WIDTH) -> list[str]:
    """Indented JSON lines: containers that fit in ``width`` stay on one line.

    At most ``max_lines`` lines (then a line saying how many were left out).
    """
    encoded = _encode(value)
    if len(encoded) > _FIT_LIMIT:
        lines = msgspec.json.format(encoded, indent=2).decode().splitlines()
    else:
        lines = _fit(value, 0, width)
    if len(lines) > max_lines:
        left = len(lines) - max_lines + 1
        lines = [*lines[: max_lines - 1], f"… ({left} more lines)"]
    return lines


def _json_or_text(text: Any) -> list[str]:
    """A string holding a JSON object or array, pretty-printed; any other string as it is."""
    if isinstance(text, str):
        stripped = text.lstrip()
        if stripped[:1] in ("{", "["):
            try:
                return pretty_json(_decode(text))
            except msgspec.DecodeError:
                pass
        return text.splitlines() or [""]
    return pretty_json(text)


# ---------------------------------------------------------------------------------------------
# The conversation


def indent_lines(lines: Iterable[str], by: str) -> Iterator[str]:
    for line in lines:
        yield by + line if line else line


def content_lines(item: MessageItem, style: Style) -> list[str]:
    content = item.content
    if content is None:
        return []
    if item.role == "activity":
        return [style.text(compact_json(content, ACTIVITY_WIDTH))]
    if item.role == "tool":
        return style.lines(_json_or_text(content))
    if isinstance(content, str):
        lines = style.lines(content.splitlines() or [""])
        if item.role == "reasoning":
            return [style.dim(line) for line in lines]
        return lines
    if isinstance(content, list):
        return style.lines(line for part in content for line in _part_lines(part))
    return [style.text(compact_json(content, ACTIVITY_WIDTH))]


def _part_lines(part: Any) -> list[str]:
    if not isinstance(part, dict):
        return [compact_json(part, VALUE_WIDTH)]
    if part.get("type") == "text":
        text = part.get("text")
        return str(text).splitlines() or [""] if isinstance(text, str) else [compact_json(text)]
    source = part.get("source")
    what = part.get("type", "part")
    if isinstance(source, dict):
        kind = source.get("type")
        value = source.get("value", "")
        shown = f"{len(value)} bytes of base64" if kind == "data" else _cut(str(value), VALUE_WIDTH)
        mime = source.get("mimeType")
        return [f"[{what}: {shown}{f', {mime}' if mime else ''}]"]
    return [f"[{what}]"]


def metadata_line(metadata: Any, style: Style) -> list[str]:
    if metadata is UNSET or metadata is None:
        return []
    if not isinstance(metadata, Mapping):  # a history may hold anything
        return [style.dim("metadata: ") + style.text(compact_json(metadata, METADATA_WIDTH))]
    return [style.dim("metadata: ") + style.text(metadata_text(metadata))]


def message_header(item: MessageItem, store: ItemStore, style: Style) -> str:
    t = style.text
    role = t(item.role) if item.role is not None else "(no role)"
    parts = [style.role(role, role), style.dim(t(item.id))]
    if item.role == "activity" and item.activity_type is not None:
        parts.append(f"({t(item.activity_type)})")
    if item.name is not None:
        parts.append(f"name {t(item.name)}")
    if item.role == "tool" and item.tool_call_id is not None:
        call = store.tool_call(item.tool_call_id)
        name = f"{t(call.name)} " if call is not None and isinstance(call.name, str) else ""
        parts.append(f"result of {name}({t(item.tool_call_id)})")
    if item.subagent_run_id is not None:
        parts.append(style.dim(f"[subagent {t(item.subagent_run_id)}]"))
    return " ".join(parts)


def tool_call_lines(call: ToolCallItem, style: Style) -> Iterator[str]:
    name = style.text(call.name) if isinstance(call.name, str) else "(no name)"
    yield f"{style.bold('tool call')} {name} {style.dim(f'({style.text(call.id)})')}"
    arguments = call.arguments
    if arguments is not None and arguments != "":
        yield from indent_lines(style.lines(_json_or_text(arguments)), "  ")
    if call.encrypted_value is not None:
        yield "  " + style.dim(f"(encrypted value, {len(str(call.encrypted_value))} characters)")
    yield from indent_lines(metadata_line(call.metadata, style), "  ")


def render_transcript(store: ItemStore, style: Style) -> Iterator[str]:
    """The conversation in store order: each message with its tool calls and metadata."""
    for n, item in enumerate(store.messages()):
        if n:
            yield ""
        yield message_header(item, store, style)
        body = content_lines(item, style)
        error = item.fields.get("error")
        if error is not None:
            body.append(style.severity("error", f"error: {style.text(error)}"))
        if item.encrypted_value is not None:
            body.append(
                style.dim(f"(encrypted value, {len(str(item.encrypted_value))} characters)")
            )
        body.extend(metadata_line(item.metadata, style))
        for call in item.tool_calls or ():
            body.extend(tool_call_lines(call, style))
        yield from indent_lines(body, "  ")


# ---------------------------------------------------------------------------------------------
# The run ledger

#: Token counts as people read them, by their wire name, in this order (others follow as named).
_USAGE_NAMES = {
    "inputTokens": "input",
    "outputTokens": "output",
    "totalTokens": "total",
    "reasoningTokens": "reasoning",
    "cachedInputTokens": "cached input",
    "cacheWriteInputTokens": "cache write",
}


def usage_text(entry: Any) -> str:
    """``provider/model: input 3, output 5, …`` for one token usage entry.

    ``entry`` is a :class:`~agui_meta.events.TokenUsage` or the same in wire JSON (a dict, as
    stored threads and the workers' counters hold it): ``replay``, ``run``, ``thread`` and
    ``usage`` show usage alike. Absent counts are left out.
    """
    counts = entry if isinstance(entry, Mapping) else msgspec.to_builtins(entry)
    counts = {k: v for k, v in counts.items() if v is not None}
    label = "/".join(str(counts[k]) for k in ("provider", "model") if counts.get(k))
    named = [f"{name} {counts[key]}" for key, name in _USAGE_NAMES.items() if key in counts]
    named += [
        f"{key} {value}"
        for key, value in counts.items()
        if key not in _USAGE_NAMES and key not in ("provider", "model")
    ]
    return f"{label or '(unlabelled)'}: {', '.join(named) or 'no counts'}"


def _outcome_lines(record: RunRecord, style: Style) -> Iterator[str]:
    outcome = record.outcome
    t = style.text
    if isinstance(outcome, RunSuccess):
        if outcome.pending_tool_call_ids:
            yield t(f"pending tool calls: {', '.join(outcome.pending_tool_call_ids)}")
    elif isinstance(outcome, RunInterrupted):
        for interrupt in outcome.interrupts:
            text = f"interrupt {interrupt.id} ({interrupt.reason})"
            if interrupt.message is not UNSET:
                text += f": {interrupt.message}"
            yield t(text)
            yield from indent_lines(metadata_line(interrupt.metadata, style), "  ")
    if (
        isinstance(outcome, (RunSuccess, RunInterrupted, RunCancelled))
        and outcome.result is not None
    ):
        yield t(f"result: {compact_json(outcome.result, ACTIVITY_WIDTH)}")


def _run_header(record: RunRecord, style: Style) -> str:
    run_id = style.text(record.run_id) if record.run_id is not None else "(events outside a run)"
    parts = [style.bold(f"run {run_id}")]
    if record.thread_id is not None:
        parts.append(style.dim(f"thread {style.text(record.thread_id)}"))
    status = record.status
    colour = {"finished": "32", "error": "1;31", "incomplete": "33"}.get(status, "1")
    parts.append(style.paint(colour, status))
    if record.outcome is not None:
        parts.append(f"({record.outcome.type})")
    return " ".join(parts)


def render_ledger(
    runs: Iterable[RunRecord], style: Style, currency: str | None = None
) -> Iterator[str]:
    """Each run: ids, status, outcome, usage (summed per provider and model) and its cost
    (when priced, in ``currency``), run metadata."""
    for n, record in enumerate(runs):
        if n:
            yield ""
        yield _run_header(record, style)
        t = style.text
        body: list[str] = []
        if record.error_message is not None:
            code = f" ({t(record.error_code)})" if record.error_code is not None else ""
            body.append(style.severity("error", f"error: {t(record.error_message)}{code}"))
        body.extend(_outcome_lines(record, style))
        for entry in record.aggregated_usage:
            body.append(f"usage {t(usage_text(entry))}")
        if record.cost is not None and currency is not None:
            body.append(f"cost {record.cost:.6f} {t(currency)}")
        for label, metadata in (
            ("started", record.started_metadata),
            ("finished", record.finished_metadata),
            ("error", record.error_metadata),
        ):
            if metadata is not None:
                body.append(style.dim(f"{label} metadata: ") + t(metadata_text(metadata)))
        for step in record.steps:
            owner = f" [subagent {step.subagent_run_id}]" if step.subagent_run_id else ""
            body.append(t(f"step {step.name}{owner}: {step.status}"))
        for sub in record.subagents:
            name = f"{t(sub.name)} " if sub.name is not None else ""
            outcome = f" ({t(sub.outcome)})" if sub.outcome is not None else ""
            body.append(
                f"subagent {name}{style.dim(f'({t(sub.subagent_run_id)})')}: {sub.status}{outcome}"
            )
            for label, metadata in (
                ("started", sub.started_metadata),
                ("finished", sub.finished_metadata),
                ("error", sub.error_metadata),
            ):
                if metadata is not None:
                    body.append(
                        "  " + style.dim(f"{label} metadata: ") + t(metadata_text(metadata))
                    )
        for custom in record.custom_events:
            meta = f" {metadata_text(custom.metadata)}" if custom.metadata is not None else ""
            body.append(t(f"custom event {custom.name} (event {custom.index}){meta}"))
        if record.raw_events:
            body.append(f"raw events: {len(record.raw_events)}")
        yield from indent_lines(body, "  ")


# ---------------------------------------------------------------------------------------------
# Reports and errors


def where(file: str, report: Report) -> str:
    """``FILE:line:byte: event N`` with whichever parts are known."""
    head = file
    if report.line is not None:
        head += f":{report.line}"
        if report.offset is not None:
            head += f":{report.offset}"
    elif report.offset is not None:
        head += f": byte {report.offset}"
    return head if report.index is None else f"{head}: event {report.index}"


def format_report(file: str, report: Report, style: Style, severity: str | None = None) -> str:
    """``FILE:line:byte: event N: severity: [code] message (at $.path)``."""
    severity = severity or report.severity
    text = f"[{report.code}] {report.message}"
    if report.path is not None and f"`{report.path}`" not in report.message:
        text += f" (at {report.path})"
    return f"{style.text(where(file, report))}: {style.severity(severity, severity)}: {style.text(text)}"


def _last_at(report: Report) -> str:
    parts = []
    if report.index is not None:
        parts.append(f"event {report.index}")
    if report.line is not None:
        parts.append(f"line {report.line}")
    return f"; the last at {', '.join(parts)}" if parts else ""


class ReportGroups:
    """Reports as a person reads them: identical ones counted, not listed again and again.

    Reports with the same severity, code, message and path (a warning repeated for every event
    that carries the same field) are one group, shown once, where it first came, with how many
    times it came. Every report is counted by severity. At most ``keep`` groups are kept (the
    rest are counted in :attr:`dropped`), so memory stays bounded on any stream.
    """

    def __init__(self, keep: int = 10_000) -> None:
        self.keep = keep
        #: (first report, times, last report), by first arrival.
        self.groups: dict[tuple[str, str, str, str | None], list[Any]] = {}
        self.dropped = 0
        self.counts: dict[str, int] = {"error": 0, "warning": 0, "info": 0}

    def add(self, report: Report) -> None:
        self.counts[report.severity] = self.counts.get(report.severity, 0) + 1
        key = (report.severity, report.code, report.message, report.path)
        group = self.groups.get(key)
        if group is not None:
            group[1] += 1
            group[2] = report
        elif len(self.groups) < self.keep:
            self.groups[key] = [report, 1, report]
        else:
            self.dropped += 1

    def __len__(self) -> int:
        return sum(self.counts.values())

    def lines(self, file: str, style: Style, limit: int = 0) -> Iterator[str]:
        """Each group's first report, with ``(N times in all, the last at …)`` when repeated;
        at most ``limit`` groups (``0``: all), then a line counting the reports not shown."""
        shown = 0
        hidden = self.dropped
        for first, times, last in self.groups.values():
            if limit and shown >= limit:
                hidden += times
                continue
            shown += 1
            yield format_report(file, first, style)
            if times > 1:
                yield style.dim(f"  ({times} times in all{_last_at(last)})")
        if hidden:
            yield style.dim(
                f"{style.text(file)}: {hidden} more {'report' if hidden == 1 else 'reports'} "
                f"not shown (--max-errors {limit}; 0 shows all)"
            )
