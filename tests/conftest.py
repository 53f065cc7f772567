"""Shared fixtures: one Ray instance for the whole test session."""

from __future__ import annotations

import pytest


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
