"""Host tiling of aclnnScatterPaKvCache: the core split and copy plan the kernel obeys (STYLE §4).

Mirrors ``op_host/scatter_pa_kv_cache_tiling.cpp`` (research/tiling.md §5; cannmirror and
yuanfang-chen/ops-transformer ``attention/scatter_pa_kv_cache``): template choice
(``GetTemplateType``), AIV core split, tiling key, and a frozen :class:`TilingData` whose fields
carry the real ``ScatterPaKvCacheTilingData`` names (``scatter_pa_kv_cache_tiling.h``).

Core split (tiling.md §5), over at most ``chip.aiv_count`` vector cores (or the ``blockDim`` override):
- Norm, Nct, key-only (SISO) and Alibi: ``usedCoreNum = min(tasks, cores)``; the kernel's
  ``AllocateTask`` gives each core ``tasks // usedCoreNum`` tasks and one more to the first
  ``tasks % usedCoreNum`` cores (recorded here as blockFactor / tailBlockFactor);
- PA_NZ: ``blockFactor = ceil(T / cores)``, ``usedCoreNum = ceil(T / blockFactor)``, the last core
  takes ``tailBlockFactor = T - blockFactor * (usedCoreNum - 1)`` tokens;
- Rope/Omni: ``2 * batch * num_head`` tasks (K and V tasks apart, TASK_MULTIPLE), split as AllocateTask.
Tasks are tokens (scenarios 1, 2, 6) or (batch, head) pairs (3, 4, 5); ``numTokens`` is the token
count or batch*num_head, as the real tiling sets it.

Copy plan, per token row (Norm/NZ; elements): ``kHandleNumPerLoop`` elements per chunk, ``kLoopNum``
whole chunks, then ``kTailHandleNum`` elements (likewise v*). Fully loaded (one DataCopy per token
and tensor): T < SMALL_TOKEN (Norm) and both rows fit ``ubSize`` and (Norm) are 32-byte aligned;
PA_NZ needs only the fit. Otherwise rows go through double-buffered chunks of
``ubSize / (BUFFER_NUM * tensors)`` bytes, the tail by DataCopyPad when it is not 32-byte aligned.
Compress templates copy ``kHandleNumPerLoop`` token rows per loop through buffers of ``copyFp16Num``
elements and average ``addNumPerLoop`` rows per vector batch (names of the real kernel's members,
base.h ``RopeInitBuf``).

Workspace: 0. The real host tiling asks for the CANN library workspace (GetLibApiWorkSpaceSize, the
16 MB tools reserve of tiling.md §5) that this kernel never touches; not modelled.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Mapping

from npusim.errors import ACLNN_ERR_INNER_TILING_ERROR, ACLNN_ERR_PARAM_INVALID, AclnnError
from ops.scatter_pa_kv_cache.contract import OP_NAME

BLOCK_BYTES = 32  # DataCopy block unit (hardware.md §4; tiling.cpp ALIGN = 32)
RESERVED_UB_BYTES = 1024  # tiling.cpp RESERVED_BUFFER: ubSize = UB size - 1 KB
SMALL_TOKEN = 1000  # tiling.cpp SMALL_TOKEN; tiling.md §5 "T<1000 ... one DataCopy per token"
TASK_MULTIPLE = 2  # tiling.cpp / common.h TASK_MULTIPLE: Rope/Omni split K and V tasks
BUFFER_NUM = 2  # common.h BUFFER_NUM (double buffering)
MAX_BLOCK_COUNT = 4095  # tiling.cpp NUM_HEAD_MAX comment: DataCopyPad blockCount is at most 4095
#: Control values staged in UB per load (ours; the real kernels read them as GM scalars). 256 B
#: per control tensor keeps 32 int64 / 64 int32 entries per load.
CONTROL_CHUNK_BYTES = 256

TILING_ID_TEMPLATE = 1000  # tiling.cpp: tilingKey = 1000 * template (+ TILING_ID_FULL)
TILING_ID_FULL = 1
TEMPLATE_NORMAL, TEMPLATE_NZ, TEMPLATE_ALIBI, TEMPLATE_ROPE = 1, 2, 3, 4  # tiling.cpp TEMPLATE_*
TEMPLATE_SISO, TEMPLATE_OMNI, TEMPLATE_NORM_NCT, TEMPLATE_SISO_NCT = 5, 6, 7, 8
TEMPLATE_NAMES = {TEMPLATE_NORMAL: "NORMAL", TEMPLATE_NZ: "NZ", TEMPLATE_ALIBI: "ALIBI",
                  TEMPLATE_ROPE: "ROPE", TEMPLATE_SISO: "SISO", TEMPLATE_OMNI: "OMNI",
                  TEMPLATE_NORM_NCT: "NORM_NCT", TEMPLATE_SISO_NCT: "SISO_NCT"}
COMPRESS_TEMPLATES = (TEMPLATE_ALIBI, TEMPLATE_ROPE, TEMPLATE_OMNI)
#: User-overridable fields (``tiling=`` dict) and what they mean.
OVERRIDES = {"blockDim": "vector cores to split over (1 .. chip.aiv_count)",
             "ubSize": "UB bytes for token data (a multiple of 32, at most the default)"}


@dataclass(frozen=True, kw_only=True)
class TilingData:
    """``ScatterPaKvCacheTilingData`` plus the template, key and copy plan (module docstring).

    Sizes in elements unless named ``*Bytes``/``ubSize``; ``seqLen`` > 0 marks the 4-D key of
    scenario 3 (token j of batch b is row ``b * seqLen + j``).
    """

    templateType: int
    tilingKey: int
    usedCoreNum: int
    blockFactor: int
    tailBlockFactor: int
    numTokens: int
    numHead: int
    kHeadSize: int
    vHeadSize: int
    batch: int
    seqLen: int
    numBlocks: int
    blockSize: int
    ubSize: int
    typeByte: int
    typeByteSlot: int
    kStride: int
    vStride: int
    kOffset: int
    vOffset: int
    kHandleNumPerLoop: int
    vHandleNumPerLoop: int
    kLoopNum: int
    vLoopNum: int
    kTailHandleNum: int
    vTailHandleNum: int
    copyFp16Num: int
    addNumPerLoop: int

    @property
    def block_dim(self) -> int:
        """Cores the launch uses."""
        return self.usedCoreNum

    @property
    def workspace_size(self) -> int:
        """Device workspace bytes (0: the kernel uses none)."""
        return 0

    @property
    def fullyLoad(self) -> bool:
        """The "fully load" variant (tiling key ending in 1)."""
        return self.tilingKey % TILING_ID_TEMPLATE == TILING_ID_FULL

    @property
    def hasValue(self) -> bool:
        return self.templateType not in (TEMPLATE_SISO, TEMPLATE_SISO_NCT)

    def asdict(self) -> dict:
        return asdict(self)


# --- helpers ---------------------------------------------------------------------------------------
def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _round_down(a: int, b: int) -> int:
    return a // b * b


def _round_up(a: int, b: int) -> int:
    return _ceil(a, b) * b


def _fail(status: int, message: str) -> AclnnError:
    return AclnnError(status, f"{OP_NAME} tiling: {message}")


def template_of(plan) -> int:
    """tiling.cpp GetTemplateType, from a validated ScatterPlan (scenario 3 by its compress kind)."""
    kind = plan.compress_kind
    if kind is not None:
        return {"alibi": TEMPLATE_ALIBI, "rope": TEMPLATE_ROPE, "omni": TEMPLATE_OMNI}[kind]
    if plan.cache_mode == "PA_NZ":
        return TEMPLATE_NZ
    if plan.scatter_mode == "Nct":
        return TEMPLATE_NORM_NCT if plan.has_value else TEMPLATE_SISO_NCT
    return TEMPLATE_NORMAL if plan.has_value else TEMPLATE_SISO


def _overrides(tiling: Mapping | None, chip) -> dict:
    """Check the user's ``tiling=`` dict (161002 for anything illegal)."""
    if tiling is None:
        return {}
    if not isinstance(tiling, Mapping):
        raise _fail(ACLNN_ERR_PARAM_INVALID, f"tiling must be a dict of overrides, got {type(tiling).__name__}")
    out = {}
    for name, value in tiling.items():
        if name not in OVERRIDES:
            allowed = "; ".join(f"{k}: {v}" for k, v in OVERRIDES.items())
            raise _fail(ACLNN_ERR_PARAM_INVALID, f"unknown tiling override {name!r} (allowed: {allowed})")
        if isinstance(value, bool) or not isinstance(value, int):
            raise _fail(ACLNN_ERR_PARAM_INVALID, f"tiling override {name} must be an int, got {value!r}")
        out[name] = int(value)
    cores = out.get("blockDim")
    if cores is not None and not 1 <= cores <= chip.aiv_count:
        raise _fail(ACLNN_ERR_PARAM_INVALID, f"tiling override blockDim = {cores} must lie in [1, "
                                             f"{chip.aiv_count}] (the vector cores of {chip.name})")
    ub = out.get("ubSize")
    if ub is not None and (ub <= 0 or ub % BLOCK_BYTES):
        raise _fail(ACLNN_ERR_PARAM_INVALID, f"tiling override ubSize = {ub} must be a positive multiple of "
                                             f"{BLOCK_BYTES} bytes")
    return out


def _ub_size(chip, control_bytes: int, override: int | None) -> int:
    """UB bytes left for token data after the control staging area."""
    default = _round_down(chip.ub_bytes - max(RESERVED_UB_BYTES, control_bytes), BLOCK_BYTES)
    if default < BLOCK_BYTES:
        raise _fail(ACLNN_ERR_INNER_TILING_ERROR, f"staging the control tensors takes {control_bytes} bytes, "
                                                  f"more than the {chip.ub_bytes}-byte UB of {chip.name} "
                                                  "(batch too large)")
    if override is None:
        return default
    if override > default:
        raise _fail(ACLNN_ERR_PARAM_INVALID, f"tiling override ubSize = {override} exceeds the {default} "
                                             f"bytes of UB left for token data on {chip.name}")
    return override


def _row_plan(row_elems: int, elem: int, chunk_bytes: int, whole: bool) -> tuple:
    """(handle per loop, loops, tail) elements for one token row."""
    if whole:
        return row_elems, 1, 0
    per = chunk_bytes // elem
    loops = row_elems // per
    return per, loops, row_elems - loops * per


# --- entry point -----------------------------------------------------------------------------------
def scatter_pa_kv_cache_tiling(plan, chip, tiling: Mapping | None = None) -> TilingData:
    """TilingData for a validated call (*plan*: ScatterPlan) on *chip* (a ChipSpec).

    *tiling*: user overrides (:data:`OVERRIDES`). Raises AclnnError 161002 for an illegal override,
    561002 when a row (Rope/Omni/Alibi) does not fit the UB.
    """
    over = _overrides(tiling, chip)
    template = template_of(plan)
    cores = over.get("blockDim", chip.aiv_count)
    elem, idx = plan.elem_bytes, plan.index_dtype.itemsize
    compress = template in COMPRESS_TEMPLATES
    # a UB too small for one row: the user's ubSize override is illegal (161002), else the shape (561002)
    status = ACLNN_ERR_PARAM_INVALID if "ubSize" in over else ACLNN_ERR_INNER_TILING_ERROR
    fields: dict[str, Any] = dict(
        templateType=template, numHead=plan.num_heads, kHeadSize=plan.k_head_size,
        vHeadSize=plan.v_head_size, batch=plan.batch, seqLen=plan.seq_len if plan.scenario == 3 else 0,
        numBlocks=plan.num_blocks, blockSize=plan.block_size, typeByte=elem, typeByteSlot=idx,
        kStride=plan.key_stride or 0, vStride=plan.value_stride or 0, kOffset=plan.key_offset or 0,
        vOffset=plan.value_offset or 0, kHandleNumPerLoop=0, vHandleNumPerLoop=0, kLoopNum=0, vLoopNum=0,
        kTailHandleNum=0, vTailHandleNum=0, copyFp16Num=0, addNumPerLoop=0)
    if compress:
        tasks = plan.batch * plan.num_heads
        fields["numTokens"] = tasks
        # seq_lens whole, plus one chunk each of slot / compress_lens / compress_seq_offset
        control = _round_up(plan.batch * idx, BLOCK_BYTES) + 3 * CONTROL_CHUNK_BYTES
        ub = _ub_size(chip, control, over.get("ubSize"))
        fields.update(_compress_plan(template, plan, ub, status))
        work = tasks * (TASK_MULTIPLE if template != TEMPLATE_ALIBI else 1)
        used = min(work, cores)
        fields.update(usedCoreNum=used, blockFactor=work // used, tailBlockFactor=work % used,
                      tilingKey=TILING_ID_TEMPLATE * template)
    else:
        t = plan.num_tokens
        fields["numTokens"] = t
        ub = _ub_size(chip, RESERVED_UB_BYTES, over.get("ubSize"))  # the slots are staged in the reserve
        fields.update(_token_plan(template, plan, ub, status))
        if template == TEMPLATE_NZ:
            factor = _ceil(t, cores)
            used = _ceil(t, factor)
            fields.update(usedCoreNum=used, blockFactor=factor, tailBlockFactor=t - factor * (used - 1))
        else:
            used = min(t, cores)
            fields.update(usedCoreNum=used, blockFactor=t // used, tailBlockFactor=t % used)
    fields["ubSize"] = ub
    return TilingData(**fields)


def _token_plan(template: int, plan, ub: int, status: int) -> dict:
    """Fully-load decision and per-row chunk plan of the Norm/Nct/SISO/NZ templates."""
    elem = plan.elem_bytes
    k_row, v_row = plan.key_token_elems, plan.value_token_elems
    k_bytes, v_bytes = k_row * elem, v_row * elem
    fits = k_bytes + v_bytes <= ub
    if template == TEMPLATE_NZ:
        whole = fits  # tiling.md §5: "fully load" when Nh*(Dk+Dv)*elem <= UB-1KB
    else:
        aligned = k_bytes % BLOCK_BYTES == 0 and v_bytes % BLOCK_BYTES == 0
        whole = fits and aligned and plan.num_tokens < SMALL_TOKEN
    tensors = 2 if plan.has_value else 1
    chunk = _round_down(ub // (BUFFER_NUM * tensors), BLOCK_BYTES)
    if chunk < BLOCK_BYTES:
        raise _fail(status, f"ubSize = {ub} leaves no 32-byte chunk per buffer")
    kh, kl, kt = _row_plan(k_row, elem, chunk, whole)
    vh, vl, vt = _row_plan(v_row, elem, chunk, whole) if plan.has_value else (0, 0, 0)
    return dict(kHandleNumPerLoop=kh, kLoopNum=kl, kTailHandleNum=kt, vHandleNumPerLoop=vh, vLoopNum=vl,
                vTailHandleNum=vt, tilingKey=TILING_ID_TEMPLATE * template + (TILING_ID_FULL if whole else 0))


def _compress_plan(template: int, plan, ub: int, status: int) -> dict:
    """Rows per copy loop (copyFp16Num elements per buffer) and rows per mean batch (Rope)."""
    elem, d = plan.elem_bytes, plan.k_head_size
    pitch = _round_up(d * elem, BLOCK_BYTES)  # one token row in UB, padded to 32 bytes
    if template == TEMPLATE_ALIBI:  # one buffer, copy in then out (compress_alibi.h)
        copy_bytes = _round_down(ub, BLOCK_BYTES)
        add = 0
    elif template == TEMPLATE_OMNI:  # ping/pong copy buffers
        copy_bytes = _round_down(ub // BUFFER_NUM, BLOCK_BYTES)
        add = 0
    else:  # Rope: half the UB for ping/pong copies, half for the mean (module docstring)
        copy_bytes = _round_down(ub // (2 * BUFFER_NUM), BLOCK_BYTES)
        mean_bytes = ub - BUFFER_NUM * copy_bytes
        fp32_pitch = pitch // elem * 4  # the row in fp32
        fixed = 2 * fp32_pitch + pitch  # sum, count, output token
        per_row = BUFFER_NUM * (pitch + fp32_pitch)  # ping/pong input rows and their fp32 casts
        add = min((mean_bytes - fixed) // per_row, MAX_BLOCK_COUNT) if mean_bytes > fixed else 0
        if add < 1:
            raise _fail(status, f"Rope: a k_head_size = {d} row does not fit the mean "
                                                      f"buffers of ubSize = {ub} bytes")
    rows = min(copy_bytes // pitch, MAX_BLOCK_COUNT)
    if rows < 1:
        raise _fail(status, f"a k_head_size = {d} row ({pitch} bytes padded) does not "
                                                  f"fit a copy buffer of {copy_bytes} bytes (ubSize = {ub})")
    return dict(copyFp16Num=copy_bytes // elem, addNumPerLoop=add, kHandleNumPerLoop=rows)
