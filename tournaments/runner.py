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

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tournaments.remote import PolicyHost
from tournaments.spec import TournamentSpec
from tournaments.store import ResultStore
from tournaments.types import Unit, UnitResult
from tournaments.worker import MatchWorker, plan_units

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


def run_tournament(
    spec: TournamentSpec,
    folder: str | Path,
    workers: int = 2,
    address: str | None = None,
    use_ray: bool = True,
    progress: bool = True,
    unit_markets: int = 1000,
    on_result: Callable[[UnitResult, dict], None] | None = None,
    extend: bool = False,
) -> RunSummary:
    """Play every unit of ``spec`` not yet stored in ``folder``; resumable at any point.
    ``extend``: ``folder`` may hold a run of a spec that ``spec`` extends (more entries);
    only the new matches are played (``ResultStore.create_or_resume``)."""
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    t0 = time.perf_counter()
    store = ResultStore.create_or_resume(folder, spec, unit_markets, extend=extend)
    try:
        done = store.done_units()
        units = plan_units(spec, unit_markets)
        todo = [u for u in units if (u.match_id, u.start) not in done]
        bar = _progress(len(units), len(units) - len(todo), spec, progress)
        ctx: dict = {"replaced": 0, "ray_start_s": 0.0}

        def store_result(result: UnitResult) -> None:
            store.write(result)
            bar.update(1)
            if on_result is not None:
                on_result(result, ctx)

        if todo:
            if use_ray:
                _run_ray(spec, todo, workers, address, store_result, ctx)
            else:
                if spec.hosted_entries():
                    raise ValueError("hosted entries need Ray: run without --no-ray")
                worker = MatchWorker(spec)
                for unit in todo:
                    try:
                        result = worker.play(unit)
                    except Exception as err:  # a policy bug: stop with what is stored kept
                        raise TournamentError(
                            f"unit {unit.match_id} markets {unit.start}-{unit.stop - 1} "
                            f"failed: {type(err).__name__}: {err}"
                        ) from err
                    store_result(result)
        bar.close()
        return RunSummary(
            folder=Path(folder),
            units_total=len(units),
            units_run=len(todo),
            markets_run=sum(u.stop - u.start for u in todo),
            wall_s=time.perf_counter() - t0,
            ray_start_s=ctx["ray_start_s"],
            workers_replaced=ctx["replaced"],
        )
    finally:
        store.close()


def init_ray(address: str | None, workers: int) -> float:
    """Start (or join) Ray once per process; returns the seconds it took."""
    import ray

    if ray.is_initialized():
        return 0.0
    t0 = time.perf_counter()
    address = address or os.environ.get("RAY_ADDRESS") or None
    if address:
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    else:
        ray.init(
            num_cpus=workers,
            include_dashboard=False,
            log_to_driver=False,
            object_store_memory=200 * 1024 * 1024,
            # A unit's result (about 150 KB) then comes back inline with the reply instead of
            # through the shared-memory store, which costs the driver a fetch per unit.
            _system_config={"max_direct_call_object_size": 1 << 20},
        )
    return time.perf_counter() - t0


class TournamentError(RuntimeError):
    """A run that cannot go on (a unit that keeps failing, a cluster too small); what was
    stored stays stored, and rerunning the same command resumes."""


def _run_ray(spec, todo: list[Unit], workers: int, address, store_result, ctx: dict) -> None:
    import ray
    from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

    t0 = time.perf_counter()
    init_ray(address, workers)
    cpus = ray.cluster_resources().get("CPU", 0.0)
    if cpus < workers:
        raise TournamentError(
            f"the Ray cluster has {cpus:g} CPUs for {workers} workers; use --workers {int(cpus)}"
        )
    remote_worker = ray.remote(num_cpus=1)(MatchWorker)
    spec_ref = ray.put(spec)
    hosts = {key: _new_host(spec, *key) for key in spec.hosted_entries()}
    ctx["hosts"] = hosts
    actors = [remote_worker.remote(spec_ref) for _ in range(workers)]
    # Start-up ends when every worker process is up and has imported the project: that is
    # paid once per run, whatever its size, and is reported apart from the work.
    try:
        ray.get([a.ping.remote() for a in actors], timeout=START_TIMEOUT_S)
    except GetTimeoutError:
        raise TournamentError(
            f"the workers did not start within {START_TIMEOUT_S} s (is the cluster busy?)"
        ) from None
    ctx["ray_start_s"] = time.perf_counter() - t0
    ctx["actors"] = actors
    queue = list(reversed(todo))  # pop() from the end keeps the planned order
    in_flight: dict = {}  # ObjectRef -> (actor slot, unit)
    stored: set[tuple[str, int]] = set()
    failures: dict[Unit, int] = {}

    def submit(slot: int) -> None:
        if queue:
            unit = queue.pop()
            in_flight[actors[slot].play.remote(unit, hosts)] = (slot, unit)

    def retry(units: list[Unit], why: str) -> None:
        for unit in units:
            failures[unit] = failures.get(unit, 0) + 1
            if failures[unit] >= MAX_ATTEMPTS:
                raise TournamentError(
                    f"unit {unit.match_id} markets {unit.start}-{unit.stop - 1} failed "
                    f"{failures[unit]} times; last: {why}"
                )
        queue.extend(reversed(units))

    for slot in range(workers):
        for _ in range(IN_FLIGHT_PER_WORKER):
            submit(slot)
    try:
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
                retry([unit], _first_line(err))
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
            if (unit.match_id, unit.start) not in stored:
                stored.add((unit.match_id, unit.start))
                store_result(result)
            submit(slot)
    finally:
        for actor in [*actors, *hosts.values()]:
            ray.kill(actor)


def _new_host(spec: TournamentSpec, side: str, name: str):
    import ray

    from agents import registry

    entry = registry.get(name, side) if spec.buyer_spec(name) == name else None
    # Hosts hold no CPU reservation, so that hosting a cheap entry remotely does not starve
    # the workers; an entry that needs a GPU says so in the registry and gets one.
    gpus = entry.num_gpus if entry is not None else 0.0
    host_cls = ray.remote(num_cpus=0, num_gpus=gpus)(PolicyHost)
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

    def close(self) -> None:
        pass


def _progress(total: int, done: int, spec: TournamentSpec, enabled: bool):
    if not enabled:
        return _NoBar()
    from tqdm import tqdm

    return tqdm(total=total, initial=done, unit="unit", desc=spec.name, dynamic_ncols=True)
