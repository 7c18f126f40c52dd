"""The tuner loop for one workload: propose a batch, build and measure it, learn, repeat.

Side effects (database records, model updates, progress) are callbacks on the measurer, so the
loop itself only moves candidates between the searcher and the measurer. Schedules already in the
database for this workload and target are not measured again (resume): their stored costs are fed
to the searcher and the model instead.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from autosched.compile.types import ErrorCode, MeasureInput
from autosched.cost_model.metrics import pairwise_accuracy
from autosched.cost_model.random_model import RandomModel
from autosched.cost_model.xgb_model import XGBModel
from autosched.measure.types import MeasureResult
from autosched.search.base import UNBUILDABLE_SCORE
from autosched.search.registry import make_searcher
from autosched.space.registry import make_space
from autosched.target.key import Target
from autosched.tuning.candidates import CandidateCache
from autosched.tuning.options import TuneOptions
from autosched.tuning.protocols import Config, CostModel, Measurer, SearchSpace
from autosched.workload import Workload
from tuning_db.ranking import upper_median  # how the database judges a re-measured schedule
from tuning_db.types import DISQUALIFYING, MIN_VERIFIED


@dataclass
class TuneResult:
    workload: Workload
    target: str
    best_cost: float
    best_steps_json: str | None
    curve: list[tuple[int, float]]  # (trials so far, best single measurement so far in GFLOP/s)
    trials: int
    measured: int
    reused: int
    errors: dict[str, int]
    seconds: float
    verified: dict[str, float] = field(default_factory=dict)
    """steps hash -> cost after re-measurement, for the schedules `TaskTuner.verify` re-measured;
    `best_cost` is then the best of these, which can be slower than the curve's lucky last point."""
    transferred: int = 0
    """Schedules of other workloads (same operator, other shapes) the run started from."""
    best_verified: bool = False
    """The best has at least MIN_VERIFIED valid measurements here (False: verification was off, the
    run was stopped, or every contender failed to reach them): the database serves it as unverified."""
    disqualified: int = 0
    """Schedules ruled out for good because a measurement of theirs failed its check or crashed."""

    @property
    def best_gflops(self) -> float:
        return self.workload.flops / self.best_cost / 1e9 if math.isfinite(self.best_cost) else 0.0


TRANSFER_EXPLORE_SHARE = 0.5
"""Share of a batch picked at random while the model knows only other workloads' records."""
TRANSFER_MIN_PAIRWISE = 0.5
"""Pairwise accuracy on this workload's own batch below which transferred records are dropped: a
model that orders this workload's schedules worse than a coin does; a higher bar also drops
helpful records (see docs/decisions/transferred-records-check.md)."""


VERIFY_PASSES = 3
"""Passes of `TaskTuner.verify`: a pass re-measures the unverified schedules that are still faster
than the verified best, so the result is what the database's ranking picks."""


@dataclass(frozen=True)
class Prior:
    """What the database already holds of one schedule on this target: the medians of its valid
    local measurements (imported ones are not trusted here) and whether it ever failed a check."""

    local: tuple[float, ...] = ()
    disqualified: bool = False
RAMP_MIN_BATCH = 8
"""First batches of a model-guided run (then half of the trials so far, up to the batch size):
small early batches let the model learn from its first picks sooner
(see docs/decisions/first-batch-ramp.md)."""


def make_cost_model(name: str | None, seed: int) -> CostModel | None:
    if name is None:
        return None
    if name == "random":
        return RandomModel(seed=seed)
    return XGBModel(seed=seed, min_samples=16)


class TaskTuner:
    """Tunes one workload on one target; `step(n)` runs one batch and can be interleaved with others."""

    def __init__(self, workload: Workload, target: Target, measurer: Measurer, options: TuneOptions,
                 known: dict[str, Prior | float] | None = None, model: CostModel | None = None,
                 on_batch: Callable[[TaskTuner], None] | None = None, space: SearchSpace | None = None,
                 check_transfer: bool = True) -> None:
        self.workload, self.target, self.measurer, self.options = workload, target, measurer, options
        # a model warm-started from other workloads' records is checked against this workload's own
        # measurements and made to forget them if they mislead (off when the model is shared by live
        # tasks of a scheduler: their records are not stale transfer)
        self.check_transfer = check_transfer
        self.transfer_checks: list[float] = []  # pairwise accuracy of the model's scores on each batch
        self.transfer_dropped = False
        self.space: SearchSpace = space if space is not None else make_space(workload, target.kind)
        self.config_space = self.space.space  # the knobs the searcher moves in
        self.cands = CandidateCache(workload, self.space, target.kind)
        self.model = model if model is not None else make_cost_model(options.cost_model, options.seed)
        predictor = self._predict if self.model is not None else None
        self.searcher = make_searcher(options.searcher, self.config_space, seed=options.seed, predictor=predictor,
                                      options=options.searcher_options or None)
        # a space may carry rule-derived starting points (GPU gemm: device-sized tiles); measured first
        seeds = getattr(self.space, "seeds", ()) if options.seeds else ()
        if seeds:
            self.searcher.add_seeds(self.config_space.index_of(v) for v in seeds)
        self.known: dict[str, float] = {}  # steps_hash -> cost reused instead of measuring (inf: ruled out)
        self._costs: dict[str, list[float]] = {}  # steps hash -> every valid local cost, stored or this run's
        self.disqualified: set[str] = set()
        # schedules an earlier run stored: proposing one again costs no trial (once each), so a run
        # resumed on the same database spends its budget on new schedules, not on a replay
        self._stored_unproposed: set[str] = set()
        for h, prior in (known or {}).items():
            prior = prior if isinstance(prior, Prior) else Prior((float(prior),))
            if prior.disqualified or prior.local:
                self._stored_unproposed.add(h)
            if prior.disqualified:
                self.disqualified.add(h)
                self.known[h] = math.inf
            elif prior.local:
                self._costs[h] = list(prior.local)
                self.known[h] = upper_median(prior.local)
        self.on_batch = on_batch
        self.best_cost, self.best_steps = math.inf, None
        self.curve: list[tuple[int, float]] = []
        self.trials = self.measured = self.reused = 0
        self.proposed_last = 0  # configs the last step proposed (stored ones proposed again use no trial)
        self.errors: dict[str, int] = {}
        self._since_improvement = 0
        self.evaluated: dict[str, tuple[float, str]] = {}  # steps hash -> (cost, steps JSON), valid ones
        self.verified: dict[str, float] = {}
        self.best_verified = False
        self.transfer_seeds: list[Config] = []

    def add_transfer_seeds(self, configs: Sequence[Config]) -> None:
        """Measure these configs first (other workloads' best schedules moved onto this space, see
        `autosched.tuning.transfer`); a seed already measured or invalid here is skipped."""
        self.transfer_seeds.extend(configs)
        self.searcher.add_seeds(configs)

    def _predict(self, configs: Sequence[Config]) -> np.ndarray:
        feats = self.cands.features(list(configs))
        scores = self.model.predict(feats)
        bad = [not self.cands.get(c).ok for c in configs]
        scores = np.where(bad, UNBUILDABLE_SCORE, scores)
        return scores

    @property
    def done(self) -> bool:
        if self.trials >= self.options.trials or self.searcher.exhausted:
            return True
        es = self.options.early_stopping
        return es is not None and self._since_improvement >= es

    def step(self) -> int:
        """Run one batch; returns the number of trials it used."""
        n = min(self.batch_now(), self.options.trials - self.trials)
        if self.model is not None:
            transferred_only = self.model.is_trained and self.model.count_group(self.workload.key) == 0
            self.searcher.explore_floor = TRANSFER_EXPLORE_SHARE if transferred_only else 0.0
            if not self.model.is_trained:
                # an untrained model scores by a hash of the features: evolving candidates on it
                # collapses the batch onto one family; measure random configs, as Ansor does
                # (see docs/decisions/random-first-batch.md)
                self.searcher.explore_floor = 1.0
        configs = self.searcher.propose(n)
        self.proposed_last = len(configs)
        if not configs:
            return 0
        costs: list[float] = [math.inf] * len(configs)
        to_measure: list[tuple[int, MeasureInput]] = []
        free: set[int] = set()  # positions of stored schedules proposed for the first time: no trial
        for k, cfg in enumerate(configs):
            c = self.cands.get(cfg)
            if not c.ok:
                self.errors["INSTANTIATION_ERROR"] = self.errors.get("INSTANTIATION_ERROR", 0) + 1
                continue
            if c.steps_hash in self.known:
                costs[k] = self.known[c.steps_hash]
                self.reused += 1
                if c.steps_hash in self._stored_unproposed:
                    self._stored_unproposed.discard(c.steps_hash)
                    free.add(k)
                if c.steps_hash in self.disqualified:
                    self._count_error("DISQUALIFIED")
                continue
            to_measure.append((k, MeasureInput(self.workload.key, self.workload.to_json(), self.target.key,
                                               c.steps_json)))
        if to_measure:
            results: list[MeasureResult] = self.measurer.measure([inp for _, inp in to_measure])
            for (k, _inp), res in zip(to_measure, results):
                self.measured += 1
                if res.ok:
                    costs[k] = res.median
                    h = self.cands.get(configs[k]).steps_hash
                    if h not in self.disqualified:
                        self.known[h] = res.median
                    # two knob settings can give one schedule: both measurements count, as in the database
                    self._costs.setdefault(h, []).append(res.median)
                else:
                    self._failed(self.cands.get(configs[k]).steps_hash, res)
        # a schedule measured under two knob settings in one batch, fine once and wrong once, is out
        costs = [math.inf if self.cands.get(cfg).ok and self.cands.get(cfg).steps_hash in self.disqualified else x
                 for cfg, x in zip(configs, costs)]
        self.searcher.update(configs, costs)
        improved = False
        for k, (cfg, cost) in enumerate(zip(configs, costs)):
            self.trials += k not in free
            c = self.cands.get(cfg)
            if math.isfinite(cost):
                self.evaluated[c.steps_hash] = (upper_median(self._costs[c.steps_hash]), c.steps_json)
            if cost < self.best_cost:
                self.best_cost, self.best_steps = cost, self.cands.get(cfg).steps_json
                improved = True
            self.curve.append((self.trials, self.workload.flops / self.best_cost / 1e9
                               if math.isfinite(self.best_cost) else 0.0))
        self._since_improvement = 0 if improved else self._since_improvement + len(configs)
        if self.model is not None:
            ok = [(c, x) for c, x in zip(configs, costs) if math.isfinite(x) and self.cands.get(c).ok]
            if ok:
                feats = self.cands.features([c for c, _ in ok])
                thr = np.array([self.workload.flops / x for _, x in ok])
                self._check_transfer(feats, thr)
                self.model.update(feats, thr, [self.workload.key] * len(ok))
        if self.on_batch is not None:
            self.on_batch(self)
        return len(configs) - len(free)

    def batch_now(self) -> int:
        """Size of the next batch. With a cost model, batches start at RAMP_MIN_BATCH and grow to
        half of the trials so far, up to `batch_size`: the model learns this workload from its first
        measurements, and each batch it picks from a model refitted sooner is a better batch."""
        full = self.options.batch_size
        if self.model is None:
            return full
        return min(full, max(RAMP_MIN_BATCH, self.trials // 2))

    def _check_transfer(self, feats: np.ndarray, thr: np.ndarray) -> None:
        """Score the batch just measured with the model as it was when the batch was chosen; if the
        model still holds other workloads' records and ranks this workload's measurements no better
        than TRANSFER_MIN_PAIRWISE, drop those records: they would steer the guided search below
        random picks (see docs/decisions/transferred-records-check.md)."""
        key = self.workload.key
        if not self.check_transfer or not self.model.is_trained or len(thr) < 4 \
                or self.model.count_group(key) == self.model.n_samples:
            return
        acc = float(pairwise_accuracy(thr, self.model.predict(feats)))
        self.transfer_checks.append(acc)
        if acc < TRANSFER_MIN_PAIRWISE:
            self.model.keep_only_group(key)
            self.transfer_dropped = True

    def _count_error(self, name: str) -> None:
        self.errors[name] = self.errors.get(name, 0) + 1

    def _failed(self, steps_hash: str, res: MeasureResult) -> None:
        """Count a failed measurement; a wrong answer, runtime error or crash rules the schedule out
        for good, as the database does (a racy kernel is right once and wrong the next time)."""
        self._count_error(ErrorCode(res.error_code).name)
        if int(res.error_code) in DISQUALIFYING:
            self._disqualify(steps_hash)

    def _disqualify(self, steps_hash: str) -> None:
        self.disqualified.add(steps_hash)
        self.known[steps_hash] = math.inf
        self.verified.pop(steps_hash, None)
        gone = self.evaluated.pop(steps_hash, None)
        if gone is not None and gone[1] == self.best_steps:
            self.best_cost, self.best_steps = math.inf, None
            if self.evaluated:
                h = min(self.evaluated, key=lambda x: (self.evaluated[x][0], x))
                self.best_cost, self.best_steps = self.evaluated[h]

    def _n_valid(self, steps_hash: str) -> int:
        return len(self._costs.get(steps_hash, ()))

    def verify(self) -> None:
        """Bring the best schedules to MIN_VERIFIED valid measurements, all of them back to back in
        each round, and make the best by the median of each one's measurements the result.

        Why: candidates are measured minutes apart, and on a shared machine one measurement can be
        lucky, so the fastest single measurement is the luckiest of the near-equal top schedules,
        not the fastest (see docs/decisions/verify-by-median.md). The re-measurements are stored
        like any other and the database ranks schedules by the same rule (`tuning_db.ranking`), so
        `apply_best` agrees with this result. A re-measurement that fails its check or crashes
        rules that schedule out for good; the passes go on until no unverified schedule is faster
        than the verified best (at most VERIFY_PASSES).
        """
        k = self.options.verify
        if k > 0 and self.evaluated:
            for _ in range(VERIFY_PASSES):
                todo = self._contenders(k)
                if not todo:
                    break
                self._remeasure(todo)
        self.verified = {h: c for h, (c, _) in self.evaluated.items() if self._n_valid(h) >= MIN_VERIFIED}
        pool = self.verified or {h: c for h, (c, _) in self.evaluated.items()}
        if not pool:
            self.best_cost, self.best_steps = math.inf, None
            return
        win = min(pool, key=lambda h: (pool[h], h))
        self.best_cost, self.best_steps = pool[win], self.evaluated[win][1]
        self.best_verified = bool(self.verified)

    def _contenders(self, k: int) -> list[str]:
        """Up to k unverified schedules faster than the best verified one, fastest first."""
        ranked = sorted(self.evaluated, key=lambda h: (self.evaluated[h][0], h))
        settled = [h for h in ranked if self._n_valid(h) >= MIN_VERIFIED]
        bar = self.evaluated[settled[0]][0] if settled else math.inf
        return [h for h in ranked if self._n_valid(h) < MIN_VERIFIED and self.evaluated[h][0] < bar][:k]

    def _remeasure(self, todo: list[str]) -> None:
        need = {h: MIN_VERIFIED - self._n_valid(h) for h in todo}
        for r in range(max(need.values())):
            batch = [h for h in todo if need[h] > r and h not in self.disqualified]
            if not batch:
                break
            order = batch[r % len(batch):] + batch[: r % len(batch)]  # rotate: none always goes first
            inputs = [MeasureInput(self.workload.key, self.workload.to_json(), self.target.key,
                                   self.evaluated[h][1]) for h in order]
            for h, res in zip(order, self.measurer.measure(inputs)):
                self.measured += 1
                if res.ok:
                    self._costs[h].append(res.median)
                else:
                    self._failed(h, res)
        for h in todo:
            if h in self.evaluated:
                self.evaluated[h] = (upper_median(self._costs[h]), self.evaluated[h][1])

    def result(self, seconds: float) -> TuneResult:
        return TuneResult(self.workload, self.target.key, self.best_cost, self.best_steps, self.curve,
                          self.trials, self.measured, self.reused, self.errors, seconds, dict(self.verified),
                          len(self.transfer_seeds), self.best_verified, len(self.disqualified))

    def run(self, should_stop: Callable[[], bool] | None = None) -> TuneResult:
        t0 = time.perf_counter()
        while not self.done and not (should_stop is not None and should_stop()):
            self.step()
            if self.proposed_last == 0:  # the searcher has nothing left to propose
                break
        if not (should_stop is not None and should_stop()):
            self.verify()
        return self.result(time.perf_counter() - t0)
