"""Functional effects at simulated time: an op reads its operands when it starts and its results
land when they are ready.

A machine gives every op that touches architectural state an *action*, called when the op starts;
it reads what it needs (and may fill in the bytes of a predicated transfer) and returns a
*commit* that writes the results, or None when it has nothing more to write. ``Effects`` applies
them in the one order both engines agree on: ops start in (cycle, program order); before an op
starts, every commit due by then is applied, in (ready cycle, start order); the rest are applied
at the end. So a reader that starts in the cycle a result lands sees it, one that starts earlier
sees the old value, and a program that does not wait for its DMA reads stale bytes.

The simpy engine calls ``start`` as it starts each op; the compiled engine computes the timing
first and then ``replay``s the actions in the same order (timing never depends on data there; a
machine whose costs do, e.g. SME's predicated loads, runs its semantics in program order before
the timing instead). ``done(op)`` hears when an op's last effect has been applied (checkpoints).
"""

from __future__ import annotations

import heapq
from typing import Callable

import numpy as np


class Effects:
    """``actions``: op -> action; ``done(op)`` is called for the ops in ``watch`` once their
    last effect has been applied (at their start when they have no commit). A machine that runs
    its semantics in program order pauses after each watched op (its watcher then watches only
    the ops after which it must see the state before anything else runs)."""

    def __init__(self, actions: dict, watch=frozenset(),
                 done: Callable[[int], None] | None = None):
        self.actions = actions
        self.watch = frozenset(watch) if done is not None else frozenset()
        self.done = done
        self._due: list = []              # (ready, rank, op, commit)

    def start(self, op: int, cycle: int):
        """Op ``op`` starts at ``cycle``: apply what is due, run its action; returns its commit
        (to ``land`` once its ready cycle is known) or None."""
        self.flush(cycle)
        action = self.actions.get(op)
        commit = action() if action is not None else None
        if commit is None and op in self.watch:
            self.done(op)
        return commit

    def land(self, op: int, ready: int, rank: int, commit) -> None:
        heapq.heappush(self._due, (ready, rank, op, commit))

    def flush(self, cycle: float = float("inf")) -> None:
        """Apply the commits due by ``cycle`` (all of them by default)."""
        due = self._due
        while due and due[0][0] <= cycle:
            _, _, op, commit = heapq.heappop(due)
            commit()
            if op in self.watch:
                self.done(op)


def replay(records, effects: Effects) -> None:
    """Run the actions of a finished timing run in start order (module docstring): what
    ``start``, ``land`` and ``flush`` do, in one loop (it runs once per op)."""
    ops = np.asarray(sorted(set(effects.actions) | effects.watch), np.int64)
    ops = ops[np.argsort(records.rank[ops], kind="stable")]
    actions, watch, done, due = effects.actions, effects.watch, effects.done, effects._due
    for op, cycle, ready, rank in zip(ops.tolist(), records.start[ops].tolist(),
                                      records.ready[ops].tolist(), records.rank[ops].tolist()):
        while due and due[0][0] <= cycle:
            _, _, landed, commit = heapq.heappop(due)
            commit()
            if landed in watch:
                done(landed)
        action = actions.get(op)
        commit = action() if action is not None else None
        if commit is not None:
            heapq.heappush(due, (ready, rank, op, commit))
        elif op in watch:
            done(op)
    effects.flush()
