import jax
import numpy as np
import pytest


@pytest.fixture
def x64():
    """Run a test in float64, restoring the previous setting afterwards."""
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", previous)


@pytest.fixture
def rng():
    return np.random.default_rng(20231)
