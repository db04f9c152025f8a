"""The timing model's fitted parameters, in one place (docs/calibration.md "What is fitted").

Everything else in the chip presets comes from the research notes; these values are fitted to the
board measurements in ../shared/calibration/ by benchmarks/calibration.py, and apply to every chip.

``LAUNCH_OVERHEAD_S``: the fixed cost of one operator launch on the device (runtime dispatch, kernel
start, the end-of-kernel synchronisation), in seconds; each preset converts it to cycles at its own
clock. Fit (benchmarks/calibration.py): FlashAttentionVarLenScore, B=1, N=1, D=128, fp16, no mask,
S in (1024, 4096, 16384) on Ascend910B2 against the torch_npu times of fa_forward_910B2.csv; least
squares of the relative error (closed form): 22.99 us, shipped 23.0 us; fit error -1.4% / -2.0% / +4.3%
(MAPE 2.5%). Before the first fit the model used the FA cost-model figure of peers.md §5f (10905 cycles
= 6.1 us at 1.8 GHz).

``OPERATOR_LAUNCH_EXTRA_S``: what one launch of an operator family costs above ``LAUNCH_OVERHEAD_S``
(added by that operator's launch, every chip). PromptFlashAttentionV2: fitted the same way on
pfa_infer_910B2.csv (Sq=3072, Skv 8192 and 16384): 51.76 us, shipped 51.8 us (a PFA launch 74.8 us in
all); fit error -4.1% / +5.8%. The board's PFA times extrapolate to about 108 us at Skv -> 0, the model's
PFA kernel to about 5 us, while the FA board's whole S=1024 run is 58.5 us: no single constant fits both
files (docs/calibration.md "What is fitted" says why this is not one parameter set, and what it costs).
"""
LAUNCH_OVERHEAD_S = 23.0e-6
OPERATOR_LAUNCH_EXTRA_S = {"PromptFlashAttentionV2": 51.8e-6}
