"""Chip-wide bandwidth shared by the transfers of all cores (HBM and L2).

A :class:`BandwidthCalendar` divides simulated time into buckets of ``bucket_cycles`` and books the
bytes each transfer moves into them. A transfer moves at most its per-core path rate, and at most what
its buckets still have room for, so concurrent transfers of many cores stretch each other exactly when
their sum exceeds the chip's bandwidth. Cores are run in simulated-time order (launch.py), so bookings
are close to first-come first-served in simulated time.
"""
from __future__ import annotations


#: Buckets one booking walks at most (4 Mi cycles at the default bucket). Real transfers span a few
#: buckets; only a what-if chip with a near-zero bandwidth reaches this, and the rest of such a transfer
#: then moves at its last bucket's rate without being booked, so a booking's cost stays bounded.
MAX_BUCKETS_PER_BOOKING = 1 << 14
#: Cycles per time bucket unless a launch asks for others (npusim.launch.launch's bw_bucket_cycles)
BUCKET_CYCLES = 256


class BandwidthCalendar:
    """Bytes per time bucket already booked on one shared resource (HBM or L2)."""

    __slots__ = ("name", "bytes_per_cycle", "bucket_cycles", "capacity", "used")

    def __init__(self, name: str, bytes_per_cycle: float, bucket_cycles: int = BUCKET_CYCLES):
        self.name = name
        self.bytes_per_cycle = float(bytes_per_cycle)
        self.bucket_cycles = int(bucket_cycles)
        self.capacity = self.bytes_per_cycle * self.bucket_cycles
        self.used: dict[int, float] = {}

    def book(self, start: float, nbytes: float, core_rate: float) -> float:
        """Book *nbytes* starting at cycle *start*, moving at most *core_rate* bytes/cycle.

        Returns the cycle at which the last byte has moved.
        """
        if nbytes <= 0:
            return start
        width = self.bucket_cycles
        cap = self.capacity
        used = self.used
        t = float(start)
        b = int(t // width)
        remaining = float(nbytes)
        last = b + MAX_BUCKETS_PER_BOOKING
        # NOTE: each bucket's booked bytes read once, and the rate the transfer got worked out only in the bucket
        # where it ends (or the last one walked), for performance reasons: the same expressions on the same
        # floats as a walk that works it out in every bucket (FA's K, V and score tiles span several buckets)
        can = span = 0.0
        while True:
            if b == last:  # a pathologically slow transfer: finish at the rate of its last bucket, unbooked
                return t + remaining / (can / span if can > 0 else core_rate)
            bucket_end = (b + 1) * width
            u = used.get(b, 0.0)
            room = cap - u
            span = bucket_end - t
            can = core_rate * span
            if can > room:
                can = room
            if remaining <= can:
                used[b] = u + remaining
                # the bucket's share: the transfer ran at the rate it could get in this bucket
                return t + remaining / (can / span if can > 0 else core_rate)
            if can > 0:
                used[b] = u + can
                remaining -= can
            t = bucket_end
            b += 1
