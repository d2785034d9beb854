"""The optional C extension ``agui_meta._native`` (everything else is in pyproject.toml).

The extension is a speed-up only: the pure-Python implementation is complete and is its
specification. It is not built with ``AGUI_META_NO_EXTENSIONS=1``, on PyPy, or on a free-threaded
CPython; a failed compile (no C compiler) leaves the pure-Python package, with one line saying so.
"""

from __future__ import annotations

import os
import platform
import sys
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import CCompilerError, ExecError, PlatformError

#: What a missing or failing C compiler raises.
_BUILD_ERRORS = (CCompilerError, ExecError, PlatformError, OSError, ValueError)

_FALSE = frozenset({"", "0", "false", "no", "off"})


def _why_not() -> str | None:
    """Why the extension is not built here, or ``None`` when it is."""
    if os.environ.get("AGUI_META_NO_EXTENSIONS", "").strip().lower() not in _FALSE:
        return "AGUI_META_NO_EXTENSIONS is set"
    if platform.python_implementation() != "CPython":
        return f"{platform.python_implementation()} is not CPython"
    if sysconfig.get_config_var("Py_GIL_DISABLED"):
        return "a free-threaded CPython"
    return None


class _OptionalBuildExt(build_ext):
    """build_ext that reports a failed compile in one line and goes on without it."""

    def run(self) -> None:
        try:
            super().run()
        except _BUILD_ERRORS as exc:  # no compiler at all
            self._skip(exc)

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except _BUILD_ERRORS as exc:  # the compiler failed
            self._skip(exc)

    def _skip(self, exc: BaseException) -> None:
        print(
            f"agui-meta: the C extension was not built ({type(exc).__name__}: {exc}); "
            "the pure-Python implementation is used",
            file=sys.stderr,
        )


_REASON = _why_not()
if _REASON is None:
    _EXTENSIONS = [
        Extension(
            "agui_meta._native",
            ["agui_meta/_native.c"],
            depends=[
                "agui_meta/_scan.h",
                "agui_meta/_loop.h",
                "agui_meta/_frame.h",
                "agui_meta/_shape.h",
                "agui_meta/_steps.h",
                "agui_meta/_direct.h",
                "agui_meta/_ends.h",
                "agui_meta/_patch.h",
                "agui_meta/_starts.h",
                "agui_meta/_results.h",
                "agui_meta/_activity.h",
            ],
            optional=True,
            extra_compile_args=["-O2"] if os.name != "nt" else [],
        )
    ]
else:
    print(f"agui-meta: the C extension is not built ({_REASON})", file=sys.stderr)
    _EXTENSIONS = []

setup(ext_modules=_EXTENSIONS, cmdclass={"build_ext": _OptionalBuildExt})
