"""The disk cache of compiled replay steps (npusim/replay_code.py CACHE_DIR): a generated source compiled in one
process is read back in the next instead of compiled again, and a launch run from the cache gives the trace of one
that compiled its steps."""
from __future__ import annotations

import numpy as np
import pytest

import npusim.replay as replay
import npusim.replay_code as replay_code
from npusim.launch import GmArg, launch
from npusim.memory.gm import TensorSpec
from tests.npusim.test_replay import assert_same_trace


@pytest.fixture
def cache(monkeypatch, tmp_path):
    """An empty cache directory, and no source compiled or looked for yet in this process."""
    monkeypatch.setattr(replay_code, "CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(replay_code, "_CODE", {})
    monkeypatch.setattr(replay_code, "_MISSING", set())
    return tmp_path


def _no_compile(*args):
    raise AssertionError("compiled although the cache holds the source")


def test_a_compiled_source_is_read_back_instead_of_compiled(cache, monkeypatch):
    source = "def _step():\n    return 7\n"
    assert replay_code._code_object(source, new=False) is None  # not compiled anywhere yet, not worth it now
    code = replay_code._code_object(source, new=True)
    assert len(list(cache.rglob("*"))) == 2  # one directory, one file
    monkeypatch.setattr(replay_code, "_MISSING", set())  # a fresh process
    monkeypatch.setattr(replay_code, "compile", _no_compile, raising=False)
    again = replay_code._code_object(source, new=False)  # read back, even where it would not compile now
    namespace = {}
    exec(again, namespace)
    assert again == code and namespace["_step"]() == 7


@pytest.mark.parametrize("damage", [b"", b"\xe3garbage", b"i\x07\x00\x00\x00"])  # empty, corrupt, an int
def test_an_unreadable_entry_is_compiled_again_and_replaced(cache, monkeypatch, damage):
    source = "def _step():\n    return 8\n"
    replay_code._code_object(source, new=True)
    (entry,) = [p for p in cache.rglob("*") if p.is_file()]
    entry.write_bytes(damage)
    monkeypatch.setattr(replay_code, "_MISSING", set())  # a fresh process
    assert replay_code._code_object(source, new=False) is None  # not read back; not worth compiling now
    namespace = {}
    exec(replay_code._code_object(source, new=True), namespace)
    assert namespace["_step"]() == 8 and entry.read_bytes() not in (b"", damage)  # compiled, stored again


def test_the_cache_off_keeps_nothing(cache, monkeypatch):
    monkeypatch.setattr(replay_code, "CACHE_DIR", "off")
    assert replay_code._code_object("x = 1\n", new=True) is not None
    assert not list(cache.rglob("*"))


def test_a_launch_from_the_cache_compiles_nothing_and_gives_the_same_trace(cache, monkeypatch):
    from npusim.examples.vector_add import add_custom, add_tiling
    n = 1024 * 200
    x = TensorSpec((n,), np.float16)

    def run():
        return launch(add_custom, (GmArg("x", x), GmArg("y", x), GmArg("z", x), add_tiling(n, 1, 1024, 2)),
                      block_dim=1, chip="Ascend910B2", mode="timing", kernel_type="vector", progress=False)
    cold = run()
    stored = sorted(p.name for p in cache.rglob("*") if p.is_file())
    assert stored  # the tile's steps were compiled and kept
    monkeypatch.setattr(replay_code, "_CODE", {})  # a fresh process: nothing compiled in it
    monkeypatch.setattr(replay_code, "_MISSING", set())
    monkeypatch.setattr(replay_code, "compile", _no_compile, raising=False)
    warm = run()
    assert sorted(p.name for p in cache.rglob("*") if p.is_file()) == stored
    assert_same_trace(cold, warm)
    with replay.disabled():
        assert_same_trace(cold, run())


def test_a_source_looked_for_then_compiled_is_found_later_in_the_same_process(cache, monkeypatch):
    """Once stored, a source missed earlier is read back from the cache (after _CODE drops it, say), not held back as
    missing until it is worth compiling again."""
    source = "def _step():\n    return 11\n"
    assert replay_code._code_object(source, new=False) is None  # looked for: missing
    replay_code._code_object(source, new=True)  # compiled and stored
    monkeypatch.setattr(replay_code, "compile", _no_compile, raising=False)
    namespace = {}
    exec(replay_code._code_object(source, new=False), namespace)
    assert namespace["_step"]() == 11
