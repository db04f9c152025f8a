"""The timing model's fitted parameters, in one place (docs/calibration.md "What is fitted").

Everything else in the chip presets comes from the research notes; these values are fitted to the
board measurements in ../shared/calibration/ by benchmarks/calibration.py, and apply to every chip and
every operator (one parameter set).

``LAUNCH_OVERHEAD_S``: the fixed cost of one operator launch on the device (runtime dispatch, kernel
start, the end-of-kernel synchronisation), in seconds; each preset converts it to cycles at its own
clock. Fit (benchmarks/calibration.py): FlashAttentionVarLenScore, B=1, N=1, D=128, fp16, no mask,
S in (1024, 4096, 16384) on Ascend910B2 against the torch_npu times of fa_forward_910B2.csv; least
squares of the relative error (closed form): 22.99 us, shipped 23.0 us. Before the first fit the model
used the FA cost-model figure of peers.md §5f (10905 cycles = 6.1 us at 1.8 GHz).

There is no per-operator launch constant any more. The PromptFlashAttention family had one (51.8 us
above this overhead) until it turned out to compensate a configuration mismatch: the PFA board file was
measured through torch_npu.npu_fused_infer_attention_score with its default inner_precise=0 (high
precision: fp32 softmax), while the calibration ran the model at inner_precise=1 (fp16 softmax). At the
board's setting the model's PFA kernel is already slower than the board, so no positive extra fits
(docs/calibration.md "PFA board file: the precision mode" and "Open").
"""
LAUNCH_OVERHEAD_S = 23.0e-6
