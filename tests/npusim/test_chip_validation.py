"""ChipSpec field validation (issue 16 class 2): every field positive/finite/integral where it must be,
in replace and from_toml, and the bandwidth calendar's bounded cost for near-zero what-if bandwidths."""
from __future__ import annotations

import math

import numpy as np
import pytest

from npusim.chip import ChipSpec, chip
from npusim.errors import ACLNN_ERR_PARAM_INVALID, AclnnError
from npusim.memory.bandwidth import MAX_BUCKETS_PER_BOOKING, BandwidthCalendar
from npusim.timeouts import op_execute_timeout

B2 = chip("Ascend910B2")

BAD = [
    ("hbm_bw_bytes_per_s", 0.0), ("l2_bw_bytes_per_s", 0.0), ("hbm_bw_bytes_per_s", math.nan),
    ("hbm_bw_bytes_per_s", math.inf), ("l2_bw_bytes_per_s", -1.0), ("clock_hz", 0), ("clock_hz", math.inf),
    ("gm_to_ub_bytes_per_cycle", 0.0), ("gm_to_l1_bytes_per_cycle", math.nan), ("ub_to_gm_bytes_per_cycle", 0),
    ("l1_to_l0a_bytes_per_cycle", 0.0), ("vector_bytes_per_cycle", 0), ("ub_read_bytes_per_cycle", 0),
    ("ub_bytes", 0), ("l1_bytes", 0), ("l2_bytes", -1), ("hbm_bytes", 0), ("aic_count", 2.5),
    ("aic_count", 2.0), ("aic_count", True), ("aic_count", "24"), ("pipe_queue_depth", 0),
    ("aicore_timeout_s", 0.0), ("aicore_timeout_s", math.nan), ("timer_hz", 0.0),
    ("mte2_latency_cycles", math.inf), ("launch_overhead_cycles", -1.0), ("ub_align_bytes", 3),
    ("cube_macs_per_cycle", {"float16": 0}), ("cube_macs_per_cycle", {"float16": 2.5}),
    ("gm_to_ub_curve", ((1024, math.inf),)), ("gm_to_ub_curve", ((1024, 0.0),)),
]


@pytest.mark.parametrize("field, value", BAD, ids=[f"{f}={v!r}" for f, v in BAD])
def test_replace_refuses_bad_field_naming_it(field, value):
    """Each bad value is AclnnError 161002 whose message names the field (hbm_bw 0 hung every launch)."""
    with pytest.raises(AclnnError) as exc:
        B2.replace(**{field: value})
    assert exc.value.status == ACLNN_ERR_PARAM_INVALID
    assert f"ChipSpec.{field}" in exc.value.message


@pytest.mark.parametrize("field, value", BAD[:12], ids=[f"{f}={v!r}" for f, v in BAD[:12]])
def test_from_toml_refuses_bad_field(tmp_path, field, value):
    """from_toml goes through the same checks (TOML spells nan/inf as nan/inf)."""
    text = repr(value).replace("nan", "nan").replace("inf", "inf") if isinstance(value, float) else repr(value)
    path = tmp_path / "chip.toml"
    path.write_text(f'base = "Ascend910B2"\n{field} = {text}\n')
    with pytest.raises(AclnnError) as exc:
        ChipSpec.from_toml(path)
    assert f"ChipSpec.{field}" in exc.value.message


def test_valid_variants_still_accepted():
    """Optional paths may be 0, numpy ints are integral, an infinite timeout means no limit."""
    assert B2.replace(l1_to_gm_bytes_per_cycle=0.0, bt_bytes=0, mte2_latency_cycles=0.0).bt_bytes == 0
    spec = B2.replace(aic_count=np.int64(8), aicore_timeout_s=math.inf)
    assert spec.aic_count == 8 and type(spec.aic_count) is int and spec.aicore_timeout_s == math.inf


def test_op_execute_timeout_accepts_inf_as_the_cap():
    """aclrtSetOpExecuteTimeOut(inf) is capped at the chip's maximum (was OverflowError)."""
    assert op_execute_timeout(B2, math.inf).aicore_timeout_s == B2.aicore_timeout_s
    assert op_execute_timeout(B2.replace(aicore_timeout_s=math.inf), math.inf).aicore_timeout_s == math.inf


def test_calendar_booking_cost_is_bounded_for_a_near_zero_bandwidth():
    """A positive but absurd bandwidth (1e-9 B/cycle) still returns, after a bounded walk, a finite end
    at least as late as the bandwidth allows."""
    cal = BandwidthCalendar("HBM", 1e-9)
    end = cal.book(0.0, 65536, 100.0)
    assert math.isfinite(end) and end >= 65536 / 1e-9 * 0.99
    assert len(cal.used) <= MAX_BUCKETS_PER_BOOKING


def test_near_zero_hbm_bandwidth_launch_ends_with_timeout_error():
    """A whole launch on such a chip ends (507014: the transfers take years), quickly."""
    from ops.scatter_pa_kv_cache.api import scatter_pa_kv_cache

    k = np.ones((10, 2, 32), np.float16)
    kc = np.zeros((4, 8, 2, 32), np.float16)
    slow = B2.replace(hbm_bw_bytes_per_s=1e-3, l2_bw_bytes_per_s=1e-3)
    with pytest.raises(AclnnError) as exc:
        scatter_pa_kv_cache(k, kc, np.arange(10, dtype=np.int32), k, kc.copy(), chip=slow, mode="timing")
    assert exc.value.status == 507014
