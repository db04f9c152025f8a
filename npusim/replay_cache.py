"""The size cap of the replay disk cache (npusim/replay_code.py CACHE_DIR): oldest entries pruned first.

Why: every new shape's generated replay steps add compiled modules to the cache (6 KB to 0.6 MB each; 65 MB
after one evening of FAG estimates), and nothing else ever removes them. The cap is
$NPUSIM_REPLAY_CACHE_MB megabytes (default :data:`DEFAULT_LIMIT_MB`; 0: no cap).

When: a process that stored entries checks the cache's size at its exit (``atexit``), and a long-lived one
also once it has stored a quarter of the cap; a check walks the cache only if no process has pruned it in the
last :data:`CHECK_EVERY_S` seconds (the mtime of a stamp file in the cache). Never during a replay: reading
an entry back costs only the ``os.utime`` that marks it used.

"Oldest": least recently stored or read back (the file's mtime, which :func:`used` renews). A prune deletes
entries until the cache holds at most :data:`PRUNE_TO` of the cap, so the next one is far off.

Several processes may share the cache: an entry is written to a temporary file and renamed (``_store``), so a
prune never sees half an entry; a reader whose entry was deleted under it finds it absent and compiles the
source again (an open file's bytes stay readable after an unlink); two prunes at once both skip files the
other deleted first. The cache's sub-directories are never removed (a writer may be creating a file in one).
"""
from __future__ import annotations

import atexit
import os
import time
import warnings

#: the cap when $NPUSIM_REPLAY_CACHE_MB is not set: some four evenings of new FAG shapes (65 MB one evening)
DEFAULT_LIMIT_MB = 256
#: a prune leaves at most this share of the cap, so that the next one waits for new entries
PRUNE_TO = 0.75
#: seconds between two size checks of one cache (by any process)
CHECK_EVERY_S = 600.0
STAMP = ".pruned"  # in the cache's root: its mtime is the last check's time

_written: dict = {}  # cache directory -> bytes this process stored there since its last check


def limit_bytes() -> int:
    """The cap in bytes from $NPUSIM_REPLAY_CACHE_MB (megabytes, a finite number >= 0; 0: no cap); a bad value warns and
    the default applies."""
    text = os.environ.get("NPUSIM_REPLAY_CACHE_MB", "")
    if text:
        try:
            mb = float(text)
            if 0 <= mb < float("inf"):
                return int(mb * 2 ** 20)
        except ValueError:
            pass
        warnings.warn(f"npusim: NPUSIM_REPLAY_CACHE_MB={text!r} is not a number of megabytes >= 0; "
                      f"the replay cache keeps its default cap of {DEFAULT_LIMIT_MB} MB", stacklevel=2)
    return DEFAULT_LIMIT_MB * 2 ** 20


def used(path) -> None:
    """Mark the entry at *path* as just used (its mtime), so that a prune keeps it over entries unused longer."""
    try:
        os.utime(path)
    except OSError:
        pass  # deleted meanwhile, or a read-only cache: it only ages


def stored(cache_dir: str, nbytes: int) -> None:
    """Note an entry of *nbytes* written to *cache_dir*: the first one registers this process's exit check; a
    process that has written a quarter of the cap since its last check checks now."""
    if cache_dir not in _written:
        _written[cache_dir] = 0
        atexit.register(check, cache_dir)
    _written[cache_dir] += nbytes
    limit = limit_bytes()
    if limit and _written[cache_dir] > limit // 4:
        check(cache_dir)


def check(cache_dir: str) -> int:
    """Prune *cache_dir* to the cap if no process checked it in the last CHECK_EVERY_S seconds; the bytes
    deleted."""
    _written[cache_dir] = 0
    limit = limit_bytes()
    if not limit:
        return 0
    stamp = os.path.join(cache_dir, STAMP)
    try:
        if time.time() - os.stat(stamp).st_mtime < CHECK_EVERY_S:
            return 0
    except OSError:
        pass  # never checked
    try:
        with open(stamp, "a"):
            pass
        os.utime(stamp)
    except OSError:
        return 0  # an unwritable cache holds nothing of ours
    return prune(cache_dir, limit)


def entries(cache_dir: str) -> list:
    """(mtime, size, path) of every file in *cache_dir*'s sub-directories (temporary files included)."""
    found = []
    try:
        subdirs = [d.path for d in os.scandir(cache_dir) if d.is_dir(follow_symlinks=False)]
    except OSError:
        return found
    for sub in subdirs:
        try:
            with os.scandir(sub) as it:
                for f in it:
                    try:
                        st = f.stat(follow_symlinks=False)
                    except OSError:
                        continue  # deleted by another process
                    found.append((st.st_mtime, st.st_size, f.path))
        except OSError:
            continue
    return found


def prune(cache_dir: str, limit: int) -> int:
    """Delete the oldest entries of *cache_dir* while it holds more than PRUNE_TO of *limit* bytes, if it holds
    more than *limit*; the bytes deleted (files another process deleted first are not counted)."""
    found = entries(cache_dir)
    total = sum(size for _, size, _ in found)
    if total <= limit:
        return 0
    target, freed = int(limit * PRUNE_TO), 0
    for _, size, path in sorted(found):
        if total <= target:
            break
        try:
            os.unlink(path)
            freed += size
        except OSError:
            pass  # gone already
        total -= size
    return freed
