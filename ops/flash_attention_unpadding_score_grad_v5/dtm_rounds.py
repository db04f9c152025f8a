"""SameAB IS_DTM rounds as a per-core recurrence (estimate mode, docs/fag.md "Estimate mode").

Why: a period of an IS_DTM launch (up to a round's first SyncAll) ends when the last core's cube has finished
its Cube23 and the last AIV its vector pass, whichever is later. The cube runs on through the reduction before
(its next Cube1, then the Cube23), so a cube-bound period is the cube's work less that reduction, and which
cores start it early depends on which had light sections in the round before. A sample of rounds that are not
neighbours in the launch pairs other rounds and other light cores, so its periods are no launch period (S
5983/2028/5201: the sample's period of rounds 16 and 17 read 129.5k cycles, the launch's 100.5k). What a sample
does measure without that bias is each section's own work: its Cube1 and Cube23 on the core's cube and its
vector pass on the core's AIVs, read off the cross-core flags (``section_costs``). The launch's rounds are then
re-run as the kernel's ring (``replay_rounds``): per core, Cube1(0), Cube1(1), Cube23(0), Cube1(2), Cube23(1),
...; a vector pass starts after the reduction before and its Cube1; a Cube23 after the next Cube1 and its vector
pass; a round's first SyncAll after the last Cube23 and the last vector pass (``sync_gaps``), the second after the
reduction. Sections the sample did not run take the mean costs of the sampled sections of their class
(``launch_costs``).
"""
from __future__ import annotations

import numpy as np

#: the sample's first tasks run in the launch's fill (Cube1 beside the prologue and the first reduction; S 2477
#: N 16/8 D 256: Cube1 70-78k cycles a section there, 45-47k later): they stand for the launch's first rounds only,
#: as its last task (its Cube23 alone, no next Cube1 beside it: S 5983/2028/5201 126k cycles, 145-173k before) for
#: the last round
HEAD = 3


def _ring_positions(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Positions of Cube1(t) and Cube23(t), t < n, in a core's sequence of cube flags (and of its AIVs' waits):
    Cube1(0), Cube1(1), Cube23(0), Cube1(2), Cube23(1), ..., Cube23(n - 1)."""
    t = np.arange(n)
    c1 = np.where(t < 2, t, 2 * t - 1)
    return c1, np.where(t < n - 1, 2 * t + 2, 2 * n - 1)


def section_costs(trace, block_dim: int, tasks: list[int]):
    """(C1, C23, V, cube_done, vec_done): per core and task, the cube's Cube1 and Cube23 and the slower AIV's vector
    pass, in cycles, and when each Cube23 set its flag and each vector pass ended. Read off the cross-core flags: the
    cube sets one per Cube1 and one per Cube23 to each AIV; an AIV waits once per Cube1 (before its pass) and once per
    Cube23 (before the SyncAll); the cube waits once per Cube23 (for the pass). A Cube1 runs from the cube's flag
    before it (the first from cycle 0), a Cube23 from the later of its wait and the Cube1 before it (the cube issues
    ahead of its pipes), a pass from its wait to the AIV's next one. None where a core's flags do not follow that
    ring. *tasks*: sections per core."""
    c, f = trace.columns, trace.flows
    if "CrossCoreWaitFlag" not in trace.names or not len(f.get("label_id", ())):
        return None
    xl = trace.names.index("CrossCoreWaitFlag")
    n_max = max(tasks) if tasks else 0
    shape = (block_dim, n_max)
    C1, C23, V = np.zeros(shape), np.zeros(shape), np.zeros(shape)
    done, vdone = np.full(shape, np.nan), np.full(shape, np.nan)
    arrow = (f["label_id"] == xl) & (f["src_sub"] == 0) & (f["dst_sub"] == 1)
    a_core, a_set = f["src_core"][arrow], f["set_cycle"][arrow].astype(float)
    wait = c["name_id"] == xl
    w_core, w_sub = c["core"][wait], c["sub_core"][wait]
    w_start, w_end = c["start"][wait].astype(float), c["end"][wait].astype(float)
    for core in range(block_dim):
        n = tasks[core]
        if not n:
            continue
        sets = np.sort(a_set[a_core == core])
        mine = w_core == core
        cube_waits = np.sort(w_end[mine & (w_sub == 0)])
        if len(sets) != 2 * n or len(cube_waits) != n:
            return None
        p1, p23 = _ring_positions(n)
        c1_done, c23_done = sets[p1], sets[p23]
        before = np.concatenate(([0.0], c1_done[:1], c23_done[:max(0, n - 2)]))[:n]
        C1[core, :n] = c1_done - before
        nxt = np.concatenate((c1_done[1:], [-np.inf]))
        C23[core, :n] = c23_done - np.maximum(cube_waits, nxt)
        done[core, :n] = c23_done
        for sub in (1, 2):
            rows = mine & (w_sub == sub)
            order = np.argsort(w_start[rows], kind="stable")
            ws, we = w_start[rows][order], w_end[rows][order]
            if len(ws) != 2 * n:
                return None
            # pass t: from its wait (the Cube1 flag) to the next wait (pass 1's for pass 0, else Cube23(t - 1)'s)
            nxt_wait = np.where(np.arange(n) == 0, p1[1] if n > 1 else p23[0], p23[np.maximum(np.arange(n) - 1, 0)])
            V[core, :n] = np.maximum(V[core, :n], ws[nxt_wait] - we[p1])
            vdone[core, :n] = np.fmax(vdone[core, :n], ws[nxt_wait])
    return C1, C23, V, done, vdone


def sync_gaps(stamps: np.ndarray, done: np.ndarray, vdone: np.ndarray) -> tuple[float, float]:
    """(after the last Cube23, after the last vector pass): the least cycles from each to the sample's first
    SyncAll of a round (the flag's latency and SyncAll; the pass also drains its pipes), over its periods. A period
    t (t = 1 .. K) waits for Cube23(t - 1) and, but the last, pass t."""
    k = (len(stamps) - 1) // 2
    first = np.asarray(stamps, float)[1::2]
    cube = [first[t - 1] - np.nanmax(done[:, t - 1]) for t in range(1, k + 1)]
    vec = [first[t - 1] - np.nanmax(vdone[:, t]) for t in range(1, k) if t < done.shape[1]]
    return float(min(cube)), float(min(vec)) if vec else float(min(cube))


def launch_costs(keys: np.ndarray, classes: np.ndarray, block_dim: int, rounds: list[int],
                 measured: np.ndarray) -> np.ndarray:
    """(block_dim, R) costs of the launch's sections (round r, core c: section r * block_dim + c; 0 where none) from
    *measured* (block_dim, K): the sample's, its task i being launch round rounds[i]. A sampled section keeps its
    own; the sample's first HEAD tasks and its last stand for those launch rounds only (where they are those
    rounds); any other section takes the mean of the other sampled sections of its class (*keys*: a row per
    section, its area and masked blocks) in rounds of its round's class (*classes*: a section's costs follow what
    the other cores run beside it), else in any round, else the least-squares plane over them."""
    sections = len(keys)
    total = -(-sections // block_dim)
    out = np.full((block_dim, total), np.nan)
    pool_g, pool_y = [], []
    for i, r in enumerate(rounds):
        g = r * block_dim + np.arange(block_dim)
        ok = g < sections
        if i < HEAD or i == len(rounds) - 1:  # the fill's or the end's phase: that launch round's only
            if r == i or (i == len(rounds) - 1 and r == total - 1):
                out[ok, r] = measured[ok, i]
            if len(rounds) > HEAD + 1:
                continue
        out[ok, r] = measured[ok, i]
        pool_g.append(g[ok])
        pool_y.append(measured[ok, i])
    pg, py = np.concatenate(pool_g), np.concatenate(pool_y)
    kid = key_ids(keys)
    nk = int(kid.max()) + 1
    by_key = np.bincount(kid[pg], py, nk) / np.maximum(np.bincount(kid[pg], minlength=nk), 1)
    seen_key = np.bincount(kid[pg], minlength=nk) > 0
    both = classes[np.arange(sections) // block_dim].astype(np.int64) * nk + kid
    held, inv = np.unique(both[pg], return_inverse=True)
    by_both = np.bincount(inv.ravel(), py) / np.bincount(inv.ravel())
    at = np.minimum(np.searchsorted(held, both), len(held) - 1)
    design = np.column_stack([np.ones(sections), keys])
    cols = [0] + [j + 1 for j in range(keys.shape[1]) if len(np.unique(keys[pg, j])) > 1]
    coef = np.linalg.lstsq(design[pg][:, cols], py, rcond=None)[0]
    value = np.where(held[at] == both, by_both[at],
                     np.where(seen_key[kid], by_key[kid], np.maximum(design[:, cols] @ coef, 0.0)))
    flat = np.zeros(total * block_dim)
    flat[:sections] = value
    return np.where(np.isnan(out), flat.reshape(total, block_dim).T, out)


def key_ids(keys: np.ndarray) -> np.ndarray:
    """An id per row of *keys*, equal rows equal ids (np.unique's of the rows). Rows of two non-negative whole
    numbers (area, masked blocks) are numbered through one number each, for performance reasons: np.unique over
    rows sorts them as records, 0.19 s of T = 64K deterministic's 66,000 sections (four calls a launch estimate)."""
    if keys.ndim == 2 and keys.shape[1] == 2 and np.all(keys >= 0) and np.all(keys == np.floor(keys)) \
            and float(keys.max(initial=0)) < 2 ** 26:
        one = keys[:, 0] * (float(keys[:, 1].max(initial=0)) + 1.0) + keys[:, 1]
        return np.unique(one, return_inverse=True)[1].ravel()
    return np.unique(keys, axis=0, return_inverse=True)[1].ravel()


def replay_rounds(C1: np.ndarray, C23: np.ndarray, V: np.ndarray, reductions: np.ndarray, start: float,
                  cube_gap: float, vec_gap: float) -> np.ndarray:
    """The launch's SyncAll stamps after the prologue's (2 R of them: each round's first and second) of the ring
    re-run from *start* (the prologue's SyncAll) on per-core costs (block_dim, R); *reductions*: each round's
    reduction cycles; the gaps as sync_gaps."""
    bd, total = C1.shape
    c1_end = np.zeros((bd, total))
    c23_end = np.zeros((bd, total))
    vec_end = np.zeros((bd, total))
    c1_end[:, 0] = C1[:, 0]
    if total > 1:
        c1_end[:, 1] = c1_end[:, 0] + C1[:, 1]
    vec_end[:, 0] = np.maximum(start, c1_end[:, 0]) + V[:, 0]
    stamps = np.zeros(2 * total)
    second = start
    for t in range(1, total + 1):
        if t < total:
            ready = vec_end[:, 0] if t == 1 else second
            vec_end[:, t] = np.maximum(ready, c1_end[:, t]) + V[:, t]
        after = c1_end[:, t] if t < total else c23_end[:, t - 2] if t >= 2 else c1_end[:, 0]
        c23_end[:, t - 1] = np.maximum(after, vec_end[:, t - 1]) + C23[:, t - 1]
        if t + 1 < total:
            c1_end[:, t + 1] = c23_end[:, t - 1] + C1[:, t + 1]
        first = max(c23_end[:, t - 1].max(), second) + cube_gap  # the AIVs reach it after the reduction before
        if t < total:
            first = max(first, vec_end[:, t].max() + vec_gap)
        second = first + reductions[t - 1]
        stamps[2 * t - 2], stamps[2 * t - 1] = first, second
    return stamps
