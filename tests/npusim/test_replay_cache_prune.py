"""The size cap of the replay disk cache (npusim/replay_cache.py): a prune deletes the least recently used entries
first and keeps the newest, a read renews an entry, checks are throttled, a process prunes at its exit, and a
prune running in another process never breaks a read."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import npusim.replay_cache as replay_cache
import npusim.replay_code as replay_code

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def cache(monkeypatch, tmp_path):
    """An empty cache directory, no source compiled or looked for yet, no cap set, nothing written yet."""
    monkeypatch.setattr(replay_code, "CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(replay_code, "_CODE", {})
    monkeypatch.setattr(replay_code, "_MISSING", set())
    monkeypatch.setattr(replay_cache, "_written", {})
    monkeypatch.delenv("NPUSIM_REPLAY_CACHE_MB", raising=False)
    return tmp_path


def _source(i: int) -> str:
    """A module of some 10 KB of source whose function returns *i*."""
    return f"def _step():\n    x = {list(range(2000))!r}\n    return {i}\n"


def _entry(cache: Path, source: str) -> Path:
    import hashlib
    name = hashlib.sha256((sys.version + "\0" + source).encode()).hexdigest()
    return cache / name[:2] / name


def _fill(cache: Path, n: int) -> list:
    """Paths of *n* entries stored, entry i last used n - i hours ago (entry 0 the oldest)."""
    paths = []
    now = time.time()
    for i in range(n):
        replay_code._code_object(_source(i), new=True)
        path = _entry(cache, _source(i))
        os.utime(path, (now - 3600 * (n - i), now - 3600 * (n - i)))
        paths.append(path)
    return paths


def _cap_to(monkeypatch, nbytes: int) -> None:
    monkeypatch.setenv("NPUSIM_REPLAY_CACHE_MB", repr(nbytes / 2 ** 20))


def test_a_prune_deletes_the_oldest_entries_and_keeps_the_newest(cache, monkeypatch):
    paths = _fill(cache, 10)
    size = paths[0].stat().st_size
    assert all(p.stat().st_size == size for p in paths)
    _cap_to(monkeypatch, 6 * size)  # 10 entries over a cap of 6: pruned to at most 0.75 * 6 = 4.5
    freed = replay_cache.check(str(cache))
    assert [p.exists() for p in paths] == [False] * 6 + [True] * 4
    assert freed == 6 * size
    assert sum(s for _, s, _ in replay_cache.entries(str(cache))) <= replay_cache.PRUNE_TO * 6 * size


def test_under_the_cap_nothing_is_deleted(cache, monkeypatch):
    paths = _fill(cache, 5)
    _cap_to(monkeypatch, 5 * paths[0].stat().st_size)
    assert replay_cache.check(str(cache)) == 0 and all(p.exists() for p in paths)


def test_an_entry_read_back_counts_as_new(cache, monkeypatch):
    paths = _fill(cache, 4)
    monkeypatch.setattr(replay_code, "_MISSING", set())  # a fresh process reads entry 0, the oldest, back
    assert replay_code._code_object(_source(0), new=False) is not None
    _cap_to(monkeypatch, 3 * paths[0].stat().st_size)  # pruned to 2 entries: the two used last
    replay_cache.check(str(cache))
    assert [p.exists() for p in paths] == [True, False, False, True]


def test_a_check_soon_after_another_does_not_walk_the_cache(cache, monkeypatch):
    paths = _fill(cache, 4)
    _cap_to(monkeypatch, 10 * paths[0].stat().st_size)
    assert replay_cache.check(str(cache)) == 0  # under the cap; the stamp is set
    _cap_to(monkeypatch, paths[0].stat().st_size)
    assert replay_cache.check(str(cache)) == 0 and all(p.exists() for p in paths)  # checked a moment ago
    stamp = cache / replay_cache.STAMP
    old = time.time() - replay_cache.CHECK_EVERY_S - 1
    os.utime(stamp, (old, old))
    assert replay_cache.check(str(cache)) > 0 and not paths[0].exists()


def test_a_cap_of_0_keeps_everything(cache, monkeypatch):
    paths = _fill(cache, 3)
    monkeypatch.setenv("NPUSIM_REPLAY_CACHE_MB", "0")
    assert replay_cache.check(str(cache)) == 0 and all(p.exists() for p in paths)


@pytest.mark.parametrize("text", ["lots", "-5", "inf"])
def test_a_bad_cap_warns_and_keeps_the_default(monkeypatch, text):
    monkeypatch.setenv("NPUSIM_REPLAY_CACHE_MB", text)
    with pytest.warns(UserWarning, match="NPUSIM_REPLAY_CACHE_MB"):
        assert replay_cache.limit_bytes() == replay_cache.DEFAULT_LIMIT_MB * 2 ** 20


def test_the_cache_off_writes_no_entry_and_no_stamp(cache, monkeypatch):
    monkeypatch.setattr(replay_code, "CACHE_DIR", "off")
    monkeypatch.setenv("NPUSIM_REPLAY_CACHE_MB", "0.001")
    namespace = {}
    exec(replay_code._code_object(_source(3), new=True), namespace)
    assert namespace["_step"]() == 3
    assert not list(cache.rglob("*")) and not replay_cache._written and not Path("off").exists()


def test_a_deleted_entry_is_compiled_again(cache, monkeypatch):
    (path,) = _fill(cache, 1)
    path.unlink()  # another process's prune, after this one last looked
    monkeypatch.setattr(replay_code, "_MISSING", set())
    assert replay_code._code_object(_source(0), new=False) is None
    namespace = {}
    exec(replay_code._code_object(_source(0), new=True), namespace)
    assert namespace["_step"]() == 0 and path.exists()


def _child(code: str, cache: Path, cap_mb: str) -> subprocess.Popen:
    env = {**os.environ, "NPUSIM_REPLAY_CACHE": str(cache), "NPUSIM_REPLAY_CACHE_MB": cap_mb,
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen([sys.executable, "-c", code], env=env)


def test_a_process_that_stored_entries_prunes_at_its_exit(cache, monkeypatch):
    paths = _fill(cache, 6)
    size = paths[0].stat().st_size
    code = ("import npusim.replay_code as rc\n"
            f"rc._code_object({_source(99)!r}, new=True)\n")  # one entry stored, far under a quarter of the cap
    assert _child(code, cache, repr(4.5 * size / 2 ** 20)).wait() == 0
    newest = _entry(cache, _source(99))
    assert newest.exists() and not any(p.exists() for p in paths[:4]) and all(p.exists() for p in paths[4:])


def test_a_prune_in_another_process_never_breaks_a_read(cache, monkeypatch):
    """A second process prunes the cache to nothing over and over while this one reads and stores entries:
    every read gives the source's code or counts as absent; none raises or gives another source's code."""
    _fill(cache, 20)
    ready, stop = cache / "ready", cache / "stop"
    code = ("import os, npusim.replay_cache as r\n"
            f"r.prune({str(cache)!r}, 1)\n"
            f"open({str(ready)!r}, 'w').close()\n"
            f"while not os.path.exists({str(stop)!r}):\n"
            f"    r.prune({str(cache)!r}, 1)\n")
    child = _child(code, cache, "0")
    try:
        deadline = time.time() + 60
        while not ready.exists():
            assert child.poll() is None and time.time() < deadline
            time.sleep(0.01)
        compiled, found = [], 0
        monkeypatch.setattr(replay_code, "compile", lambda *a: compiled.append(1) or compile(*a), raising=False)
        for round_ in range(300):
            i = round_ % 20
            for new in (True, False):  # looked up (compiled where absent), then read back at once
                monkeypatch.setattr(replay_code, "_MISSING", set())  # as a fresh process would
                code_object = replay_code._code_object(_source(i), new=new)
                if code_object is None:
                    continue  # pruned between the two looks
                found += not new
                namespace = {}
                exec(code_object, namespace)
                assert namespace["_step"]() == i
    finally:
        stop.touch()
        assert child.wait(timeout=30) == 0
    assert compiled and found  # both sides of the race were taken: entries pruned, entries read back
