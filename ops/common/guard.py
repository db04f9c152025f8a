"""The size guard of full and timing mode, shared by every operator: refuse up front, from the work the
tiling implies, a simulation that would not finish in reasonable time or not fit in memory, and point to
estimate mode (which costs the same for any size).

Each operator counts its work in its own unit (score tiles, token copies) and states how many simulated
instructions one unit takes (measured from traces, see the operator's constant); the budget below is in
instructions, so every operator refuses at about the same simulation time. npusim.launch keeps its own
run-time budget (a backstop for kernels without an up-front count, see npusim/launch.py).
"""
from __future__ import annotations

from npusim.errors import ACLNN_ERR_PARAM_INVALID, AclnnError

#: Simulated instructions a run may take: about 10 (full) / 30 (timing) minutes at the simulator's
#: 150,000-200,000 instructions/s (benchmarks/sim_speed.py); 54M = PFA's 20,000 score tiles x 2,700.
MAX_INSTRUCTIONS = {"full": 54_000_000, "timing": 162_000_000}
#: Instructions per second used to translate a refused count into minutes in the message.
INSTRUCTIONS_PER_S = 170_000
#: Bytes of tensors (inputs, outputs, workspace, private copies) full mode may hold.
MAX_FULL_BYTES = 4 << 30


def check_work(mode: str, units: int, per_unit: int, unit_name: str) -> None:
    """AclnnError 161002 (naming ``mode``) when *units* x *per_unit* instructions exceed the budget."""
    budget = MAX_INSTRUCTIONS.get(mode)
    if budget is None:
        return
    instructions = int(units) * int(per_unit)
    if instructions > budget:
        limit = budget // per_unit
        raise AclnnError(ACLNN_ERR_PARAM_INVALID,
                         f"mode: {mode!r} would simulate {int(units):,} {unit_name} (limit {limit:,}; about "
                         f"{instructions / INSTRUCTIONS_PER_S / 60:,.0f} minutes of simulation); use "
                         "mode='estimate' for this shape (trace='summary' keeps a long run's memory flat, not "
                         "its time)")


def check_full_bytes(mode: str, nbytes: int, what: str = "tensors") -> None:
    """AclnnError 161002 (naming ``mode``) when full mode would hold more than MAX_FULL_BYTES."""
    if mode == "full" and nbytes > MAX_FULL_BYTES:
        raise AclnnError(ACLNN_ERR_PARAM_INVALID,
                         f"mode: 'full' needs {nbytes / 2**30:.1f} GiB of {what} (limit "
                         f"{MAX_FULL_BYTES / 2**30:.0f} GiB); use mode='timing' or mode='estimate'")


def tensor_bytes(*tensors) -> int:
    """Bytes of the tensors' logical extents (arrays and TensorSpecs alike; None skipped)."""
    import numpy as np

    return sum(int(np.prod(t.shape, dtype=np.int64)) * np.dtype(t.dtype).itemsize for t in tensors if t is not None)
