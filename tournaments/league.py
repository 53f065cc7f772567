"""The seller-vs-buyer league: rounds of learners against frozen pools (``arena league``).
Its config (``LeagueConfig``, read and checked) is ``tournaments.league_config``, its
learner jobs ``tournaments.league_learners``, what a round measures besides ratings
``tournaments.league_measures``, its report ``tournaments.league_report``. This module is
the driver; it is longer than the others (about 540 lines) because a round's steps (learn,
freeze, round robin, exploitability, files) share one state, kept in one class, ``_League``.

A round ``r >= 1``:

1. Learners. A seller learner trains against the buyer pool while a buyer learner trains
   against the seller pool, both against the pools as round ``r - 1`` left them, so the
   jobs are independent Ray tasks (``learners`` per side run at once where the cluster
   has the CPUs). Each is an ``agents.rl.ppo.train`` run whose config is the side's base
   training config with: ``init`` = the side's newest snapshot (round one: the config's
   ``init``, the shipped RL agent), ``opponents`` = the other side's pool weighted by the
   meta-strategy (``tournaments.metastrategy``), the per-round iteration budget and a
   seed keyed by (league seed, side, round, learner).
2. Freeze. Every learner's checkpoint joins its side's pool under the name
   ``PREFIX_sR`` (sellers) or ``PREFIX_bR`` (buyers) (``_k`` appended with several
   learners per side); the side's newest snapshot is its best-rated learner of the round.
   (The best responses of step 4 are ``PREFIX_xsR`` and ``PREFIX_xbR``; a config whose
   pools name any of these is refused when it is read, ``league_config._check_pool_names``.)
3. Round robin. The new snapshots play every member of the other side's pool on the
   league's configs and rules, with common random numbers, in the league's one store
   (``DIR/results.sqlite``). The store's spec grows by the new entries each round and
   the store adds only their matches (``ResultStore.create_or_resume(extend=True)``):
   nothing stored is replayed. Ratings are fitted over every stored market with the same
   pinned reference, so every generation sits on one scale.
4. Exploitability of each newest snapshot: a fresh best response (a PPO run from the
   other side's ``exploit_init``, by default its ``init``: the shipped RL agent in
   ``league.toml``; where that is "", fresh weights and the base config's warm start,
   its ``imitate``; with the fixed budget ``exploit_iterations``) trains against the
   frozen snapshot alone, then plays it on the round robin's markets. Exploitability =
   its mean market score (the rating score, 0..1, from its side) minus that of the best
   pool member against the same snapshot, paired per market instance, with a 95%
   interval.

Round 0 is the round robin of the initial pools (scripted and shipped agents) and the
exploitability of the shipped agents. The best responses of round ``r`` and the learners
of round ``r + 1`` need nothing from each other, so they run as one batch of Ray tasks
(the longest first).

Folder::

    DIR/league.json            the league config as run (a resumed league must match)
    DIR/results.sqlite         the one growing store of every round robin (spec.json beside)
    DIR/round_RRR/             per round: seller/, buyer/ (the learners' checkpoints, curves),
                               exploit_seller/, exploit_buyer/ (best responses) and their
                               evaluation stores, weights.json (the meta-strategy's weights),
                               payoff.csv, ratings.csv, split.csv, round.json (written last)
    DIR/league.csv, league.md, league.png, payoff.png   across rounds (league_report)

Resume: a round is complete once its ``round.json`` is written. A killed league reruns
from the first incomplete round, keeping every finished piece of it: trained learners
(and partly trained ones, which resume from their last checkpoint), stored round-robin
units, best responses. Learner and best-response configs, meta-strategy weights and
seeds are fixed when first computed, so a resumed league gives the same numbers.

Clusters: checkpoints travel to learner tasks as bytes; a task on a node that cannot see
the league folder trains in a temporary folder and sends the files back.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arena.seeding import keyed_seed
from tournaments.league_config import (
    LeagueConfig,
    LeagueError,
    SideConfig,
    league_from_dict,
    load_league_config,
    round_robin_spec,
)
from tournaments.league_learners import (
    LearnerJob,
    learner_job,
    run_learner,
    trained,
    write_files,
)
from tournaments.league_measures import (
    SPLIT_FIELDS,
    Exploitability,
    exploitability,
    surplus_split,
)
from tournaments.metastrategy import opponent_weights, payoff_matrix
from tournaments.records import Records
from tournaments.spec import TournamentSpec, spec_from_dict

ROUND_FILE = "round.json"
CONFIG_FILE = "league.json"
ANALYSIS_COLUMNS = ("profit", "buyer_surplus", "w_star", "efficiency", "capture", "deal_rate")
_SIDES = ("seller", "buyer")
_OTHER = {"seller": "buyer", "buyer": "seller"}
_LETTER = {"seller": "s", "buyer": "b"}


# ---------------------------------------------------------------------- pools and specs
def entry_name(entry: str) -> str:
    """The name an entry plays under in the store: its own, or a checkpoint's from its
    config.json."""
    from agents.registry import DISCLOSED_SUFFIX

    if "/" not in entry:
        return entry
    from agents.rl.checkpoint import read_checkpoint

    suffix = DISCLOSED_SUFFIX if entry.endswith(DISCLOSED_SUFFIX) else ""
    data = read_checkpoint(entry.removesuffix(suffix))
    return data.meta()["policy"]["name"] + suffix


def _exploit_spec(cfg: LeagueConfig, seller: str, buyer: str, name: str) -> TournamentSpec:
    data = json.loads(json.dumps(cfg.tournament))
    t = data["tournament"]
    t.update(name=name, sellers=[seller], buyers=[buyer], transcripts=0)
    t.pop("reference", None)
    t.pop("hosted", None)
    return spec_from_dict(data)


def learner_opponent(cfg: LeagueConfig, entry: str) -> str:
    """What a learner's ``Opponent`` names for a pool entry: a population's mix, else
    the entry (a registry name or a checkpoint path)."""
    return dict(cfg.tournament.get("populations", {})).get(entry, entry)


# ---------------------------------------------------------------------- the driver
@dataclass
class LeagueSummary:
    folder: Path
    rounds_run: list[int]
    wall_s: float


def run_league(
    cfg: LeagueConfig,
    out: str | os.PathLike,
    *,
    workers: int = 2,
    address: str | None = None,
    use_ray: bool = True,
    progress: bool = True,
    log: Callable[[str], None] | None = print,
    agents: Sequence[Mapping[str, Any]] = (),
) -> LeagueSummary:
    """Run (or resume) the league ``cfg`` in folder ``out``, up to ``cfg.rounds`` rounds.

    ``agents``: the modules that registered entries of one's own (``arena league
    --agents``), as the round robins' store records them (``ResultStore.record_agents``):
    a resumed league whose stored matches were played by other code for such an entry is
    refused before a learner trains.

    The folder is taken as an absolute path: the learners' configs name their starts and
    opponents through it and a resume compares them, and the rounds store the newest
    snapshots relative to it, so a league resumes or grows from any working directory and
    however ``out`` is spelled."""
    t0 = time.perf_counter()
    folder = Path(out).resolve()
    league = _League(
        cfg, folder, workers, address, use_ray, progress, log or (lambda _: None), agents
    )
    done = league.run()
    return LeagueSummary(Path(out), done, time.perf_counter() - t0)


def _check_workers(workers: int, address: str | None, use_ray: bool) -> None:
    """Workers past the limit, or past the CPUs of the local Ray this league would start,
    refused before the folder is made: else round 0's round robin refuses them only after
    league.json, Ray's log and round_000/ are written."""
    import sys

    from arena import limits

    # Ray already started in this process (or a cluster to join) has CPUs of its own;
    # ray is not imported for the question when nothing imported it yet.
    ray = sys.modules.get("ray")
    started = ray is not None and ray.is_initialized()
    local = use_ray and not (address or os.environ.get("RAY_ADDRESS") or started)
    limits.check_workers(workers, (os.cpu_count() or 1) if local else None)


class _League:
    def __init__(self, cfg, out: Path, workers, address, use_ray, progress, log, agents) -> None:
        if workers < 1:
            raise LeagueError(f"workers must be >= 1, got {workers}")
        _check_workers(workers, address, use_ray)
        self.cfg, self.out, self.workers, self.address = cfg, out, workers, address
        self.use_ray, self.progress, self.log = use_ray, progress, log
        self.agents = list(agents)
        self._check_folder()
        # Pools as the spec names them (registry or population names, checkpoint paths).
        self.pool = {side: list(cfg.side(side).pool) for side in _SIDES}
        self.newest: dict[str, str | None] = {
            side: (cfg.side(side).init or None) for side in _SIDES
        }

    # ------------------------------------------------------------------ folder
    def _check_folder(self) -> None:
        """Refuse a folder that holds another league, or a store of results that are not
        this league's (another tournament's run folder), before a file is written there;
        then keep the config as run."""
        from tournaments.store import check_spec

        out = self.out
        if out.exists() and not out.is_dir():
            raise LeagueError(f"{out} exists and is not a folder")
        path = out / CONFIG_FILE
        mine = self.cfg.to_dict()
        if path.is_file():
            try:
                stored = json.loads(path.read_text())
            except ValueError:
                stored = None
            if not isinstance(stored, dict):
                raise LeagueError(f"{path}: not a league config as this tool writes it")
            a = {k: v for k, v in stored.items() if k != "rounds"}
            b = {k: v for k, v in mine.items() if k != "rounds"}
            if a != b:
                keys = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
                raise LeagueError(
                    f"{out} holds a league with a different config (differs in "
                    f"{', '.join(keys)}); resume with the same config or choose another --out"
                )
        # The store holds round 0's round robin, grown by the snapshots of later rounds.
        first = round_robin_spec(self.cfg, list(self.cfg.seller.pool), list(self.cfg.buyer.pool))
        check_spec(out, first, grown=True)
        out.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(mine, indent=2) + "\n")

    def check_agents(self) -> None:
        """Refuse a resume with changed code for an entry of one's own
        (``ResultStore.check_agents``), before the first round trains anything."""
        from tournaments.store import DB_NAME, ResultStore

        if not (self.agents and (self.out / DB_NAME).is_file()):
            return
        store = ResultStore.open(self.out)
        try:
            store.check_agents(self.agents)
        finally:
            store.close()

    def round_dir(self, r: int) -> Path:
        return self.out / f"round_{r:03d}"

    def complete_rounds(self) -> list[int]:
        done = []
        r = 0
        while (self.round_dir(r) / ROUND_FILE).is_file():
            done.append(r)
            r += 1
        return done

    # ------------------------------------------------------------------ the loop
    def run(self) -> list[int]:
        done = self.complete_rounds()
        if len(done) <= self.cfg.rounds:  # a finished league keeps its record of the code
            self.check_agents()
        for r in done:  # the pools and newest snapshots as the stored rounds left them
            info = json.loads((self.round_dir(r) / ROUND_FILE).read_text())
            for side in _SIDES:
                self.pool[side] += [str(self.out / p) for p in info["snapshots"][side]]
                newest = info["newest"][side]
                self.newest[side] = None if newest is None else self._as_entry(newest)
        ran = []
        if self.use_ray and len(done) <= self.cfg.rounds:
            # One Ray for the whole league: the round robins and the learners share it
            # (a round robin that started its own Ray would end it when it finishes).
            from tournaments.raysession import LOG_NAME, output_to
            from tournaments.runner import init_ray

            with output_to(self.out / LOG_NAME):  # Ray's own lines go to the log
                init_ray(self.address, self.workers)
        for r in range(len(done), self.cfg.rounds + 1):
            self.log(f"round {r} of {self.cfg.rounds}")
            self._round(r)
            ran.append(r)
        if ran or not (self.out / "league.csv").is_file():
            from tournaments.league_report import write_league_report

            write_league_report(self.out)
        return ran

    def _as_entry(self, stored: str) -> str:
        """A stored newest snapshot (a folder relative to the league, or an entry) as the
        pool names it."""
        return str(self.out / stored) if stored.startswith("round_") else stored

    def _round(self, r: int) -> None:
        cfg, rd = self.cfg, self.round_dir(r)
        rd.mkdir(parents=True, exist_ok=True)
        wall: dict[str, float] = {}
        t = time.perf_counter()
        snapshots: dict[str, list[str]] = {side: [] for side in _SIDES}
        weights = None
        if r > 0:
            jobs, weights = self._learner_jobs(r)
            self._run_jobs(jobs)
            for side in _SIDES:
                snapshots[side] = [str(Path(j.out)) for j in jobs if j.cfg.side == side]
                self.pool[side] += snapshots[side]
        wall["learners"] = time.perf_counter() - t

        t = time.perf_counter()
        spec = round_robin_spec(cfg, self.pool["seller"], self.pool["buyer"])
        from tournaments.runner import run_tournament

        run_tournament(
            spec,
            self.out,
            workers=self.workers,
            address=self.address,
            use_ray=self.use_ray,
            progress=self.progress,
            extend=True,
            agents=self.agents,
        )
        wall["round_robin"] = time.perf_counter() - t

        t = time.perf_counter()
        rec = self._records(self.out)
        from tournaments.analysis import ratings_table

        ratings = ratings_table(
            rec, reference=spec.reference, rounds=cfg.rating_rounds, seed=cfg.seed, shuffles=32
        )
        bt = {row.player: row.bt for row in ratings}
        for side in _SIDES:
            if snapshots[side]:  # the best-rated learner of the round is the newest
                self.newest[side] = max(snapshots[side], key=lambda p: bt.get(entry_name(p), -1e9))
        names = {side: [entry_name(e) for e in self.pool[side]] for side in _SIDES}
        matrix = payoff_matrix(rec).sub(names["seller"], names["buyer"])
        newest = {s: (entry_name(self.newest[s]) if self.newest[s] else None) for s in _SIDES}
        for side in _SIDES:  # a newest snapshot outside the pool (a fresh start) has no row
            if newest[side] not in names[side]:
                newest[side] = None
        wall["analysis"] = time.perf_counter() - t

        # The best responses of this round and the learners of the next, as one batch.
        t = time.perf_counter()
        jobs = self._exploit_jobs(r, newest)
        if r < cfg.rounds:
            nxt, _ = self._learner_jobs(r + 1, matrix=matrix, newest=newest)
            jobs += [j for j in nxt if not trained(j.cfg, Path(j.out))]
        self._run_jobs(jobs)
        wall["exploit_and_next_learners"] = time.perf_counter() - t
        t = time.perf_counter()
        exploit = {}
        for side in _SIDES:
            if newest[side] is not None:
                exploit[side] = dataclasses.asdict(self._exploit_eval(r, side, newest[side], rec))
        wall["exploit_eval"] = time.perf_counter() - t

        split = (
            surplus_split(rec, newest["seller"], newest["buyer"])
            if newest["seller"] and newest["buyer"]
            else []
        )
        _write_csv(
            rd / "payoff.csv",
            ["seller", *matrix.buyers],
            [[s, *(f"{x:.6g}" for x in row)] for s, row in zip(matrix.sellers, matrix.score,
                                                              strict=True)],
        )  # fmt: skip
        _write_csv(
            rd / "ratings.csv",
            ["player", "side", "bt", "lower", "upper", "elo", "rank", "games"],
            [[x.player, x.side, f"{x.bt:.2f}", f"{x.lower:.2f}", f"{x.upper:.2f}",
              f"{x.elo:.2f}", x.rank, x.games] for x in ratings],
        )  # fmt: skip
        _write_csv(
            rd / "split.csv",
            ["config", "disclosure", "n", *(f"{k}{e}" for k in SPLIT_FIELDS
                                            for e in ("", "_lower", "_upper"))],
            [[row["config"], row["disclosure"], row["n"],
              *(f"{v:.6g}" for k in SPLIT_FIELDS for v in row[k])] for row in split],
        )  # fmt: skip
        info = {
            "round": r,
            "sellers": names["seller"],
            "buyers": names["buyer"],
            "snapshots": {
                s: [str(Path(p).relative_to(self.out)) for p in snapshots[s]] for s in _SIDES
            },  # fmt: skip
            "newest": {
                s: (self._stored_entry(self.newest[s]) if self.newest[s] else None) for s in _SIDES
            },
            "newest_names": newest,
            "weights": weights,
            "payoff": {
                "sellers": list(matrix.sellers),
                "buyers": list(matrix.buyers),
                "score": _nan_none(matrix.score.tolist()),
            },  # fmt: skip
            "ratings": [dataclasses.asdict(x) for x in ratings],
            "reference": spec.reference,
            "split": split,
            "exploitability": exploit,
            "wall_s": {k: round(v, 2) for k, v in wall.items()},
            "load_average": [round(x, 2) for x in os.getloadavg()],
        }
        tmp = rd / (ROUND_FILE + ".tmp")
        tmp.write_text(json.dumps(_nan_none(info), indent=2) + "\n")
        os.replace(tmp, rd / ROUND_FILE)
        self.log(
            f"round {r} done: "
            + ", ".join(f"{k} {v:.0f} s" for k, v in wall.items())
            + "".join(
                f"; exploitability of {e['target']} {e['gain']:+.3f} [{e['lower']:+.3f}, "
                f"{e['upper']:+.3f}]"
                for e in exploit.values()
            )
        )

    def _stored_entry(self, entry: str) -> str:
        p = Path(entry)
        if p.is_absolute() and self.out.resolve() in p.resolve().parents:
            return str(p.resolve().relative_to(self.out.resolve()))
        return entry

    # ------------------------------------------------------------------ jobs
    def _learner_jobs(
        self, r: int, *, matrix=None, newest: dict | None = None
    ) -> tuple[list[LearnerJob], dict]:
        """The learners of round ``r``. Their meta-strategy weights are computed once (from
        the store as round ``r - 1`` left it) and kept in ``weights.json``."""
        from agents.rl.config import Opponent

        cfg, rd = self.cfg, self.round_dir(r)
        path = rd / "weights.json"
        if path.is_file():
            weights = json.loads(path.read_text())
        else:
            if matrix is None:
                # A league grown by more rounds: the store is as round r - 1 left it (a
                # round robin needs its learners, whose weights are written first).
                names = {side: [entry_name(e) for e in self.pool[side]] for side in _SIDES}
                matrix = payoff_matrix(self._records(self.out)).sub(names["seller"], names["buyer"])
                newest = {
                    side: entry_name(self.newest[side]) if self.newest[side] else None
                    for side in _SIDES
                }
            weights = {}
            for side in _SIDES:
                w = opponent_weights(
                    matrix,
                    side,
                    cfg.meta_strategy,
                    learner=(newest or {}).get(side),
                    uniform_mix=cfg.uniform_mix,
                    power=cfg.power,
                )
                weights[side] = {k: round(v, 6) for k, v in w.items()}
            rd.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(weights, indent=2) + "\n")
        jobs = []
        for side in _SIDES:
            sc = cfg.side(side)
            other = _OTHER[side]
            by_name = {entry_name(e): e for e in self.pool[other]}
            opponents = tuple(
                Opponent(learner_opponent(cfg, by_name[name]), w)
                for name, w in weights[side].items()
                if w > 1e-6
            )
            init = self.newest[side] or ""
            for k in range(cfg.learners):
                suffix = f"_{k}" if cfg.learners > 1 else ""
                name = f"{cfg.snapshot_prefix}_{_LETTER[side]}{r}{suffix}"
                tcfg = dataclasses.replace(
                    sc.base,
                    name=name,
                    seed=keyed_seed(cfg.seed, f"league|{side}|{r}|{k}") % 2**31,
                    iterations=sc.iterations,
                    opponents=opponents,
                ).starting_from(init)
                jobs.append(learner_job(tcfg, rd / f"{side}{suffix}"))
        return jobs, weights

    def _exploit_jobs(self, r: int, newest: dict[str, str | None]) -> list[LearnerJob]:
        from agents.rl.config import Opponent

        jobs = []
        for side in _SIDES:
            if newest[side] is None:
                continue
            other = _OTHER[side]
            sc = self.cfg.side(other)  # the best response plays the other side
            target = self._pool_entry(side, newest[side])
            tcfg = dataclasses.replace(
                sc.base,
                name=f"{self.cfg.snapshot_prefix}_x{_LETTER[other]}{r}",
                seed=keyed_seed(self.cfg.seed, f"exploit|{side}|{r}") % 2**31,
                iterations=sc.exploit_iterations,
                opponents=(Opponent(learner_opponent(self.cfg, target)),),
            ).starting_from(sc.exploit_init)
            out = self.round_dir(r) / f"exploit_{side}"
            if not trained(tcfg, out):
                jobs.append(learner_job(tcfg, out))
        return jobs

    def _pool_entry(self, side: str, name: str) -> str:
        for e in self.pool[side]:
            if entry_name(e) == name:
                return e
        raise LeagueError(f"{name} is not in the {side} pool")

    def _run_jobs(self, jobs: list[LearnerJob]) -> None:
        jobs = sorted([j for j in jobs if not trained(j.cfg, Path(j.out))], key=lambda j: -j.cost)
        if not jobs:
            return
        self.log("training " + ", ".join(j.label for j in jobs))
        if not self.use_ray:
            for job in jobs:
                write_files(Path(job.out), run_learner(job))
            return
        import ray  # started by run() for the whole league

        from tournaments.raysession import task_function

        # A learner's opponents may be entries of one's own (arena league --agents).
        task = ray.remote(num_cpus=1, max_retries=1)(task_function(run_learner))
        refs = {task.remote(job): job for job in jobs}
        try:
            while refs:
                ready, _ = ray.wait(list(refs), num_returns=1)
                job = refs.pop(ready[0])
                try:
                    files = ray.get(ready[0])
                except Exception as err:  # noqa: BLE001 - one line; a rerun resumes
                    text = str(err).strip().splitlines()
                    raise LeagueError(
                        f"learner {job.out} failed: {text[-1] if text else type(err).__name__}"
                    ) from err
                write_files(Path(job.out), files)
        finally:
            for ref in refs:
                ray.cancel(ref, force=True)

    # ------------------------------------------------------------------ exploitability
    def _exploit_eval(self, r: int, side: str, target: str, pool_rows: Records) -> Exploitability:
        """The best response of round ``r`` against the newest ``side`` snapshot, played on
        the round robin's markets, against the best pool member on the same markets."""
        from tournaments.runner import run_tournament

        folder = self.round_dir(r) / f"exploit_{side}"
        entry = self._pool_entry(side, target)
        seller, buyer = (entry, str(folder)) if side == "seller" else (str(folder), entry)
        spec = _exploit_spec(self.cfg, seller, buyer, f"{self.cfg.name}-exploit-{side}-{r}")
        run_tournament(spec, folder / "eval", use_ray=False, progress=False)
        rows = self._records(folder / "eval")
        response = entry_name(str(folder))
        return exploitability(side, target, response, rows, pool_rows, seed=self.cfg.seed)

    @staticmethod
    def _records(folder: Path) -> Records:
        from tournaments.store import ResultStore

        store = ResultStore.open(folder)
        try:
            return store.records(ANALYSIS_COLUMNS)
        finally:
            store.close()


def _write_csv(path: Path, header: list[str], rows: list[list[Any]]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)
    os.replace(tmp, path)


def _nan_none(x: Any) -> Any:
    """NaN as null (JSON has no NaN)."""
    if isinstance(x, float):
        return None if math.isnan(x) else x
    if isinstance(x, dict):
        return {k: _nan_none(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_nan_none(v) for v in x]
    return x


__all__ = [
    "Exploitability",
    "LeagueConfig",
    "LeagueError",
    "LeagueSummary",
    "SideConfig",
    "exploitability",
    "league_from_dict",
    "load_league_config",
    "round_robin_spec",
    "run_league",
    "run_learner",
    "surplus_split",
]
