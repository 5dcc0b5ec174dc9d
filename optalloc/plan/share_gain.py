"""The share-tier gain of a start as the backfill fills the tiers (ShareGain): what each job's
GPUs add to the floors and targets on its project's path, and to its project's debug
allowance, given what the plan holds so far."""

from __future__ import annotations

import numpy as np

from optalloc.model.build import EpochModel
from optalloc.model.constraints.fairshare import (
    debug_allowance,
    debug_jobs,
    lifted_rows,
    tier_bounds,
    tier_values,
    yields_of,
)
from optalloc.model.requirements import share_tier1


class ShareGain:
    """Marginal share-tier objective (floor, then target) of adding a job's GPUs to its
    project's path, as placements fill the tiers (optalloc.model.constraints.fairshare).
    Plain Python on short paths: called for every heap entry of the backfill."""

    def __init__(self, em: EpochModel):
        base = em.__dict__.get("_share_gain_base")
        if base is None:  # once per model: every backfill of its candidate plans reads it
            base = em.__dict__["_share_gain_base"] = _base(em)
        (self.anc, self.col, self.tiers, self.short, self.allow, self.dbg_w, self.tier1,
         self.no_move, self.restart, self.cand_type, self.project, self.gpus, memo_of,
         n_memos, O, S, T) = base
        self.got = [[0.0] * S for _ in range(O)]
        self.dbg = [[0.0] * T for _ in range(O)]
        # gain depends on the job only through its `key` (project, type, GPUs, short), and on
        # the placements only through its path's tiers of that share column: remembered per
        # (top-level org node, share column) until an add there (the backfill re-evaluates
        # many like jobs between two starts; projects under one top-level node share every
        # other ancestor but root)
        memos = [{} for _ in range(n_memos)]
        self._memo = [[memos[i] for i in row] for row in memo_of]

    def add_many(self, jobs: np.ndarray, types: np.ndarray) -> None:
        """add() of every (jobs[i], types[i]) at once, into tiers nothing has filled yet (the
        backfill's start: the plan's keeps and starts; each add is a whole number of GPUs, so
        the sums are exact in any order). The memos are empty: nothing to forget."""
        jobs, types = np.asarray(jobs, np.int64), np.asarray(types, np.int64)
        on = self.tier1[jobs, types]
        jobs, types = jobs[on], types[on]
        if not len(jobs):
            return
        g = np.asarray(self.gpus)[jobs]
        cols = np.asarray(self.col, np.int64)[types]
        got = np.asarray(self.got)
        for p, s, v in zip(*_grouped(np.asarray(self.project)[jobs], cols, g)):
            for o in self.anc[p]:
                got[o, s] += v
        self.got = got.tolist()
        dj = np.asarray(self.short, bool)[jobs] & self.no_move[jobs, types]
        if dj.any():
            dbg = np.asarray(self.dbg)
            for p, t, v in zip(*_grouped(np.asarray(self.project)[jobs[dj]], types[dj], g[dj])):
                dbg[p, t] += v
            self.dbg = dbg.tolist()

    def key(self, j: int, t: int) -> tuple | None:
        """What job j's gain on t depends on (None: unallocated there, no gain)."""
        if not self.tier1[j, t]:
            return None
        return (self.project[j], t, self.gpus[j], self.short[j] and bool(self.no_move[j, t]))

    def gain(self, j: int, t: int) -> float:
        return self.gain_of(self.key(j, t))

    def gain_of(self, key: tuple | None) -> float:
        if key is None:
            return 0.0
        memo = self._memo[key[0]][key[1]]
        out = memo.get(key)
        if out is None:
            out = memo[key] = self._gain(*key)
        return out

    def _gain(self, p: int, t: int, g: float, short: bool) -> float:
        out = 0.0
        s = self.col[t]
        for o in self.anc[p]:
            cur = self.got[o][s]
            for lo, hi, w in self.tiers[o][s]:
                a, b = max(lo, cur), min(hi, cur + g)
                if b > a:
                    out += (b - a) * w
        if short:
            out += max(0.0, min(g, self.allow[p][t] - self.dbg[p][t])) * self.dbg_w[p]
        return out

    def start_gain(self, j: int, c: int) -> float:
        """What job j's start by candidate c adds to the tiers."""
        return 0.0 if self.restart[c] else self.gain(j, self.cand_type[c])

    def add_start(self, j: int, c: int, sign: float = 1.0) -> None:
        """Job j's start by candidate c added to the tiers (sign -1: undone)."""
        if not self.restart[c]:
            self.add(j, self.cand_type[c], sign)

    def add(self, j: int, t: int, sign: float = 1.0) -> None:
        if self.tier1[j, t]:
            self._memo[self.project[j]][t].clear()
            g = sign * self.gpus[j]
            s = self.col[t]
            for o in self.anc[self.project[j]]:
                self.got[o][s] += g
            if self.short[j] and self.no_move[j, t]:
                self.dbg[self.project[j]][t] += g


def _grouped(a: np.ndarray, b: np.ndarray, v: np.ndarray) -> tuple[list, list, list]:
    """The sums of `v` per distinct (a, b) pair: (a's, b's, sums), as lists."""
    key = a * (int(b.max()) + 1) + b
    u, inv = np.unique(key, return_inverse=True)
    tot = np.bincount(inv.reshape(-1), weights=v, minlength=len(u))
    n = int(b.max()) + 1
    return (u // n).tolist(), (u % n).tolist(), tot.tolist()


def _base(em: EpochModel) -> tuple:
    """What ShareGain reads of the model and never changes: the org paths, the tiers per org
    node and share column, the debug allowance, the per-job and per-candidate lists, and
    which memo each (project, type) uses. Once per model (XL-sized epochs build a ShareGain
    for each of several backfills of each placement)."""
    snap, imp, tg = em.snap, em.imp, em.tg
    O, T = snap.org.n, len(snap.gpu_types)
    M = snap.org.membership()
    # root excluded; per column of M[1:] (1-D: .nonzero() is np.flatnonzero less its
    # overhead, 62,237 calls, 0.24 s over 10 days of ITP cluster04 under ilp, profiled)
    anc = [(col.nonzero()[0] + 1).tolist() for col in M[1:].T]
    b = tier_bounds(tg.share_floor, tg.share_target)  # (O, S, K+1): per type or pooled
    S = b.shape[1]
    col = tg.share_col.tolist()  # type -> share column
    hi = np.cumsum(b, axis=-1)
    lo = hi - b
    y = yields_of(tg)
    up = lifted_rows(tg)
    vals = [tier_values(imp, np.arange(O), None if y is None else y[:, s],
                        None if up is None else up[:, s]).tolist()
            for s in range(S)]  # per share column: (O, K+1)
    # per (o, s): [(lo, hi, weight), ...] of its non-empty tiers
    tiers = [[[(float(lo[o, s, k]), float(hi[o, s, k]), float(vals[s][o][k]))
               for k in range(b.shape[-1]) if b[o, s, k] > 0] for s in range(S)]
             for o in range(O)]
    # the debug allowance (optalloc.model.constraints.fairshare.define_debug_allowance)
    short = debug_jobs(snap).tolist()  # fairshare.debug_jobs
    allow = debug_allowance(snap).tolist()
    dbg_w = imp.debug_weight.tolist()
    # per type a move counts in no share row (no gain); pooled it counts where it runs;
    # never in a debug row (requirements.share_tier1)
    tier1 = share_tier1(snap, em.req, tg.pooled)
    no_move = share_tier1(snap, em.req)
    # a restart on its own type counts in no share or debug row (requirements.cand_counted)
    # though its (job, type) pair is its keep's: the starts are told apart by candidate
    restart = em.req.cand_restart.tolist()
    cand_type = em.req.cand_type.tolist()
    project = snap.job_project.tolist()
    gpus = snap.job_gpus.astype(float).tolist()
    size = M.sum(axis=1)
    top = [max(a, key=lambda o: size[o]) if a else p for p, a in enumerate(anc)]
    index = {key: i for i, key in enumerate((o, s) for o in set(top) for s in range(S))}
    memo_of = [[index[(top[p], col[t])] for t in range(T)] for p in range(O)]
    return (anc, col, tiers, short, allow, dbg_w, tier1, no_move, restart, cand_type, project,
            gpus, memo_of, len(index), O, S, T)
