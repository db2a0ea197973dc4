"""Argument checks shared by the library: every bad input raises a ValueError that names the
argument, the value received and what was expected."""
from __future__ import annotations

import math
import numbers

import numpy as np


def describe_value(x) -> str:
    """A short description of ``x`` for error messages: shape and dtype for arrays."""
    shape = getattr(x, "shape", None)
    if shape is not None:
        return f"an array of shape {tuple(shape)} and dtype {getattr(x, 'dtype', '?')}"
    return repr(x)


def fail(name: str, value, expected: str):
    raise ValueError(f"`{name}`: got {describe_value(value)}, expected {expected}.")


def require_ndim_at_least(name: str, x, ndim: int, layout: str):
    if np.ndim(x) < ndim:
        fail(name, x, f"at least {ndim} dimensions laid out as {layout}")


def require_shape(name: str, x, shape: tuple, layout: str = ""):
    if tuple(np.shape(x)) != tuple(shape):
        hint = f" ({layout})" if layout else ""
        fail(name, x, f"shape {tuple(shape)}{hint}")


def require_choice(name: str, value, choices):
    if value not in choices:
        raise ValueError(f"`{name}`: got {value!r}, expected one of {sorted(choices)}.")


def require_positive_int(name: str, value):
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"`{name}`: got {value!r}, expected a positive integer.")


def require_even(name: str, value, what: str = ""):
    if value % 2:
        raise ValueError(f"`{name}`: got {value!r}, expected an even number{what}.")


def require_interval(name: str, value, low: float, high: float, *, closed: bool = True):
    ok = (low <= value <= high) if closed else (low < value < high)
    if not ok or not np.isfinite(value):
        brackets = f"[{low}, {high}]" if closed else f"({low}, {high})"
        raise ValueError(f"`{name}`: got {value!r}, expected a number in {brackets}.")


def require_real(name: str, value) -> float:
    """``value`` as a float: a finite real scalar (Python, NumPy or 0-d JAX), not a bool."""
    ok = (np.ndim(value) == 0 and not isinstance(value, (bool, np.bool_))
          and np.issubdtype(np.asarray(value).dtype, np.number)
          and not np.iscomplexobj(value))
    if not ok or not math.isfinite(float(value)):
        fail(name, value, "a finite real number")
    return float(value)


def require_sequence(name: str, u, features: int, feature_name: str = "d_model"):
    """A real input sequence of shape ``(..., L, features)`` with ``L >= 1``, as a JAX array."""
    import jax.numpy as jnp

    u = jnp.asarray(u)
    layout = f"(..., L, {feature_name})"
    require_ndim_at_least(name, u, 2, layout)
    if u.shape[-1] != features:
        fail(name, u, f"a last dimension of size {feature_name} = {features}, laid out as {layout}")
    if u.shape[-2] == 0:
        fail(name, u, "at least one time step on axis -2 (L >= 1)")
    if jnp.iscomplexobj(u):
        fail(name, u, "a real array")
    return u
