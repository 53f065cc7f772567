"""Running a tournament: in this process, or on Ray (an embedded local instance by default,
an existing cluster with ``address`` / RAY_ADDRESS).

The driver plans the units still missing from the store, hands them to match
workers, and stores each result in its own transaction as it arrives. Each
worker is a Ray actor hosting the cheap agents of the matches it plays (an
actor call costs about a millisecond, so one call plays a whole unit of up to
1,000 markets, all agents deciding for the whole batch at once). A worker that
dies is replaced and its units are played again; since a unit is a pure
function of (spec, match, markets), the results are the same.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents.command import where_raised
from agents.torch_threads import one_torch_thread
from arena import limits
from arena.words import plural
from tournaments.remote import PolicyHost
from tournaments.spec import TournamentSpec
from tournaments.store import DB_NAME, ResultStore
from tournaments.types import Unit, UnitResult
from tournaments.worker import MatchWorker, count_units, plan_units

# How many units each worker holds at once: one running, one queued, so a worker never
# waits on the driver between units.
IN_FLIGHT_PER_WORKER = 2
# A unit that fails this many times stops the run with a clear error instead of looping.
MAX_ATTEMPTS = 3
START_TIMEOUT_S = 120


@dataclass
class RunSummary:
    folder: Path
    units_total: int
    units_run: int  # played in this call (the rest were stored already)
    markets_run: int
    wall_s: float
    ray_start_s: float
    workers_replaced: int
    markets_total: int = 0
    units_retried: int = 0
    """Units played again on Ray after their worker died or their policy raised (a policy
    that raises only sometimes is not deterministic: the run says so)."""
    used_ray: bool = False
    """Whether this call started or joined Ray (a complete run, or ``use_ray=False``, not)."""

    @property
    def complete_before(self) -> bool:
        """Everything was stored already: nothing was played."""
        return self.units_run == 0 and self.units_total > 0


def run_tournament(
    spec: TournamentSpec,
    folder: str | Path,
    workers: int = 2,
    address: str | None = None,
    use_ray: bool = True,
    progress: bool = True,
    unit_markets: int | None = None,
    on_result: Callable[[UnitResult, dict], None] | None = None,
    extend: bool = False,
    *,
    connect_timeout: float | None = None,
    agents: Sequence[Mapping[str, Any]] = (),
) -> RunSummary:
    """Play every unit of ``spec`` not yet stored in ``folder``; resumable at any point.

    ``unit_markets``: markets per unit; by default the size the folder was cut into, else
    the largest up to 1,000 that fits a unit's memory (``arena.limits``).
    ``connect_timeout``: seconds to join a cluster before giving up (default 30).
    A folder this call created is removed again if the run stops before it stored
    anything (a cluster that cannot be joined leaves no half-made folder).
    ``extend``: ``folder`` may hold a run of a spec that ``spec`` extends (more entries);
    only the new matches are played (``ResultStore.create_or_resume``).
    ``agents``: the modules that registered entries of one's own, as the folder records
    them (``ResultStore.record_agents``)."""
    from tournaments.raysession import CONNECT_TIMEOUT_S, LOG_NAME, output_to

    if workers < 1:
        raise ValueError(f"workers: expected a positive integer, got {workers}")
    limits.check_workers(workers)
    fitting = limits.spec_unit_markets(spec)
    if unit_markets is None:
        unit_markets = _stored_unit_markets(folder) or fitting
    elif unit_markets > fitting:
        raise limits.LimitError(
            f"units of {plural(unit_markets, 'market')} do not fit a unit's memory here; at most "
            f"{fitting} (arena.limits)"
        )
    t0 = time.perf_counter()
    folder = Path(folder)
    created = _created_by_us(folder)
    store = ResultStore.create_or_resume(folder, spec, unit_markets, extend=extend)
    ctx: dict = {
        "replaced": 0,
        "retried": 0,
        "ray_start_s": 0.0,
        "units": 0,
        "markets": 0,
        "ray": False,
    }
    done = 0
    try:
        done = store.units_stored()
        total = count_units(spec, unit_markets)
        todo = _todo(store, spec, unit_markets)
        left = total - done
        if left:  # a complete run keeps the record of the code it was played with
            store.record_agents(agents)

        def store_result(result: UnitResult) -> None:
            if not store.write(result):
                return  # played twice (a worker replaced after it finished the unit)
            ctx["units"] += 1
            ctx["markets"] += result.unit.stop - result.unit.start
            bar.update(1)
            if on_result is not None:
                on_result(result, ctx)

        bar = _NoBar()
        if left and use_ray:
            ctx["ray"] = True
            with (
                output_to(folder / LOG_NAME) as terminal,
                _progress(total, total - left, spec, progress, ctx, terminal) as bar,
            ):
                _run_ray(
                    spec, todo, workers, address, store_result, ctx,
                    connect_timeout or CONNECT_TIMEOUT_S,
                )  # fmt: skip
        elif left:
            if spec.hosted_entries():
                raise ValueError("hosted entries need Ray: run without --no-ray")
            with _progress(total, total - left, spec, progress, ctx) as bar:
                _run_here(spec, todo, store_result)
        return RunSummary(
            folder=folder,
            units_total=total,
            units_run=ctx["units"],
            markets_run=ctx["markets"],
            wall_s=time.perf_counter() - t0,
            ray_start_s=ctx["ray_start_s"],
            workers_replaced=ctx["replaced"],
            units_retried=ctx["retried"],
            markets_total=spec.markets * len(spec.matches()),
            used_ray=ctx["ray"],
        )
    except BaseException:
        if created and ctx["units"] == 0 and done == 0:
            store.close()
            _remove_new_folder(created)
        raise
    finally:
        store.close()


def _todo(store: ResultStore, spec: TournamentSpec, unit_markets: int) -> Iterator[Unit]:
    """The units of the plan not stored yet, looked up one slice of markets at a time."""
    start, done = None, set()
    for unit in plan_units(spec, unit_markets):
        if unit.start != start:
            start, done = unit.start, store.done_at(unit.start)
        if unit.match_id not in done:
            yield unit


def _stored_unit_markets(folder: str | Path) -> int | None:
    """The unit size a run folder was cut into (None for a new folder)."""
    if not (Path(folder) / DB_NAME).is_file():
        return None
    try:
        store = ResultStore.open(folder)
    except ValueError:
        return None  # create_or_resume says what is wrong with it
    try:
        value = store.meta().get("unit_markets")
    finally:
        store.close()
    return int(value) if value and value.isdigit() else None


def _created_by_us(folder: Path) -> Path | None:
    """The topmost folder of ``folder``'s path that does not exist yet (None if it does)."""
    if folder.exists():
        return None
    top = folder
    while not top.parent.exists() and top.parent != top:
        top = top.parent
    return top


def _remove_new_folder(top: Path) -> None:
    """Remove the folders this call made for its run folder (the topmost of them)."""
    import shutil

    with contextlib.suppress(OSError):
        shutil.rmtree(top)


def _run_here(spec: TournamentSpec, todo: Iterator[Unit], store_result) -> None:
    worker = MatchWorker(spec)
    for unit in todo:
        try:
            with one_torch_thread():  # checked per unit: a checkpoint imports torch late
                result = worker.play(unit)
        except Exception as err:  # a policy bug: stop with what is stored kept
            raise TournamentError(
                f"unit {unit.match_id} markets {unit.start}-{unit.stop - 1} "
                f"failed: {type(err).__name__}: {err}{where_raised(err)}"
            ) from err
        store_result(result)


_PROCESS_SESSIONS: list = []
"""Ray sessions kept for the life of this process (``init_ray``): a session's guard ends
the Ray it started as soon as the session is dropped."""


def init_ray(address: str | None, workers: int) -> float:
    """Start (or join) Ray for the rest of this process, as a run does (a private local
    instance unless an address is given, ended with this process); returns the seconds it
    took."""
    import atexit

    from tournaments.raysession import connect

    t0 = time.perf_counter()
    session = connect(address, workers)
    if session.owned:
        _PROCESS_SESSIONS.append(session)
        atexit.register(session.close)
    return time.perf_counter() - t0


class TournamentError(RuntimeError):
    """A run that cannot go on (a unit that keeps failing, a cluster too small); what was
    stored stays stored, and rerunning the same command resumes."""


def _run_ray(
    spec, todo: Iterator[Unit], workers: int, address, store_result, ctx: dict, timeout: float
) -> None:
    import ray
    from ray.exceptions import GetTimeoutError, RayActorError

    from tournaments.raysession import actor_class, connect

    t0 = time.perf_counter()
    if not ray.is_initialized() and not (address or os.environ.get("RAY_ADDRESS")):
        limits.check_workers(workers, os.cpu_count() or 1)
    session = connect(address, workers, timeout)
    actors: list = []
    hosts: dict = {}
    try:
        cpus = ray.cluster_resources().get("CPU", 0.0)
        if cpus < workers:
            raise TournamentError(
                f"the Ray cluster has {plural(int(cpus), 'CPU')} for {plural(workers, 'worker')}; "
                f"use --workers {int(cpus)}"
            )
        remote_worker = ray.remote(num_cpus=1)(actor_class(MatchWorker))
        spec_ref = ray.put(spec)
        hosts.update({key: _new_host(spec, *key) for key in spec.hosted_entries()})
        ctx["hosts"] = hosts
        actors.extend(remote_worker.remote(spec_ref) for _ in range(workers))
        # Start-up ends when every worker process is up and has imported the project: that
        # is paid once per run, whatever its size, and is reported apart from the work.
        try:
            ray.get([a.ping.remote() for a in actors], timeout=START_TIMEOUT_S)
        except GetTimeoutError:
            raise TournamentError(
                f"the workers did not start within {START_TIMEOUT_S} s (is the cluster busy?)"
            ) from None
        except RayActorError as err:  # e.g. a node without the project, or refused calls
            why = next((line.strip() for line in str(err).splitlines() if line.strip()), "")
            raise TournamentError(f"the workers did not start: {why[:300]}") from err
        session.watch()  # the worker processes too, should the driver die
        ctx["ray_start_s"] = time.perf_counter() - t0
        ctx["actors"] = actors
        _schedule(todo, actors, hosts, remote_worker, spec_ref, spec, store_result, ctx)
    finally:
        for actor in [*actors, *hosts.values()]:
            with contextlib.suppress(Exception):
                ray.kill(actor)
        session.close()


def _schedule(todo, actors, hosts, remote_worker, spec_ref, spec, store_result, ctx) -> None:
    """Keep every worker busy with units until none is left; replace what dies."""
    import ray
    from ray.exceptions import RayActorError, RayTaskError

    retries: deque[Unit] = deque()  # units to play again, before the rest of the plan
    in_flight: dict = {}  # ObjectRef -> (actor slot, unit)
    failures: dict[Unit, int] = {}

    def submit(slot: int) -> None:
        unit = retries.popleft() if retries else next(todo, None)
        if unit is not None:
            in_flight[actors[slot].play.remote(unit, hosts)] = (slot, unit)

    def retry(units: list[Unit], why: str) -> None:
        for unit in units:
            failures[unit] = failures.get(unit, 0) + 1
            if failures[unit] >= MAX_ATTEMPTS:
                raise TournamentError(
                    f"unit {unit.match_id} markets {unit.start}-{unit.stop - 1} failed "
                    f"{failures[unit]} times; last: {why}"
                )
        retries.extend(units)
        ctx["retried"] += len(units)

    for slot in range(len(actors)):
        for _ in range(IN_FLIGHT_PER_WORKER):
            submit(slot)
    while in_flight:
        ready, _ = ray.wait(list(in_flight), num_returns=1)
        ref = ready[0]
        slot, unit = in_flight.pop(ref)
        try:
            result = ray.get(ref)
        except RayTaskError as err:
            # The worker lives but the unit raised: a policy bug, or a hosted agent that
            # died under it. Replace dead hosts and try the unit again, a few times.
            for key, host in list(hosts.items()):
                if not _alive(host):
                    hosts[key] = _new_host(spec, *key)
                    ctx["replaced"] += 1
            retry([unit], _first_line(err) + where_raised(err))
            submit(slot)
            continue
        except RayActorError as err:
            # The worker died (killed, out of memory, node lost): replace it and play
            # every unit it held again. Results are pure, so nothing changes.
            lost = [u for r, (s, u) in list(in_flight.items()) if s == slot]
            for r in [r for r, (s, _) in in_flight.items() if s == slot]:
                in_flight.pop(r)
            retry([unit, *lost], _first_line(err))
            actors[slot] = remote_worker.remote(spec_ref)
            ctx["replaced"] += 1
            for _ in range(IN_FLIGHT_PER_WORKER):
                submit(slot)
            continue
        store_result(result)
        submit(slot)


def _new_host(spec: TournamentSpec, side: str, name: str):
    import ray

    from agents import registry
    from tournaments.raysession import actor_class

    entry = registry.get(name, side) if spec.buyer_spec(name) == name else None
    # Hosts hold no CPU reservation, so that hosting a cheap entry remotely does not starve
    # the workers; an entry that needs a GPU says so in the registry and gets one.
    gpus = entry.num_gpus if entry is not None else 0.0
    host_cls = ray.remote(num_cpus=0, num_gpus=gpus)(actor_class(PolicyHost))
    return host_cls.remote(
        side, spec.buyer_spec(name) if side == "buyer" else name, spec.checkpoint_data
    )


def _alive(host) -> bool:
    import ray

    try:
        ray.get(host.describe.remote(), timeout=30)
        return True
    except Exception:  # noqa: BLE001 - any failure to answer means it must be replaced
        return False


def _first_line(err: Exception) -> str:
    text = str(err).strip().splitlines()
    return text[-1][:300] if text else type(err).__name__


class _NoBar:
    def update(self, n: int) -> None:
        pass


@contextlib.contextmanager
def _progress(total: int, done: int, spec: TournamentSpec, enabled: bool, ctx: dict, file=None):
    """The run's progress bar; one that stopped before its first unit is cleared (the error
    says why)."""
    if not enabled:
        yield _NoBar()
        return
    from tqdm import tqdm

    # None: no bar where the output is no terminal (a pipe, a log file).
    bar = tqdm(total=total, initial=done, unit="unit", desc=spec.name, dynamic_ncols=True,
               file=file, disable=None)  # fmt: skip
    try:
        yield bar
    except BaseException:
        bar.leave = ctx["units"] > 0
        raise
    finally:
        bar.close()
