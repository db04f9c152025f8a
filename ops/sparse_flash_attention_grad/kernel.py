"""SparseFlashAttentionGrad device kernel, written like the CANN ``sparse_flash_attention_grad_bs1_basic``.

docs/sfag.md is the contract. Each AI Core takes query tokens c, c + blockDim, ... (all G heads of a
token are the cube's M). A token's examined index slots are cut into chunks of 512 gathered rows; per
chunk i of a core (software pipelined by one chunk, flags in brackets):

    AIV0: Gather(i): K[idx*bs..] (+ K_rope) and V rows -> selK/selV workspace      [GATHER -> AIC]
    AIC : Cube12(i): S = [Q|Qr] selK^T, dP = dO selV^T (fp32) -> workspace          [C12 -> AIV]
    AIC : Cube345(i-1): dV rows += P^T dO, dK rows += dS^T [Q|Qr] (Fixpipe atomic scatter-add),
          dQ += dS selK accumulated in L0C over the chunk, one Fixpipe atomic add per
          128-column slice                                                          [C345 -> AIV]
    AIV0: Vec(i-1): P = exp(S*scale [masked] - max) / sum -> P (input dtype); dS = P (dP - rowsum) -> dS
                                                                                    [VEC -> AIC]
AIV1 of each pair only takes part in the flags (tiling.md §4). Afterwards every AIV (SyncAll) runs the
post step: dq = cast(dqWS * scale), dk = cast(dkWS * scale), dv = cast(dvWS), rope columns split off.

Atomic adds are committed in simulated-time order (npusim SetAtomicAdd), so the non-deterministic
result is reproducible per input; ``LaunchResult.atomic_log`` records the order the golden replays.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from npusim.kernel import (
    ASCEND_IS_AIC,
    Cast,
    CrossCoreSetFlag,
    CrossCoreWaitFlag,
    DataCopy,
    DataCopyExtParams,
    DataCopyPad,
    Duplicate,
    Exp,
    Fixpipe,
    FixpipeParamsV220,
    GetBlockIdx,
    GetBlockNum,
    GetSubBlockIdx,
    HardEvent,
    Mul,
    Muls,
    Nd2NzParams,
    Pipe,
    PipeBarrier,
    RoundMode,
    SetAtomicAdd,
    SetAtomicNone,
    SetFlag,
    SyncAll,
    TBuf,
    TPipe,
    TPosition,
    TQue,
    WaitFlag,
)
from ops.common.cube_tiles import CubeTiles, c16
from ops.common.rowops import (
    BroadcastRows,
    CopyRowsOut,
    RowBroadcast,
    RowReduce,
)
from ops.sparse_flash_attention_grad.tiling import (
    GATHER_ROWS,
    K_CHUNK,
    N_CHUNK,
    PIECE_ROWS,
    POST_ROWS,
    SLICE_ROWS,
    SfagTilingData,
)

FLAG_GATHER, FLAG_C12, FLAG_VEC, FLAG_C345 = 1, 2, 3, 4  # cross-core flag ids
F32 = np.dtype(np.float32)
MASKED = float("-inf")  # masked score (tiling.md §4: Duplicate -inf in the bit-mask range)
L0C_BUFFER_BYTES = 64 * 1024
BUFFER_NUM = 2
LANES = 64  # fp32 lanes of one 256-byte repeat


@dataclass(frozen=True)
class SfagKernelArgs:
    """Host control data: batch offsets, the indices (real data in every mode), slots per token."""

    tokenBatch: np.ndarray  # [T1] batch of each token
    cuQ: np.ndarray  # [B + 1]
    cuKv: np.ndarray  # [B + 1]
    seqQ: np.ndarray
    seqKv: np.ndarray
    indices: np.ndarray  # [T1, K]
    slots: np.ndarray  # [T1] examined slots (before the first -1)
    inDtype: np.dtype


@dataclass(frozen=True)
class Chunk:
    """One chunk of a token: its slots' block indices, gathered rows per slot, dead columns."""

    token: int
    rows: int  # slots * bs (columns of S)
    blocks: tuple  # (slot j, block index v, gathered rows) for each slot whose rows exist
    dead: tuple  # (64-column group, bit word) of columns masked to -inf


def chunks_of_token(args: SfagKernelArgs, til: SfagTilingData, t: int) -> list:
    """The chunks of token *t* (docs/sfag.md "Index semantics"): a slot's block v covers key rows
    [v*bs, v*bs + bs) of its batch; rows past S2 are not gathered (zero rows); gathered rows at or past
    the causal threshold (sparse_mode 3), like never-gathered ones, are masked."""
    bs, cs = til.sparseBlockSize, til.chunkSlots
    b = int(args.tokenBatch[t])
    s2 = int(args.seqKv[b])
    s1 = t - int(args.cuQ[b])
    thr = s2 if til.sparseMode == 0 else min(s2, s1 + s2 - int(args.seqQ[b]) + 1)
    n = int(args.slots[t])
    row = args.indices[t]
    nblk = -(-s2 // bs)
    out = []
    for c0 in range(0, n, cs):
        m = min(cs, n - c0)
        blocks, live = [], np.zeros(m * bs, bool)
        for j in range(m):
            v = int(row[c0 + j])
            if 0 <= v < nblk:
                rows = min(bs, s2 - v * bs)
                blocks.append((j, v, rows))
                live[j * bs:j * bs + max(0, min(rows, thr - v * bs))] = True
        dead = []
        for g0 in range(0, m * bs, LANES):
            seg = ~live[g0:g0 + LANES]
            if seg.any():
                dead.append((g0 // LANES, int(np.sum(seg.astype(np.uint64) << np.arange(seg.size, dtype=np.uint64)))))
        out.append(Chunk(t, m * bs, tuple(blocks), tuple(dead)))
    return out


class KernelSparseFlashAttentionGrad:
    def Init(self, query, key, value, dOut, out, softmaxMax, softmaxSum, queryRope, keyRope, dQuery, dKey, dValue,
             dQueryRope, dKeyRope, workspace, tiling: SfagTilingData, args: SfagKernelArgs):
        self.t, self.a = tiling, args
        self.qGm, self.kGm, self.vGm, self.doGm, self.oGm = query, key, value, dOut, out
        self.maxGm, self.sumGm, self.qrGm, self.krGm = softmaxMax, softmaxSum, queryRope, keyRope
        self.dqGm, self.dkGm, self.dvGm, self.dqrGm, self.dkrGm = dQuery, dKey, dValue, dQueryRope, dKeyRope
        self.inDt = np.dtype(args.inDtype)
        self.isz = self.inDt.itemsize
        ti = tiling
        self.G, self.D, self.Dr, self.Dt = ti.gSize, ti.dSize, ti.dRope, ti.dTotal
        self.core = GetBlockIdx() if ASCEND_IS_AIC() else GetBlockIdx() // 2
        self.chunks = []
        for tok in range(self.core, ti.t1Size, ti.blockDim):
            self.chunks.extend(chunks_of_token(args, ti, tok))
        base = self.core * ti.coreWorkspaceBytes
        cr, g, isz = ti.chunkRows, self.G, self.isz
        self.selK = [workspace[base + ti.selKOffset + i * cr * self.Dt * isz].ReinterpretCast(self.inDt) for i in (0, 1)]
        self.selV = [workspace[base + ti.selVOffset + i * cr * self.D * isz].ReinterpretCast(self.inDt) for i in (0, 1)]
        self.sWs = [workspace[base + ti.sOffset + i * g * cr * 4].ReinterpretCast(F32) for i in (0, 1)]
        self.dpWs = [workspace[base + ti.dpOffset + i * g * cr * 4].ReinterpretCast(F32) for i in (0, 1)]
        self.pWs = [workspace[base + ti.pOffset + i * g * cr * isz].ReinterpretCast(self.inDt) for i in (0, 1)]
        self.dsWs = [workspace[base + ti.dsOffset + i * g * cr * isz].ReinterpretCast(self.inDt) for i in (0, 1)]
        self.dqWs = workspace[ti.dqOffset].ReinterpretCast(F32)
        self.dkWs = workspace[ti.dkOffset].ReinterpretCast(F32)
        self.dvWs = workspace[ti.dvOffset].ReinterpretCast(F32)
        self.pipe = TPipe()

    def Process(self):
        ti = self.t
        if not ti.mainLoop:
            self.chunks = []
        if ASCEND_IS_AIC():
            self.ProcessCube()
            return
        if ti.prePost:
            self.ZeroWorkspace()
            SyncAll()
        if GetSubBlockIdx() == 0:
            self.ProcessVector()
        else:
            self.FollowFlags()
        if ti.prePost:
            SyncAll()
            self.Post()

    # ------------------------------------------------------------------------------------- cube (AIC)
    def ProcessCube(self):
        isz, g = self.isz, self.G
        self.tiles = CubeTiles(self.pipe, self.inDt)
        self.qQue, self.doQue = TQue(TPosition.A1, 1), TQue(TPosition.A1, 1)
        self.pieceQue = TQue(TPosition.B1, BUFFER_NUM)
        self.cQue = TQue(TPosition.CO1, BUFFER_NUM)
        self.pipe.InitBuffer(self.qQue, 1, c16(g) * self.Dt * isz)
        self.pipe.InitBuffer(self.doQue, 1, c16(g) * self.D * isz)
        self.pipe.InitBuffer(self.pieceQue, BUFFER_NUM, max(PIECE_ROWS * self.Dt, c16(g) * PIECE_ROWS) * isz)
        self.pipe.InitBuffer(self.cQue, BUFFER_NUM, L0C_BUFFER_BYTES)
        self.qL1 = self.doL1 = None
        self.token = -1
        n = len(self.chunks)
        for i in range(n):
            # a new token replaces [Q|Qr] and dO in L1: the previous chunk's cube345 goes first
            drained = i >= 1 and self.chunks[i].token != self.chunks[i - 1].token
            if drained:
                self.Cube345Step(i - 1)
            CrossCoreWaitFlag(FLAG_GATHER)
            self.LoadToken(self.chunks[i].token)
            self.Cube12(i)
            CrossCoreSetFlag(FLAG_C12, Pipe.FIX)
            if i >= 1 and not drained:
                self.Cube345Step(i - 1)
        if n:
            self.Cube345Step(n - 1)
        if self.t.deterministic:
            for _ in range(n, self.t.roundCount):
                self.OrderedTurns(None)
        if self.qL1 is not None:
            self.qQue.FreeTensor(self.qL1)
            self.doQue.FreeTensor(self.doL1)

    def Cube345Step(self, i: int):
        if self.t.deterministic:
            self.OrderedTurns(i)
            return
        CrossCoreWaitFlag(FLAG_VEC)
        SetAtomicAdd(np.float32)
        self.Cube345(i)
        SetAtomicNone()
        CrossCoreSetFlag(FLAG_C345, Pipe.FIX)

    def OrderedTurns(self, i):
        """Deterministic variant, one round: the cores take turns in block order (a SyncAll of the AICs
        after each turn), so every scatter-add lands in (round, core) order whatever the timing.
        *i*: this core's chunk of the round, or None when it has no chunk left."""
        for turn in range(self.t.blockDim):
            if turn == self.core and i is not None:
                CrossCoreWaitFlag(FLAG_VEC)
                SetAtomicAdd(np.float32)
                self.Cube345(i)
                SetAtomicNone()
                CrossCoreSetFlag(FLAG_C345, Pipe.FIX)
            SyncAll()

    def LoadToken(self, tok: int):
        """[Q | Q_rope] and dO of token *tok* into L1 (NZ), once per token."""
        if tok == self.token:
            return
        g, D, Dr = self.G, self.D, self.Dr
        if self.qL1 is not None:
            self.qQue.FreeTensor(self.qL1)
            self.doQue.FreeTensor(self.doL1)
        qL1 = self.qQue.AllocTensor(self.inDt)
        DataCopy(qL1, self.qGm[tok * g * D], Nd2NzParams(1, g, D, 0, D, c16(g), 1, 0))
        if Dr:
            DataCopy(qL1[(D // 16) * c16(g) * 16], self.qrGm[tok * g * Dr], Nd2NzParams(1, g, Dr, 0, Dr, c16(g), 1, 0))
        self.qQue.EnQue(qL1)
        self.qL1 = self.qQue.DeQue(self.inDt)
        doL1 = self.doQue.AllocTensor(self.inDt)
        DataCopy(doL1, self.doGm[tok * g * D], Nd2NzParams(1, g, D, 0, D, c16(g), 1, 0))
        self.doQue.EnQue(doL1)
        self.doL1 = self.doQue.DeQue(self.inDt)
        self.token = tok

    def _load_piece(self, src, rows: int, cols: int, pitch: int):
        """A rows x cols window of a workspace matrix (row pitch *pitch*) into L1 as NZ."""
        pL1 = self.pieceQue.AllocTensor(self.inDt)
        DataCopy(pL1, src, Nd2NzParams(1, rows, cols, 0, pitch, c16(rows), 1, 0))
        self.pieceQue.EnQue(pL1)
        return self.pieceQue.DeQue(self.inDt)

    def _fix(self, dst, cL0, rows: int, cols: int, src_rows: int, pitch: int):
        self.cQue.EnQue(cL0)
        cL0 = self.cQue.DeQue(F32)
        Fixpipe(dst, cL0, FixpipeParamsV220(nSize=cols, mSize=rows, srcStride=c16(src_rows), dstStride=pitch))
        self.cQue.FreeTensor(cL0)

    def Cube12(self, i: int):
        """S = [Q|Qr] selK^T and dP = dO selV^T, piece by piece of 64 gathered rows."""
        ch, ti, g, D, Dt = self.chunks[i], self.t, self.G, self.D, self.Dt
        cr, mB = ti.chunkRows, c16(g) // 16
        for p0 in range(0, ch.rows, PIECE_ROWS):
            pr = min(PIECE_ROWS, ch.rows - p0)
            for src, width, aL1, ws in ((self.selK[i % 2], Dt, self.qL1, self.sWs[i % 2]),
                                        (self.selV[i % 2], D, self.doL1, self.dpWs[i % 2])):
                bL1 = self._load_piece(src[p0 * width], pr, width, width)
                cL0 = self.cQue.AllocTensor(F32)
                for kc in range(0, width, K_CHUNK):
                    kcols = min(K_CHUNK, width - kc)
                    self.tiles.SplitA(aL1, mB, 0, g, kc, kcols)
                    self.tiles.SplitBTransposed(bL1, c16(pr) // 16, kc, kcols)
                    self.tiles.Compute(cL0, g, pr, kcols, kc == 0)
                self._fix(ws[p0], cL0, g, pr, g, cr)
                self.pieceQue.FreeTensor(bL1)

    def Cube345(self, i: int):
        """Per piece: dV rows += P^T dO and dK rows += dS^T [Q|Qr] (Fixpipe atomic scatter-add). Then dQ of
        the chunk: per 128-column slice of D + Dr, dS selK accumulated in L0C over the chunk's pieces and
        added once (Fixpipe atomic) into the token's dq rows (tiling.md §4 cube3: "dQ += dS Ksel accumulated
        in L0C over the chunk's blocks ... D split into loops")."""
        ch, ti, g, D, Dt = self.chunks[i], self.t, self.G, self.D, self.Dt
        a, cr, kB = self.a, ti.chunkRows, c16(g) // 16
        bs = ti.sparseBlockSize
        kv0 = int(a.cuKv[int(a.tokenBatch[ch.token])])
        for p0 in range(0, ch.rows, PIECE_ROWS):
            pr = min(PIECE_ROWS, ch.rows - p0)
            # the gathered blocks of this piece: (first row in the piece, rows, destination row)
            dests = []
            for j, v, rows in ch.blocks:
                r0 = j * bs
                if p0 <= r0 < p0 + pr:
                    dests.append((r0 - p0, rows, kv0 + v * bs))
            for src, dstWs, width, bL1 in ((self.pWs[i % 2], self.dvWs, D, self.doL1),
                                           (self.dsWs[i % 2], self.dkWs, Dt, self.qL1)):
                aL1 = self._load_piece(src[p0], g, pr, cr)
                for nc in range(0, width, N_CHUNK):
                    ncols = min(N_CHUNK, width - nc)
                    cL0 = self.cQue.AllocTensor(F32)
                    self.tiles.SplitATransposed(aL1, kB, pr, g)
                    self.tiles.SplitB(bL1[(nc // 16) * c16(g) * 16], kB, g, ncols)
                    self.tiles.Compute(cL0, pr, ncols, g, True)
                    self.cQue.EnQue(cL0)
                    cL0 = self.cQue.DeQue(F32)
                    for lrow, rows, drow in dests:
                        Fixpipe(dstWs[drow * width + nc], cL0[lrow * 16],
                                FixpipeParamsV220(nSize=ncols, mSize=rows, srcStride=c16(pr), dstStride=width))
                    self.cQue.FreeTensor(cL0)
                self.pieceQue.FreeTensor(aL1)
        for nc in range(0, Dt, N_CHUNK):
            ncols = min(N_CHUNK, Dt - nc)
            cL0 = self.cQue.AllocTensor(F32)
            for p0 in range(0, ch.rows, PIECE_ROWS):
                pr = min(PIECE_ROWS, ch.rows - p0)
                dsL1 = self._load_piece(self.dsWs[i % 2][p0], g, pr, cr)
                kL1 = self._load_piece(self.selK[i % 2][p0 * Dt + nc], pr, ncols, Dt)
                self.tiles.SplitA(dsL1, kB, 0, g, 0, pr)
                self.tiles.SplitB(kL1, c16(pr) // 16, pr, ncols)
                self.tiles.Compute(cL0, g, ncols, pr, p0 == 0)
                self.pieceQue.FreeTensor(kL1)
                self.pieceQue.FreeTensor(dsL1)
            self._fix(self.dqWs[ch.token * g * Dt + nc], cL0, g, ncols, g, Dt)

    # ------------------------------------------------------------------------------------- vector (AIV)
    def ZeroWorkspace(self):
        """VecPre: every AIV zero-fills its share of the dq/dk/dv fp32 accumulators."""
        ti = self.t
        total = (ti.dvOffset - ti.dqOffset) // 4 + ti.t2Size * self.D
        buf = TBuf()
        pipe = TPipe()
        step = 8192
        pipe.InitBuffer(buf, step * 4)
        z = buf.Get(F32)
        Duplicate(z, 0.0, step)
        SetFlag(HardEvent.V_MTE3, 0)
        WaitFlag(HardEvent.V_MTE3, 0)
        share = -(-total // GetBlockNum() // 8) * 8
        lo = GetBlockIdx() * share
        base = self.dqWs
        for e in range(lo, min(lo + share, total), step):
            DataCopy(base[e], z, min(step, min(lo + share, total) - e))
        pipe.Reset()

    def FollowFlags(self):
        """AIV1: the pair's flag protocol without work (tiling.md §4)."""
        n = len(self.chunks)
        for i in range(n + 1):
            if i < n:
                if i >= 2:
                    CrossCoreWaitFlag(FLAG_C345)
                CrossCoreSetFlag(FLAG_GATHER, Pipe.MTE3)
            if i >= 1:
                CrossCoreWaitFlag(FLAG_C12)
                CrossCoreSetFlag(FLAG_VEC, Pipe.MTE3)
        for _ in range(min(n, 2)):
            CrossCoreWaitFlag(FLAG_C345)

    def ProcessVector(self):
        ti, g, isz = self.t, self.G, self.isz
        p = self.pipe
        self.stageK, self.stageV, self.sBuf, self.dpBuf, self.lowBuf = TBuf(), TBuf(), TBuf(), TBuf(), TBuf()
        p.InitBuffer(self.stageK, GATHER_ROWS * self.Dt * isz)
        p.InitBuffer(self.stageV, GATHER_ROWS * self.D * isz)
        p.InitBuffer(self.sBuf, SLICE_ROWS * ti.chunkRows * 4)
        p.InitBuffer(self.dpBuf, SLICE_ROWS * ti.chunkRows * 4)
        p.InitBuffer(self.lowBuf, SLICE_ROWS * ti.chunkRows * isz)
        g8 = -(-g // 8) * 8
        self.stat = {}
        for name in ("max8", "sum8", "rs8"):
            self.stat[name] = TBuf()
            p.InitBuffer(self.stat[name], g8 * 32)
        self.vals, self.acc = TBuf(), TBuf()
        p.InitBuffer(self.vals, -(-g8 * 4 // 32) * 32)
        p.InitBuffer(self.acc, SLICE_ROWS * LANES * 4)
        self.token = -1
        n = len(self.chunks)
        for i in range(n + 1):
            if i < n:
                if i >= 2:
                    CrossCoreWaitFlag(FLAG_C345)
                self.Gather(i)
                CrossCoreSetFlag(FLAG_GATHER, Pipe.MTE3)
            if i >= 1:
                CrossCoreWaitFlag(FLAG_C12)
                self.SoftmaxGrad(i - 1)
                CrossCoreSetFlag(FLAG_VEC, Pipe.MTE3)
        for _ in range(min(n, 2)):
            CrossCoreWaitFlag(FLAG_C345)
        self.pipe.Reset()

    def _sync(self, event: HardEvent):
        SetFlag(event, 0)
        WaitFlag(event, 0)

    def Gather(self, i: int):
        """The chunk's selected K (+K_rope) and V rows -> selK / selV, GATHER_ROWS rows at a time."""
        ch, ti, a = self.chunks[i], self.t, self.a
        D, Dr, Dt, bs, isz = self.D, self.Dr, self.Dt, ti.sparseBlockSize, self.isz
        kv0 = int(a.cuKv[int(a.tokenBatch[ch.token])])
        got = {j: (v, rows) for j, v, rows in ch.blocks}
        sk, sv = self.stageK.Get(self.inDt), self.stageV.Get(self.inDt)
        for g0 in range(0, ch.rows, GATHER_ROWS):
            gr = min(GATHER_ROWS, ch.rows - g0)
            zeros = []
            for r in range(g0, g0 + gr, bs) if bs <= GATHER_ROWS else [g0]:
                j, off = r // bs, r % bs
                v, rows = got.get(j, (None, 0))
                n = min(bs - off, g0 + gr - r)
                take = max(0, min(n, rows - off))
                if take:
                    src = (kv0 + v * bs + off)
                    lr = r - g0
                    DataCopyPad(sk[lr * Dt], self.kGm[src * D], DataCopyExtParams(take, D * isz, 0, (Dt - D) * isz // 32, 0))
                    if Dr:
                        DataCopyPad(sk[lr * Dt + D], self.krGm[src * Dr],
                                    DataCopyExtParams(take, Dr * isz, 0, (Dt - Dr) * isz // 32, 0))
                    DataCopyPad(sv[lr * D], self.vGm[src * D], DataCopyExtParams(take, D * isz, 0, 0, 0))
                if take < n:
                    zeros.append((r - g0 + take, n - take))
            for lr, cnt in zeros:
                Duplicate(sk[lr * Dt], 0.0, cnt * Dt)
                Duplicate(sv[lr * D], 0.0, cnt * D)
            self._sync(HardEvent.MTE2_MTE3)
            self._sync(HardEvent.V_MTE3)
            DataCopy(self.selK[i % 2][g0 * Dt], sk, gr * Dt)
            DataCopy(self.selV[i % 2][g0 * D], sv, gr * D)
            self._sync(HardEvent.MTE3_MTE2)
            self._sync(HardEvent.MTE3_V)

    def LoadTokenStats(self, tok: int):
        """max, sum (inputs) and rowsum(dO * O) of token *tok* as [G, 8] blocks."""
        if tok == self.token:
            return
        g, D, st = self.G, self.D, self.stat
        vals = self.vals.Get(F32)
        for name, gm in (("max8", self.maxGm), ("sum8", self.sumGm)):
            DataCopyPad(vals, gm[tok * g], DataCopyExtParams(1, g * 4, 0, 0, 0))
            self._sync(HardEvent.MTE2_V)
            BroadcastRows(st[name].Get(F32), vals, g)
            self._sync(HardEvent.V_MTE2)
        rs = self.vals.Get(F32)
        lowA = self.stageK.Get(self.inDt)
        lowB = self.stageV.Get(self.inDt)
        fa, fb = self.sBuf.Get(F32), self.dpBuf.Get(F32)
        for r0 in range(0, g, SLICE_ROWS):
            sr = min(SLICE_ROWS, g - r0)
            DataCopy(lowA, self.doGm[(tok * g + r0) * D], sr * D)
            DataCopy(lowB, self.oGm[(tok * g + r0) * D], sr * D)
            self._sync(HardEvent.MTE2_V)
            Cast(fa, lowA, RoundMode.CAST_NONE, sr * D)
            Cast(fb, lowB, RoundMode.CAST_NONE, sr * D)
            PipeBarrier(Pipe.V)
            Mul(fa, fa, fb, sr * D)
            PipeBarrier(Pipe.V)
            RowReduce("sum", rs[r0:], fa, self.acc.Get(F32), sr, D, D)
            PipeBarrier(Pipe.V)
            self._sync(HardEvent.V_MTE2)
        BroadcastRows(st["rs8"].Get(F32), rs, g)
        PipeBarrier(Pipe.V)
        self.token = tok

    def SoftmaxGrad(self, i: int):
        """P and dS of chunk *i*, SLICE_ROWS heads at a time (docs/sfag.md steps 4-9)."""
        ch, ti, g = self.chunks[i], self.t, self.G
        cr = ti.chunkRows
        self.LoadTokenStats(ch.token)
        st = self.stat
        S, dP, low = self.sBuf.Get(F32), self.dpBuf.Get(F32), self.lowBuf.Get(self.inDt)
        cols = ch.rows
        for r0 in range(0, g, SLICE_ROWS):
            sr = min(SLICE_ROWS, g - r0)
            cnt = sr * cr
            DataCopy(S, self.sWs[i % 2][r0 * cr], cnt)
            DataCopy(dP, self.dpWs[i % 2][r0 * cr], cnt)
            self._sync(HardEvent.MTE2_V)
            Muls(S, S, ti.scaleValue, cnt)
            PipeBarrier(Pipe.V)
            for grp, word in ch.dead:
                Duplicate(S[grp * LANES], MASKED, (word, 0), sr, 1, cr * 4 // 32)
            PipeBarrier(Pipe.V)
            RowBroadcast("sub", S, S, st["max8"].Get(F32)[r0 * 8:], sr, cols, cr)
            PipeBarrier(Pipe.V)
            Exp(S, S, cnt)
            PipeBarrier(Pipe.V)
            RowBroadcast("div", S, S, st["sum8"].Get(F32)[r0 * 8:], sr, cols, cr)
            PipeBarrier(Pipe.V)
            Cast(low, S, RoundMode.CAST_ROUND, cnt)
            self._sync(HardEvent.V_MTE3)
            DataCopy(self.pWs[i % 2][r0 * cr], low, cnt)
            self._sync(HardEvent.MTE3_V)
            RowBroadcast("sub", dP, dP, st["rs8"].Get(F32)[r0 * 8:], sr, cols, cr)
            PipeBarrier(Pipe.V)
            Mul(dP, dP, S, cnt)
            PipeBarrier(Pipe.V)
            Cast(low, dP, RoundMode.CAST_ROUND, cnt)
            self._sync(HardEvent.V_MTE3)
            DataCopy(self.dsWs[i % 2][r0 * cr], low, cnt)
            self._sync(HardEvent.MTE3_V)
            self._sync(HardEvent.MTE3_MTE2)

    # ------------------------------------------------------------------------------------- post (all AIVs)
    def Post(self):
        """dq = cast(dqWS * scale), dk = cast(dkWS * scale), dv = cast(dvWS) (CAST_ROUND); rope columns to their
        outputs."""
        ti, D, Dr, Dt = self.t, self.D, self.Dr, self.Dt
        pipe = TPipe()
        fbuf, lbuf = TBuf(), TBuf()
        pipe.InitBuffer(fbuf, POST_ROWS * Dt * 4)
        pipe.InitBuffer(lbuf, POST_ROWS * Dt * self.isz)
        f, low = fbuf.Get(F32), lbuf.Get(self.inDt)
        for ws, rows_total, width, scale, main, rope in (
                (self.dqWs, ti.t1Size * self.G, Dt, True, self.dqGm, self.dqrGm),
                (self.dkWs, ti.t2Size, Dt, True, self.dkGm, self.dkrGm),
                (self.dvWs, ti.t2Size, D, False, self.dvGm, None)):
            share = -(-rows_total // GetBlockNum())
            lo = GetBlockIdx() * share
            for r0 in range(lo, min(lo + share, rows_total), POST_ROWS):
                nr = min(POST_ROWS, min(lo + share, rows_total) - r0)
                DataCopy(f, ws[r0 * width], nr * width)
                self._sync(HardEvent.MTE2_V)
                if scale:
                    Muls(f, f, ti.scaleValue, nr * width)
                    PipeBarrier(Pipe.V)
                # CAST_ROUND as the CANN post (sparse_flash_attention_grad_post.h casts dq, dk and dv with
                # RoundMode::CAST_ROUND), the same rounding as the FA backward's post (FAG fag_post)
                Cast(low, f, RoundMode.CAST_ROUND, nr * width)
                self._sync(HardEvent.V_MTE3)
                CopyRowsOut(main[r0 * D], low, nr, D, width, D)
                if width > D:
                    CopyRowsOut(rope[r0 * Dr], low[D], nr, Dr, width, Dr)
                self._sync(HardEvent.MTE3_V)
                self._sync(HardEvent.MTE3_MTE2)
        pipe.Reset()


def sparse_flash_attention_grad(query, key, value, dOut, out, softmaxMax, softmaxSum, queryRope, keyRope, dQuery,
                                dKey, dValue, dQueryRope, dKeyRope, workspace, tiling: SfagTilingData,
                                args: SfagKernelArgs):
    """Kernel entry, named like the CANN kernel: build the class, Init, Process."""
    op = KernelSparseFlashAttentionGrad()
    op.Init(query, key, value, dOut, out, softmaxMax, softmaxSum, queryRope, keyRope, dQuery, dKey, dValue,
            dQueryRope, dKeyRope, workspace, tiling, args)
    op.Process()
