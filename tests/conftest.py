"""Shared fixtures: one Ray instance for the whole test session, and the benchmark
scripts of ``benchmarks/`` loaded as modules."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture(scope="session")
def load_benchmark():
    """``load_benchmark("generalization")``: ``benchmarks/generalization.py`` as a module
    (the scripts are files to run, not an installed package)."""

    def load(name: str):
        spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load


@pytest.fixture(scope="session")
def ray_session():
    """An embedded local Ray with two CPUs, started once and shut down at the end."""
    ray = pytest.importorskip("ray")
    if not ray.is_initialized():
        ray.init(
            num_cpus=2,
            include_dashboard=False,
            log_to_driver=False,
            object_store_memory=150 * 1024 * 1024,
        )
    yield ray
    ray.shutdown()


def isolate_registry(monkeypatch) -> None:
    """The registry's entries, the modules ``--agents`` loaded and ``sys.path`` as they
    are now, back after the test: entries a test registers stay in it."""
    import sys

    from agents import registry
    from tournaments.cli import own_agents

    monkeypatch.setattr(registry, "_ENTRIES", dict(registry._ENTRIES))
    monkeypatch.setattr(own_agents, "_LOADED", {})
    monkeypatch.setattr(own_agents, "_REGISTERED_HERE", set())
    monkeypatch.setattr(sys, "path", list(sys.path))
