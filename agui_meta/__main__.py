"""``python -m agui_meta``: the command line (see :mod:`agui_meta.cli`)."""

from __future__ import annotations

from .cli import main

__all__ = ["main"]

if __name__ == "__main__":
    raise SystemExit(main())
