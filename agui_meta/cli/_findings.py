"""The findings of ``validate`` as JSON, SARIF 2.1.0 and JUnit XML, for machines and CI.

A :class:`FileFindings` holds what one input gave: the findings kept (the first
``--max-errors``), how many more there were, the counts by severity and the number of events;
or the reason the input could not be read. The writers turn a list of them into one document.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from typing import Any

import msgspec

from .._exceptions import Report
from .._lint import RULES as _HYGIENE
from .._validate import TRANSPORT_RULES
from ._render import escape_controls

__all__ = ["FileFindings", "finding_json", "json_document", "junit_document", "sarif_document"]

RULES = {**_HYGIENE, **TRANSPORT_RULES}
_SARIF_LEVELS = {"error": "error", "warning": "warning", "info": "note"}
_SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_encode = msgspec.json.Encoder().encode


class FileFindings:
    """What ``validate`` found in one input."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.findings: list[tuple[Report, str]] = []  # (report, severity after --rule)
        self.counts = {"error": 0, "warning": 0, "info": 0}
        self.hidden = 0
        self.events = 0
        #: Why the input could not be read (exit status 2), else ``None``.
        self.unreadable: str | None = None

    def failed(self, strict: bool) -> bool:
        return bool(self.counts["error"] or (strict and self.counts["warning"]))


def finding_json(report: Report, severity: str) -> dict[str, Any]:
    """One finding as a JSON object (absent places left out)."""
    out: dict[str, Any] = {"code": report.code, "severity": severity, "message": report.message}
    for key, value in (
        ("index", report.index),
        ("line", report.line),
        ("offset", report.offset),
        ("path", report.path),
        ("eventType", report.event_type),
    ):
        if value is not None:
            out[key] = value
    return out


def json_document(files: Sequence[FileFindings], strict: bool) -> bytes:
    """``{"files": [...], "errors", "warnings", "infos", "valid"}``, one object per input."""
    out: list[dict[str, Any]] = []
    for found in files:
        entry: dict[str, Any] = {"file": found.file}
        if found.unreadable is not None:
            entry["unreadable"] = found.unreadable
        else:
            entry.update(
                valid=not found.failed(strict),
                events=found.events,
                errors=found.counts["error"],
                warnings=found.counts["warning"],
                infos=found.counts["info"],
                findings=[finding_json(r, s) for r, s in found.findings],
                notShown=found.hidden,
            )
        out.append(entry)
    document = {
        "files": out,
        "errors": sum(f.counts["error"] for f in files),
        "warnings": sum(f.counts["warning"] for f in files),
        "infos": sum(f.counts["info"] for f in files),
        "valid": not any(f.failed(strict) or f.unreadable is not None for f in files),
    }
    return _encode(document) + b"\n"


def sarif_document(files: Sequence[FileFindings], version: str) -> bytes:
    """One SARIF 2.1.0 run: agui-meta's rules met, and one result per finding kept."""
    rules: dict[str, dict[str, Any]] = {}
    results: list[dict[str, Any]] = []
    for found in files:
        for report, severity in found.findings:
            if report.code not in rules:
                known = RULES.get(report.code)
                rules[report.code] = {
                    "id": report.code,
                    "shortDescription": {
                        "text": known.summary if known else _first_sentence(report.message)
                    },
                    "defaultConfiguration": {
                        "level": _SARIF_LEVELS[known.severity if known else report.severity]
                    },
                }
            region: dict[str, Any] = {}
            if report.line is not None:
                region["startLine"] = report.line
            if report.offset is not None:
                region["byteOffset"] = report.offset
            location: dict[str, Any] = {"artifactLocation": {"uri": found.file}}
            if region:
                location["region"] = region
            result: dict[str, Any] = {
                "ruleId": report.code,
                "level": _SARIF_LEVELS[severity],
                "message": {"text": report.message},
                "locations": [{"physicalLocation": location}],
            }
            if report.index is not None:
                result["properties"] = {"eventIndex": report.index}
            results.append(result)
    log = {
        "$schema": _SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "agui-meta",
                        "version": version,
                        "rules": list(rules.values()),
                    }
                },
                "artifacts": [{"location": {"uri": f.file}} for f in files],
                "results": results,
            }
        ],
    }
    return _encode(log) + b"\n"


def _first_sentence(message: str) -> str:
    return message.split(". ", 1)[0]


def _xml_text(text: str) -> str:
    """Text XML 1.0 can hold: controls shown as escapes, lone surrogates as ``\\udXXX``."""
    return escape_controls(text).encode("utf-8", "backslashreplace").decode("utf-8")


def _line(file: str, report: Report, severity: str) -> str:
    place = f"event {report.index}" if report.index is not None else "end of stream"
    if report.line is not None:
        place += f", line {report.line}"
    if report.offset is not None:
        place += f", byte {report.offset}"
    return _xml_text(f"{file}: {place}: {severity}: [{report.code}] {report.message}")


def junit_document(files: Sequence[FileFindings], strict: bool) -> bytes:
    """One test suite per input, one test case in it: failed when the input is not valid."""
    suites = ET.Element("testsuites", name="agui-meta validate")
    failures = errors = 0
    for found in files:
        name = _xml_text(found.file)
        suite = ET.SubElement(suites, "testsuite", name=name, tests="1")
        case = ET.SubElement(suite, "testcase", classname="agui-meta.validate", name=name)
        if found.unreadable is not None:
            errors += 1
            suite.set("errors", "1")
            suite.set("failures", "0")
            ET.SubElement(case, "error", message=_xml_text(found.unreadable))
            continue
        failed = found.failed(strict)
        suite.set("errors", "0")
        suite.set("failures", "1" if failed else "0")
        lines = [_line(found.file, r, s) for r, s in found.findings]
        if found.hidden:
            lines.append(f"{found.hidden} more findings not shown")
        if failed:
            failures += 1
            counts = found.counts
            failure = ET.SubElement(
                case,
                "failure",
                message=f"{counts['error']} errors, {counts['warning']} warnings",
                type="error" if counts["error"] else "warning",
            )
            failure.text = "\n".join(
                line for (r, s), line in zip(found.findings, lines, strict=False) if s != "info"
            )
        if lines:
            ET.SubElement(case, "system-out").text = "\n".join(lines)
    suites.set("tests", str(len(files)))
    suites.set("failures", str(failures))
    suites.set("errors", str(errors))
    body: bytes = ET.tostring(suites, encoding="utf-8", xml_declaration=True)
    return body + b"\n"
