"""Reports as Python warnings, for a context given no ``on_report``: repeats summed up.

A stream can report the same problem once per event (a legacy producer's every delta), so a
warning per report would flood the user and, each text being different, grow the warnings
registry without bound (300,000 reports cost 131 MB). :class:`ReportWarnings` issues instead,
per context (one stream):

- the first report of each code, in full, as an :class:`~agui_meta.AguiWarning`;
- then, for a code reported again, one line when its count reaches 10, 100, 1,000 …
  (``[code] 100 reports of this kind so far in this stream ...``), so an endless stream still
  says what goes on;
- and when the stream ends (:meth:`finish`, called by the pipeline and the other drivers), one
  line per code with repeats not yet counted out: how many in all, and at which events.

Memory is bounded by the number of distinct codes (at most :data:`MAX_CODES` are told apart;
reports of further codes are counted together). Warnings are issued with
:func:`warnings.warn_explicit` and no registry, so nothing accumulates in a module's
``__warningregistry__``; they point at the caller's code: the innermost frame outside
agui-meta, or, when there is none (the prefetch task runs on its own), the line that created
the pipeline.
"""

from __future__ import annotations

import sys
import warnings
from types import FrameType
from typing import Any

from ._exceptions import AguiWarning, Report

__all__ = ["MAX_CODES", "ReportWarnings"]

#: Distinct report codes told apart per stream; reports of further codes are counted together.
MAX_CODES = 256
_OTHER = "(other codes)"

#: Modules whose frames are not the caller's (skipped, or, for event loops, no caller at all).
_OURS = ("agui_meta", "contextlib")
_LOOPS = ("asyncio", "anyio", "trio", "outcome", "sniffio", "threading", "concurrent")


def _top(frame: FrameType) -> str:
    return str(frame.f_globals.get("__name__", "")).partition(".")[0]


def _caller(frame: FrameType | None) -> FrameType | None:
    """The innermost frame outside agui-meta, or ``None`` when only an event loop is left."""
    while frame is not None and _top(frame) in _OURS:
        frame = frame.f_back
    if frame is None or _top(frame) in _LOOPS:
        return None
    return frame


def _where(frame: FrameType | None) -> tuple[str, int, str]:
    """Where a warning points: the file, line and module of ``frame`` (``sys``'s for None).

    A tuple of strings and a number, which the collector stops tracking at its first pass: a
    handler keeps one for as long as its stream lasts, in a process that may run thousands.
    """
    if frame is None:
        return ("sys", 1, "sys")
    return (frame.f_code.co_filename, frame.f_lineno, str(frame.f_globals.get("__name__", "sys")))


class ReportWarnings:
    """A report handler issuing :class:`~agui_meta.AguiWarning` warnings, repeats summed up.

    >>> import warnings, agui_meta
    >>> handler = ReportWarnings()
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     for index in range(3):
    ...         handler(agui_meta.Report(code="legacy", message="an old shape", index=index))
    ...     handler.finish()
    >>> [str(w.message) for w in caught]  # doctest: +NORMALIZE_WHITESPACE
    ['[legacy] an old shape (event 0)',
     '[legacy] 3 reports of this kind in this stream, events 0 to 2 (the first is shown above;
     pass on_report= to receive each)']
    """

    __slots__ = ("_counts", "_origin")

    def __init__(self, *, origin: bool = True) -> None:
        #: code -> [count, first index, last index, count last told]
        self._counts: dict[str, list[Any]] = {}
        # Where a warning points when no caller's frame is left (an event loop's task runs
        # the stream): the code that made this handler, a walk of the frames. ``origin=False``
        # skips the walk, for a handler whose reports come from its caller's code (a stage
        # fed outside any chain): it would point at ``sys`` then.
        self._origin = _where(_caller(sys._getframe(1)) if origin else None)

    def __call__(self, report: Report) -> None:
        code = report.code
        entry = self._counts.get(code)
        if entry is None:
            if len(self._counts) >= MAX_CODES:
                code = _OTHER
                entry = self._counts.get(code)
            if entry is None:
                self._counts[code] = [1, report.index, report.index, 1]
                self._issue(str(report) if code != _OTHER else _other(report))
                return
        entry[0] += 1
        entry[2] = report.index
        count = entry[0]
        if count >= 10 and _power_of_ten(count):
            entry[3] = count
            self._issue(
                f"[{code}] {count} reports of this kind so far in this stream "
                "(the first is shown above; pass on_report= to receive each)"
            )

    def finish(self) -> None:
        """The stream ended: sum up each code reported more often than already told."""
        counts, self._counts = self._counts, {}
        for code, (count, first, last, told) in counts.items():
            if count > told:
                events = f", events {first} to {last}" if first is not None else ""
                self._issue(
                    f"[{code}] {count} reports of this kind in this stream{events} "
                    "(the first is shown above; pass on_report= to receive each)"
                )

    def _issue(self, text: str) -> None:
        frame = _caller(sys._getframe(2))
        if frame is not None:
            filename, lineno, module = _where(frame)
            module_globals: dict[str, Any] | None = frame.f_globals
        else:  # the origin's module, as loaded (its globals give the warning its source line)
            filename, lineno, module = self._origin
            loaded = sys.modules.get(module) if module != "sys" else None
            module_globals = getattr(loaded, "__dict__", None)
        warnings.warn_explicit(
            text,
            AguiWarning,
            filename,
            lineno,
            module=module,
            registry=None,
            module_globals=module_globals,
        )


def _other(report: Report) -> str:
    return f"{report} (more than {MAX_CODES} codes in this stream: the rest are counted together)"


def _power_of_ten(n: int) -> bool:
    while n % 10 == 0:
        n //= 10
    return n == 1
