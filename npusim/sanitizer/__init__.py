"""The schedule sanitizer: missing synchronisation, races and bad accesses in any kernel (docs/sanitizer.md).

``npusim.launch(..., sanitize=True)`` (and ``sanitize=True`` on every operator) runs the kernel with a
:class:`Sanitizer` attached; the result's ``.sanitizer`` is a :class:`SanitizerReport` (``.df``,
``.summary()``). Happens-before comes from the synchronisation the kernel issued (clocks.py), never from
simulated time, so a race that the timing model happens to hide is still found.
"""
from npusim.sanitizer.checker import Sanitizer
from npusim.sanitizer.report import COLUMNS, FAULTS, SanitizerReport
from npusim.sanitizer.session import Session

__all__ = ["COLUMNS", "FAULTS", "Sanitizer", "SanitizerReport", "Session", "ambient", "sanitizing", "unsanitized"]

import contextlib
import contextvars
import functools

_AMBIENT: contextvars.ContextVar = contextvars.ContextVar("npusim_sanitize", default=None)


@contextlib.contextmanager
def sanitizing():
    """Sanitize every launch in the block (an operator's launches, whatever module makes them); yields
    one SanitizerReport that collects them all. The block is one :class:`Session`: its launches run in
    order on one stream, so GM workspace bytes an earlier launch wrote count as written (session.py)."""
    session = Session()
    token = _AMBIENT.set(session)
    try:
        yield session.report
    finally:
        _AMBIENT.reset(token)


def ambient():
    """The :class:`Session` of the enclosing :func:`sanitizing` block, or None."""
    return _AMBIENT.get()


def unsanitized(fn):
    """Decorator: launches inside *fn* ignore an enclosing :func:`sanitizing` block. For estimate mode,
    whose sample launches are partial slices of a launch (some replicated over cores), not a kernel run."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        token = _AMBIENT.set(None)
        try:
            return fn(*args, **kwargs)
        finally:
            _AMBIENT.reset(token)

    return wrapper
