"""The root of the harness's own exceptions.

Every error :mod:`conformance` raises on purpose derives from :class:`ConformanceError`, so a
caller can catch the harness's errors in one clause and let anything else (a bug) through.
The subclasses live next to the code that raises them; ``docs/contracts.md`` ("Errors") draws
the whole tree. Those that predate the root also keep ``ValueError`` or ``RuntimeError`` as a
base, so existing ``except ValueError`` clauses still catch them.

The reference agent (``conformance.reference``) does not know the harness exists and keeps its
own root, ``CoreError``.
"""

from __future__ import annotations

__all__ = ["ConformanceError"]


class ConformanceError(Exception):
    """Root of every error raised by :mod:`conformance` on purpose."""
