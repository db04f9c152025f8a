"""Speed paths of the trace sinks (npusim/trace_sink.py) give the arrays of the plain ones."""
import numpy as np

from npusim.trace_sink import _interleaved


def _placed_row_by_row(rec, rows, blocks, sizes):
    """The rows of every block before the record its position names, placed one row at a time."""
    at = [b[0] // 7 for b in blocks]
    out, r, b = [], 0, 0
    for pos, n in zip(at, sizes):
        while r < pos:
            out.append(rec[r])
            r += 1
        out.extend(rows[b:b + n])
        b += n
    out.extend(rec[r:])
    return np.array(out, np.float64).reshape(-1, 7)


def test_interleaved_places_blocks_as_row_by_row():
    """Runs of blocks at one position, blocks before the first record and after the last, blocks of no rows
    (arrows-only steps): the same array as placing each row in turn."""
    rng = np.random.default_rng(3)
    for _ in range(200):
        n, k = int(rng.integers(1, 40)), int(rng.integers(1, 30))
        rec = rng.standard_normal((n, 7))
        positions = np.sort(rng.integers(0, n + 1, k)) * 7
        sizes = rng.integers(0, 5, k)
        rows = rng.standard_normal((int(sizes.sum()), 7))
        blocks = [(int(p), None, b"") for p in positions]
        got = _interleaved(rec, rows, blocks, sizes)
        want = _placed_row_by_row(rec, rows, blocks, sizes)
        assert got.shape == want.shape and got.tobytes() == want.tobytes()
