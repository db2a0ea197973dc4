"""Argument checks shared by the library: every bad input raises a ValueError that names the
argument, the value received and what was expected."""
from __future__ import annotations

import functools
import math
import numbers

import numpy as np

from . import _aliases


def describe_value(x) -> str:
    """A short description of ``x`` for error messages: shape and dtype for arrays, the keys
    of a dict, and at most 120 characters of any other ``repr``."""
    shape = getattr(x, "shape", None)
    if shape is not None:
        return f"an array of shape {tuple(shape)} and dtype {getattr(x, 'dtype', '?')}"
    if isinstance(x, dict):
        return f"a dict with keys {sorted(map(str, x))}"
    if isinstance(x, (list, tuple)) and any(hasattr(v, "shape") for v in x):
        return f"a {type(x).__name__} of {len(x)} arrays"
    if isinstance(x, (list, tuple)) and any(isinstance(v, (dict, list, tuple)) for v in x):
        return f"a {type(x).__name__} of {len(x)} items"
    text = " ".join(repr(x).split())
    return text if len(text) <= 120 else text[:117] + "..."


def fail(name: str, value, expected: str):
    raise ValueError(f"`{name}`: got {describe_value(value)}, expected {expected}.")


def require_ndim_at_least(name: str, x, ndim: int, layout: str):
    if np.ndim(x) < ndim:
        fail(name, x, f"at least {ndim} dimensions laid out as {layout}")


def require_choice(name: str, value, choices):
    """``value`` is one of ``choices`` (by equality and type: ``1`` is not ``True``, and an
    array or a list is never a choice)."""
    try:
        ok = any((isinstance(value, str) if isinstance(c, str) else type(value) is type(c))
                 and value == c for c in choices)
    except (TypeError, ValueError):
        ok = False
    if not ok:
        listed = sorted(choices, key=repr)
        raise ValueError(f"`{name}`: got {describe_value(value) if not isinstance(value, str) else repr(value)}, "
                         f"expected one of {listed}.")


def require_bool(name: str, value) -> bool:
    """``value`` is ``True`` or ``False`` (a NumPy bool too); a string such as ``"no"``, a
    number or ``None`` is refused, since its truth would be taken silently."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    fail(name, value, "True or False")


def require_real_params(name: str, params, keys):
    """Each ``params[k]`` holds real floating-point numbers (not complex, bool or text)."""
    for k in keys:
        v = params[k]
        dtype = getattr(v, "dtype", None)
        if dtype is None:
            try:
                dtype = np.asarray(v).dtype
            except (TypeError, ValueError):
                fail(f"{name}[{k!r}]", v, "a real floating-point array")
        if not np.issubdtype(dtype, np.floating) and str(dtype) != "bfloat16":
            fail(f"{name}[{k!r}]", v, "a real floating-point array (not complex, integer, "
                                      "boolean or text)")


def require_positive_int(name: str, value):
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"`{name}`: got {value!r}, expected a positive integer.")


def require_real(name: str, value) -> float:
    """``value`` as a float: a finite real scalar (Python, NumPy or 0-d JAX), not a bool."""
    ok = (np.ndim(value) == 0 and not isinstance(value, (bool, np.bool_))
          and np.issubdtype(np.asarray(value).dtype, np.number)
          and not np.iscomplexobj(value))
    if not ok or not math.isfinite(float(value)):
        fail(name, value, "a finite real number")
    return float(value)


def as_real_array(name: str, x, layout: str):
    """``x`` as a real JAX array: floats as they are, integers converted to the default float
    type; complex, boolean and non-numeric data (and ragged lists) raise a ValueError."""
    import jax
    import jax.numpy as jnp

    if not isinstance(x, jax.Array):              # NumPy first: it names what it cannot read
        try:
            x = np.asarray(x)
        except (TypeError, ValueError):
            fail(name, x, f"a real numeric array laid out as {layout}")
        if x.dtype == object or not (np.issubdtype(x.dtype, np.number) or x.dtype == np.bool_):
            fail(name, x, f"a real numeric array laid out as {layout}")
    arr = jnp.asarray(x)
    if jnp.issubdtype(arr.dtype, jnp.complexfloating):
        fail(name, arr, f"a real array laid out as {layout} (not complex)")
    if arr.dtype == jnp.bool_ or not jnp.issubdtype(arr.dtype, jnp.number):
        fail(name, arr, f"a real numeric array laid out as {layout}")
    if jnp.issubdtype(arr.dtype, jnp.integer):
        arr = arr.astype(jnp.result_type(float))
    return arr


def require_sequence(name: str, u, features: int, feature_name: str = "d_model"):
    """A real input sequence of shape ``(..., L, features)`` with ``L >= 1``, as a JAX array
    (integers converted to floats, see :func:`as_real_array`)."""
    layout = f"(..., L, {feature_name})"
    u = as_real_array(name, u, layout)
    require_ndim_at_least(name, u, 2, layout)
    if u.shape[-1] != features:
        fail(name, u, f"a last dimension of size {feature_name} = {features}, laid out as {layout}")
    if u.shape[-2] == 0:
        fail(name, u, "at least one time step on axis -2 (L >= 1)")
    return u


def require_key(name: str, key):
    """A ``jax.random`` key: ``jax.random.key(0)`` (typed, shape ``()``) or
    ``jax.random.PRNGKey(0)`` (raw ``uint32`` key data of shape ``(2,)``)."""
    import jax

    dtype = getattr(key, "dtype", None)
    if dtype is not None:
        if jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key) and np.shape(key) == ():
            return
        if dtype == np.uint32 and np.ndim(key) == 1 and np.shape(key)[0] >= 2:
            return
    fail(name, key, "a PRNG key such as jax.random.PRNGKey(0) or jax.random.key(0)")


def require_params(name: str, params, keys, origin: str):
    """``params`` is a dict holding every name in ``keys`` (``origin``: where such a dict
    comes from, e.g. ``"lrnn.layers.lru.init"``)."""
    if not isinstance(params, dict):
        fail(name, params, f"a dict of parameters (from {origin})")
    missing = [k for k in keys if k not in params]
    if missing:
        listed = ", ".join(repr(k) for k in missing)
        fail(name, params, f"a dict with the key{'s' if len(missing) > 1 else ''} {listed} "
             f"(from {origin})")
    require_real_params(name, params, keys)


def require_finite(name: str, value, *, low: float | None = None, strict: bool = False) -> float:
    """A finite real number (see :func:`require_real`), optionally ``> low`` (``strict``) or
    ``>= low``."""
    value = require_real(name, value)
    if low is not None and (value < low or (strict and value == low)):
        fail(name, value, f"a finite number {'>' if strict else '>='} {low}")
    return value


def renamed_keywords(**renames):
    """Decorator: ``old=new`` keyword renames. A call with an old name still works, with a
    DeprecationWarning naming the new one; both at once is a TypeError."""
    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            for old, new in renames.items():
                if old in kwargs:
                    if new in kwargs:
                        raise TypeError(f"{fn.__name__}() got both {new!r} and its old name {old!r}")
                    _aliases.warn_keyword(f"{fn.__module__}.{fn.__name__}", old, new)
                    kwargs[new] = kwargs.pop(old)
            return fn(*args, **kwargs)
        return wrapper
    return decorate
