"""A sanitizing session: the launches of one ``sanitizing()`` block, which run in order on one stream.

Why a session: an operator call is often several launches on one stream (FlashAttentionUnpaddingScoreGradV5:
a pre kernel zeroes the workspace, the main kernel adds into it, a post kernel reads it back). Stream order
is a happens-before edge: every access of a launch happens before every access of the next one. So

- no access can race with one of an earlier launch: the race shadow (shadow.py) stays per launch and is
  dropped at its end, which loses nothing;
- which bytes of GM scratch memory (the workspace) have been written does carry over: a read of bytes an
  earlier launch of the session wrote is not a read of uninitialised memory.

GM memory is identified by the host object behind the launch's GmBuffer: for a numpy array its data
address and size (views of the same bytes agree), for a data-less TensorSpec (timing mode) the object
itself. The session keeps each such object alive, so an address or id is never reused by a different
allocation while the session lasts: a workspace allocated afresh for a later call starts uninitialised.
"""
from __future__ import annotations

import numpy as np

from npusim.sanitizer.report import SanitizerReport
from npusim.sanitizer.shadow import InitMap


class Session:
    """Reports of every launch of a ``sanitizing()`` block, and the GM initialisation state they share."""

    def __init__(self):
        self.report = SanitizerReport()
        self._init: dict = {}  # memory key -> (InitMap, the host object kept alive)

    def extend(self, report: SanitizerReport) -> None:
        """A finished launch's reports (npusim.launch calls this)."""
        self.report.extend(report)

    def gm_init(self, host, nbytes: int) -> InitMap:
        """The written-blocks map of the GM memory behind *host* (a numpy array or TensorSpec), shared by the
        session's launches."""
        if isinstance(host, np.ndarray):
            key = ("array", host.__array_interface__["data"][0], int(host.nbytes))
        else:
            key = ("object", id(host), int(nbytes))
        entry = self._init.get(key)
        if entry is None:
            entry = self._init[key] = (InitMap(nbytes), host)
        return entry[0]
