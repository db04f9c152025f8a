"""BandwidthCalendar.book: its bucket walk gives the same floats as the walk it replaced.

The walk reads each bucket's booked bytes once and works the transfer's rate out only in the bucket where it
ends (npusim/memory/bandwidth.py). Traces must not move with that (benchmarks/trace_equivalence.py), so the
end cycles and every bucket's booked bytes are compared bit for bit with the earlier walk, kept here as the
reference, on bookings that span one to many buckets of a calendar already partly booked.
"""
from __future__ import annotations

import random

import numpy as np

from npusim.memory.bandwidth import MAX_BUCKETS_PER_BOOKING, BandwidthCalendar


def _reference_book(cal: BandwidthCalendar, start: float, nbytes: float, core_rate: float) -> float:
    """The earlier walk: the rate worked out in every bucket, each bucket's bytes read twice."""
    if nbytes <= 0:
        return start
    width, cap, used = cal.bucket_cycles, cal.capacity, cal.used
    t = float(start)
    b = int(t // width)
    remaining = float(nbytes)
    last = b + MAX_BUCKETS_PER_BOOKING
    rate = core_rate
    while True:
        if b == last:
            return t + remaining / rate
        bucket_end = (b + 1) * width
        room = cap - used.get(b, 0.0)
        span = bucket_end - t
        can = core_rate * span
        if can > room:
            can = room
        if remaining <= can:
            used[b] = used.get(b, 0.0) + remaining
            rate = can / span if can > 0 else core_rate
            return t + remaining / rate
        rate = can / span if can > 0 else core_rate
        if can > 0:
            used[b] = used.get(b, 0.0) + can
            remaining -= can
        t = bucket_end
        b += 1


def _bits(x: float) -> int:
    return int(np.float64(x).view(np.int64))


def test_book_gives_the_reference_walks_end_and_bucket_bytes_bit_for_bit():
    rng = random.Random(20261125)
    for bytes_per_cycle in (1.7, 64.0, 409.6):
        cal, ref = BandwidthCalendar("HBM", bytes_per_cycle), BandwidthCalendar("HBM", bytes_per_cycle)
        for _ in range(3000):
            start = rng.uniform(0, 200_000) if rng.random() < 0.7 else float(rng.randrange(0, 200_000, 256))
            nbytes = rng.choice([rng.randint(1, 512), rng.randint(512, 65536), rng.randint(65536, 1 << 20)])
            rate = rng.choice([8.0, 32.0, 128.0, rng.uniform(1, 256)])
            end = cal.book(start, nbytes, rate)
            assert _bits(end) == _bits(_reference_book(ref, start, nbytes, rate)), (start, nbytes, rate)
        assert cal.used.keys() == ref.used.keys()
        assert all(_bits(cal.used[b]) == _bits(ref.used[b]) for b in ref.used)
        assert max(ref.used.values()) == ref.capacity  # full buckets were reached: multi-bucket walks ran


def test_book_past_the_walk_limit_gives_the_reference_end():
    """A transfer longer than MAX_BUCKETS_PER_BOOKING buckets finishes at its last bucket's rate, as before."""
    cal, ref = BandwidthCalendar("HBM", 1e-6), BandwidthCalendar("HBM", 1e-6)
    for start in (0.0, 300.5):
        assert _bits(cal.book(start, 1e6, 50.0)) == _bits(_reference_book(ref, start, 1e6, 50.0))
