"""ScatterPaKvCache operator API: ``scatter_pa_kv_cache`` and the aclnn two-stage facade (API.md).

Flow: chip and mode -> ``validate`` (ScatterPlan; nothing written) -> tiling -> launch of the vector
kernel on GM buffers -> in-place update of the caller's caches -> :class:`~ops.common.result.OpResult`.

All or nothing: in full mode the kernel runs on private copies of key_cache and value_cache, and the
caller's arrays are overwritten only after the launch has succeeded. Any error (validation, tiling,
AclnnError 507014 for a run past the AI Core timeout, a simulator error) leaves them bit for bit as
they were. Cost: one extra copy of each cache while the call runs (peak memory = 2x the cache bytes)
and two full passes over each cache (copy out, copy back).

Modes: ``full`` (data + timing), ``timing`` (same instruction stream, no data: key/value/caches may
be ``TensorSpec``-like objects, control tensors stay real numpy arrays; outputs None); ``estimate``
(no launch of the whole call: the copies are counted from the control tensors and the busiest core is
sampled in timing mode, estimate.py; outputs and trace None, the timeout verdict carries split advice).

Nct (non-contiguous K/V): ``key``/``value`` are the logical [T, N, D] views and ``strides``/``offsets``
say where token t starts in their storage (element ``t * stride + offset``). The kernel reads the
storage by those numbers, as the real kernel does; here the storage is rebuilt from the view with
exactly that layout (extra memory ``(T - 1) * stride + offset + N * D`` elements per tensor), so a
stride must be at least N * D (tokens may not overlap), else AclnnError 161002.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from npusim.errors import ACLNN_ERR_PARAM_INVALID, AclnnError
from npusim.launch import GmArg
from npusim.memory.gm import TensorSpec
from npusim.sanitizer import unsanitized
from ops.common.facade import first_stage, second_stage
from ops.common.guard import check_full_bytes, check_work, tensor_bytes
from ops.common.inputs import normalized
from ops.common.result import OpResult, check_mode, resolve_chip, run_checked, run_with_options
from ops.scatter_pa_kv_cache.contract import BF16, FP16, FP32, INPUTS, OP_NAME
from ops.scatter_pa_kv_cache.estimate import estimate_spkc, split_advice
from ops.scatter_pa_kv_cache.launch import launch_kernel, source
from ops.scatter_pa_kv_cache.tiling import (COMPRESS_TEMPLATES, TEMPLATE_NAMES, TilingData,
                                            scatter_pa_kv_cache_tiling)
from ops.scatter_pa_kv_cache.validate import ScatterPlan, validate

__all__ = ["scatter_pa_kv_cache", "prepare_scatter_pa_kv_cache", "PreparedScatter",
           "aclnnScatterPaKvCacheGetWorkspaceSize", "aclnnScatterPaKvCache"]

#: Token dtypes whose Rope mean the kernel computes (fp32 accumulation on the A2/A3 vector unit).
MEAN_DTYPES = (FP16, BF16, FP32)


def _invalid(message: str) -> AclnnError:
    return AclnnError(ACLNN_ERR_PARAM_INVALID, f"{OP_NAME}: {message}")


#: Stands for an omitted value/value_cache pair (the aclnn facade passes None through: 161001).
_NO_TENSOR = np.empty((0,), np.float16)
_NO_TENSOR.flags.writeable = False


@dataclass
class PreparedScatter:
    """A validated and tiled call, ready to run (the aclnn executor's content)."""

    chip: Any
    mode: str
    plan: ScatterPlan
    tiling: TilingData
    tensors: dict

    def run(self) -> OpResult:
        """Launch the kernel; in full mode update the caller's caches only after success."""
        if self.mode == "estimate":
            return self._estimate()
        plan, tl, x = self.plan, self.tiling, self.tensors
        full = self.mode == "full"
        caches = {"key_cache": x["key_cache"]}
        if plan.has_value:
            caches["value_cache"] = x["value_cache"]
        work = {n: (np.array(c, order="C", copy=True) if full else TensorSpec(c.shape, c.dtype))
                for n, c in caches.items()}
        key_src = source(x["key"], plan.key_stride, plan.key_offset, full)
        value_src = source(x["value"], plan.value_stride, plan.value_offset, full) if plan.has_value else None

        def gm(name, array):
            return None if array is None else GmArg(name, array)

        def control(name):  # a zero-stride view of control values becomes real GM data
            array = x[name]
            return None if array is None else GmArg(name, np.ascontiguousarray(array))

        args = (gm("key", key_src), gm("key_cache", work["key_cache"]), control("slot_mapping"),
                gm("value", value_src), gm("value_cache", work.get("value_cache")), control("compress_lens"),
                control("compress_seq_offset"), control("seq_lens"), tl)
        meta = {"op": "ScatterPaKvCache", "template": TEMPLATE_NAMES[tl.templateType], "tiling": tl.asdict()}
        res = launch_kernel(args, tl.block_dim, self.chip, self.mode, meta=meta)
        outputs = None
        if full:  # the launch succeeded: now, and only now, write the caller's caches
            for name, dst in caches.items():
                dst[...] = work[name]
            outputs = {"key_cache": x["key_cache"], "value_cache": x["value_cache"]}
        return OpResult(outputs, res.cycles, res.time_us, res.trace, tl, tl.workspace_size, tl.block_dim,
                        res.timeout, self.mode, extra={"plan": plan, "template": TEMPLATE_NAMES[tl.templateType]})


    @unsanitized  # estimate mode runs no kernel end to end: nothing to sanitize
    def _estimate(self) -> OpResult:
        """Estimate mode: work counted from the control tensors, the busiest core sampled (estimate.py)."""
        tl = self.tiling
        est, work = estimate_spkc(self.plan, tl, self.chip, self.tensors)
        verdict = split_advice(self.chip, est, work, limit_s=self.chip.aicore_timeout_s)
        return OpResult(None, est.cycles, est.time_us, None, tl, tl.workspace_size, tl.block_dim, verdict,
                        self.mode, extra={"plan": self.plan, "template": TEMPLATE_NAMES[tl.templateType],
                                          "estimate": est})


def _check_data(plan: ScatterPlan, tensors: dict, full: bool, spec) -> None:
    """Full mode needs real, writeable arrays; Nct strides must not make tokens overlap and the
    storage they describe must fit the device memory."""
    names = ("key", "key_cache") + (("value", "value_cache") if plan.has_value else ())
    if full:
        for name in names:
            if not isinstance(tensors[name], np.ndarray):
                raise _invalid(f"{name} must be a numpy array with data in full mode (got "
                               f"{type(tensors[name]).__name__}; TensorSpec-like inputs need mode='timing')")
        for name in names[1::2]:
            if not tensors[name].flags.writeable:
                raise _invalid(f"{name} must be writeable: it is updated in place")
    for i, stride, offset, row in ((0, plan.key_stride, plan.key_offset, plan.key_token_elems),
                                   (1, plan.value_stride, plan.value_offset, plan.value_token_elems)):
        if stride is None:
            continue
        if stride < row:
            raise _invalid(f"strides[{i}] = {stride} must be >= num_head * head_size = {row}: with a smaller "
                           "stride consecutive tokens would overlap in storage (Nct)")
        storage = ((plan.num_tokens - 1) * stride + offset + row) * plan.elem_bytes
        if storage > spec.hbm_bytes:
            raise _invalid(f"strides[{i}] = {stride} and offsets[{i}] = {offset} describe a {storage}-byte "
                           f"storage, more than the {spec.hbm_bytes} bytes of device memory of {spec.name}")


@normalized(INPUTS)
def prepare_scatter_pa_kv_cache(key, key_cache, slot_mapping, value=None, value_cache=None, *,
                                compress_lens=None, compress_seq_offset=None, seq_lens=None,
                                cache_mode="Norm", scatter_mode="None", strides=None, offsets=None,
                                chip="Ascend910B2", mode="full", tiling=None) -> PreparedScatter:
    """Validate and tile one call (nothing is written); see :func:`scatter_pa_kv_cache`."""
    spec = resolve_chip(chip)
    mode = check_mode(mode)
    tensors = {"key": key, "key_cache": key_cache, "slot_mapping": slot_mapping, "value": value,
               "value_cache": value_cache, "compress_lens": compress_lens,
               "compress_seq_offset": compress_seq_offset, "seq_lens": seq_lens}
    if value is None and value_cache is None:  # Python API: both omitted = key only (scenario 6)
        value = value_cache = _NO_TENSOR
    plan = validate(key, key_cache, slot_mapping, value, value_cache, compress_lens, compress_seq_offset,
                    seq_lens, cache_mode, scatter_mode, strides, offsets, soc_family=spec.soc_family)
    _check_data(plan, tensors, mode == "full", spec)
    if plan.compress_kind == "rope" and plan.dtype not in MEAN_DTYPES:
        raise NotImplementedError(f"{OP_NAME}: the Rope mean of {plan.dtype.name} tokens (scenario "
                                  f"{plan.scenario}) is not modelled; modelled: float16, bfloat16, float32")
    tl = scatter_pa_kv_cache_tiling(plan, spec, tiling)
    _refuse_too_large(plan, tl, tensors, mode)
    return PreparedScatter(spec, mode, plan, tl, tensors)


#: Simulated instructions per unit of work: a token (Normal/NZ/SISO/Nct templates: about 12 in timing
#: traces of 500-20,000 tokens, e.g. 240,096 for 20,000) or a (token, head) pair of the compress
#: templates, which copy per head; 16 leaves a margin.
INSTRUCTIONS_PER_UNIT = 16


def _refuse_too_large(plan: ScatterPlan, tl: TilingData, tensors: dict, mode: str) -> None:
    """AclnnError 161002 pointing to estimate mode when a simulation would not finish or not fit
    (full mode holds a private copy of each cache besides the caller's)."""
    per_head = tl.templateType in COMPRESS_TEMPLATES
    units = plan.num_tokens * (plan.num_heads if per_head else 1)
    check_work(mode, units, INSTRUCTIONS_PER_UNIT, "(token, head) copies" if per_head else "token copies")
    caches = [tensors[n] for n in ("key_cache", "value_cache") if isinstance(tensors.get(n), np.ndarray)]
    check_full_bytes(mode, tensor_bytes(tensors["key"], tensors["value"], *caches, *caches),
                     "tensors (the caches and a private copy of each)")


def scatter_pa_kv_cache(key, key_cache, slot_mapping, value=None, value_cache=None, *, compress_lens=None,
                        compress_seq_offset=None, seq_lens=None, cache_mode="Norm", scatter_mode="None",
                        strides=None, offsets=None, chip="Ascend910B2", mode="full", tiling=None, trace=None,
                        progress=None, sanitize=False) -> OpResult:
    """aclnnScatterPaKvCache: write key/value tokens into the paged caches, in place.

    Arguments are the seed's (snake_case); ``value``/``value_cache`` may be empty arrays (key-only
    scenario 6). Full mode updates *key_cache* and *value_cache* in place and returns them as
    ``outputs``; timing mode computes cycles only (outputs None); estimate mode predicts them without
    launching the whole call (outputs and trace None; ``extra["estimate"]``). *tiling*: overrides such as
    ``{"blockDim": 8}`` or ``{"ubSize": 4096}`` (tiling.OVERRIDES).

    Raises AclnnError: 161001 (a required tensor is None), 161002 (invalid argument, unknown chip or
    mode, illegal tiling override), 561002 (rank and tiling-only rules), 507014 (predicted run past
    the AI Core timeout; estimate mode reports it in ``timeout`` instead, with split advice). On any error the caches are
    unchanged. NotImplementedError for the Rope mean of integer/fp8 tokens (950 class only). *trace* and
    *progress*: as prompt_flash_attention_v2's.
    ``sanitize=True`` checks the kernel's schedule (docs/sanitizer.md): reports in ``.sanitizer``.
    """
    kwargs = dict(compress_lens=compress_lens, compress_seq_offset=compress_seq_offset, seq_lens=seq_lens,
                  cache_mode=cache_mode, scatter_mode=scatter_mode, strides=strides, offsets=offsets, chip=chip,
                  tiling=tiling)
    prepared = prepare_scatter_pa_kv_cache(key, key_cache, slot_mapping, value, value_cache, mode=mode, **kwargs)
    return run_checked(lambda: run_with_options(prepared.run, mode, trace, progress, lambda: prepare_scatter_pa_kv_cache(
        key, key_cache, slot_mapping, value, value_cache, mode="estimate", **kwargs).run()), sanitize)


# --- aclnn facade (seed parameter order) ------------------------------------------------------------
def aclnnScatterPaKvCacheGetWorkspaceSize(key, keyCacheRef, slotMapping, value, valueCacheRef,  # noqa: N802,N803
                                          compressLensOptional, compressSeqOffsetOptional, seqLensOptional,
                                          cacheModeOptional, scatterModeOptional, stridesOptional,
                                          offsetsOptional, workspaceSize=None, executor=None, *,
                                          chip="Ascend910B2"):
    """First stage: validate and tile; ``(status, workspace_size, executor)``, status 0 on success.

    *workspaceSize* and *executor* stand for the C out-parameters and are ignored (the values are
    returned). The caches are written by the second stage.
    """
    def prepare():
        call = prepare_scatter_pa_kv_cache(
            key, keyCacheRef, slotMapping, value, valueCacheRef, compress_lens=compressLensOptional,
            compress_seq_offset=compressSeqOffsetOptional, seq_lens=seqLensOptional,
            cache_mode=cacheModeOptional, scatter_mode=scatterModeOptional, strides=stridesOptional,
            offsets=offsetsOptional, chip=chip, mode="full")
        return call.run, call.tiling.workspace_size

    controls = {"slot_mapping": slotMapping, "compress_lens": compressLensOptional,
                "compress_seq_offset": compressSeqOffsetOptional, "seq_lens": seqLensOptional}
    return first_stage(prepare, {"key_cache": keyCacheRef, "value_cache": valueCacheRef}, controls=controls,
                       op=OP_NAME)


def aclnnScatterPaKvCache(workspace, workspaceSize, executor, stream=None) -> int:  # noqa: N802,N803
    """Second stage: run the executor; the caches are updated in place; returns the status."""
    return second_stage(workspace, workspaceSize, executor, stream, op=OP_NAME)
