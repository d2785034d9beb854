"""The conversation shown live, event by event, as ``replay`` shows it at the end.

:class:`LiveView` is a transducer placed after the accumulator: text and reasoning deltas are
written as they arrive under their message's header; a tool call, a tool result, an activity
and a message that did not stream are written, as ``replay`` renders them, when they
complete; run starts and ends get a dimmed line. The state, the ledger and the reports are for
the command to print at the end.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TextIO

from msgspec import UNSET

from .._accumulate import Update
from .._stage import Transducer
from .._store import ItemStore, MessageItem, ToolCallItem
from ._render import (
    Style,
    compact_json,
    content_lines,
    indent_lines,
    message_header,
    metadata_line,
    tool_call_lines,
)

__all__ = ["LiveView"]

_STREAMED = frozenset({"TEXT_MESSAGE_CONTENT", "REASONING_MESSAGE_CONTENT"})
_ENDS = frozenset({"TEXT_MESSAGE_END", "REASONING_MESSAGE_END"})


class _Calls:
    """What the renderers look up in a store (a tool result's call): the calls seen so far,
    then the store's."""

    def __init__(self, store: ItemStore | None) -> None:
        self.store = store
        self.seen: dict[Any, ToolCallItem] = {}

    def tool_call(self, tool_call_id: str) -> ToolCallItem | None:
        call = self.seen.get(tool_call_id)
        if call is None and self.store is not None:
            call = self.store.tool_call(tool_call_id)
        return call


class LiveView(Transducer[Update, Update]):
    """Writes each update to ``out`` as the conversation grows (see the module docstring)."""

    def __init__(self, out: TextIO, style: Style, store: ItemStore | None = None) -> None:
        self.out = out
        self.style = style
        self._lookup: Any = _Calls(store)  # the part of a store message_header reads
        self._open: Any = None  # the id of the message whose text is being written
        self._blocks = 0
        self._shown: set[Any] = set()  # ids of the messages written

    def _text(self, text: str) -> str:
        """Text from the stream as :meth:`Style.text` shows it, its line ends kept."""
        return "\n".join(self.style.text(line) for line in text.split("\n"))

    def _head(self, item: MessageItem) -> str:
        return message_header(item, self._lookup, self.style)

    def _write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()

    def _block(self, lines: list[str]) -> None:
        self._close()
        if self._blocks:
            lines = ["", *lines]
        self._blocks += 1
        self._write("\n".join(lines) + "\n")

    def _close(self) -> None:
        """End the line of the message being written (it may go on later, under a new header)."""
        if self._open is not None:
            self._open = None
            self._write("\n")

    def _message_lines(self, item: MessageItem) -> list[str]:
        self._shown.add(item.id)
        body = content_lines(item, self.style)
        body.extend(metadata_line(item.metadata, self.style))
        return [self._head(item), *indent_lines(body, "  ")]

    def history(self, items: Iterable[MessageItem]) -> None:
        """Write the messages the thread already holds (the run's input)."""
        for item in items:
            self._block(self._message_lines(item))

    def feed(self, update: Update) -> None:
        self.show(update)
        self.emit(update)

    def show(self, update: Update) -> None:
        """Write what ``update`` adds to the conversation."""
        event, item, style = update.event, update.item, self.style
        kind = event.type
        if kind in _STREAMED and isinstance(item, MessageItem):
            if self._open != item.id:
                self._shown.add(item.id)
                self._block([self._head(item)])
                self._write("  ")
                self._open = item.id
            delta = self._text(str(getattr(event, "delta", "")))
            if item.role == "reasoning":
                delta = style.dim(delta)
            self._write(delta.replace("\n", "\n  "))
        elif kind in _ENDS and isinstance(item, MessageItem):
            if self._open == item.id:
                self._close()
                if item.metadata is not None:
                    metadata = metadata_line(item.metadata, style)
                    self._write("\n".join(indent_lines(metadata, "  ")) + "\n")
            else:
                self._block(self._message_lines(item))
        elif update.done and isinstance(item, ToolCallItem):
            self._lookup.seen.setdefault(item.id, item)
            self._block(list(tool_call_lines(item, style)))
        elif (update.done and isinstance(item, MessageItem)) or kind.startswith("ACTIVITY_"):
            if isinstance(item, MessageItem):
                self._block(self._message_lines(item))
        elif kind == "RUN_STARTED":
            self._block([style.dim(f"run {self._text(str(event.run_id))} started")])  # type: ignore[attr-defined]
            run_input = getattr(event, "input", UNSET)
            if run_input is not UNSET:  # the messages the run was given, not shown before
                for message in run_input.messages:
                    if message.id not in self._shown:
                        self._block(self._message_lines(MessageItem.from_message(message)))
        elif kind == "RUN_FINISHED":
            outcome = getattr(event, "outcome", UNSET)
            how = "" if outcome is UNSET else f" ({type(outcome).__struct_config__.tag})"
            self._block([style.dim(f"run {self._text(str(event.run_id))} finished{how}")])  # type: ignore[attr-defined]
        elif kind == "RUN_ERROR":
            message = self._text(str(getattr(event, "message", "")))
            self._block([style.severity("error", f"run error: {message}")])
        elif kind == "MESSAGES_SNAPSHOT":
            count = len(getattr(event, "messages", ()))
            self._block([style.dim(f"messages snapshot: {count} messages")])
        elif kind == "STATE_SNAPSHOT":
            self._block([style.dim("state: " + self._text(compact_json(event.snapshot, 200)))])  # type: ignore[attr-defined]

    def close(self) -> None:
        self._close()
