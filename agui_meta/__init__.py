"""agui-meta: consume AG-UI 1.0 event streams, with every item's metadata merged to the letter."""

from __future__ import annotations

from ._chunks import ExpandChunks as ExpandChunks
from ._chunks import expand_chunks as expand_chunks
