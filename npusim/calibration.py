"""The timing model's fitted parameters, in one place (docs/calibration.md).

Everything else in the chip presets comes from the research notes; these values are fitted to the
board measurements in ../shared/calibration/ by benchmarks/calibration.py, and apply to every operator
and every chip.

``LAUNCH_OVERHEAD_S``: the fixed cost of one operator launch on the device (runtime dispatch, kernel
start, the end-of-kernel synchronisation), in seconds; each preset converts it to cycles at its own
clock. Fit (benchmarks/calibration.py, 2026-11-21): FlashAttentionVarLenScore, B=1, N=1, D=128, fp16,
no mask, S in (1024, 4096, 16384) on Ascend910B2 against the torch_npu times 58.461 / 118.302 /
1118.462 us; least squares of the relative error; result 21.98 us, shipped as 22.0 us; errors after the fit in
docs/calibration.md. Before the fit the model used the FA cost-model figure of peers.md §5f
(10905 cycles = 6.1 us at 1.8 GHz).
"""
LAUNCH_OVERHEAD_S = 22.0e-6
