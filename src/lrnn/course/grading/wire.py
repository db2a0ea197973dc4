"""Plain data between the grader and a student's kernel: length-prefixed JSON frames.

What may travel: ``None``, bools, ints, floats, complex numbers, strings; tuples, lists and
dicts of these; NumPy arrays and scalars of boolean, integer, floating or complex dtype (sent
as raw bytes with dtype and shape); JAX arrays (tagged, rebuilt as JAX arrays on the other
side); JAX PRNG keys; and, from the grader to a kernel only, ``lrnn.model.ModelConfig`` (its
fields, rebuilt and validated by the class in the kernel). Nothing is pickled: the grader
parses what a kernel sends as data, so a kernel can send wrong answers but never code.

Neither side trusts a frame's size, depth or dtype: :func:`decode` checks each against fixed
limits and raises :class:`WireError` on anything else.
"""
from __future__ import annotations

import base64
import dataclasses
import json
import struct

import numpy as np

#: Largest frame a kernel may send to the grader (a result), and the grader to a kernel.
MAX_REPLY = 64 * 2 ** 20
MAX_REQUEST = 256 * 2 ** 20
MAX_DEPTH = 32
MAX_NODES = 200_000
#: Containers and separators in one frame, counted before it is parsed (a frame of a
#: million empty dicts would take gigabytes once parsed).
MAX_FRAME_TOKENS = 1_000_000
MAX_NDIM = 32
_HEADER = struct.Struct(">I")
_ARRAY_KINDS = "biufc"
_EXTRA_DTYPES = ("bfloat16", "float8_e4m3fn", "float8_e5m2")
_KEY_IMPLS = ("threefry2x32", "rbg", "unsafe_rbg")


class WireError(ValueError):
    """A value that cannot be sent, or a frame that cannot be read."""


class Unsendable(WireError):
    """The value (its type in ``type_name``) is not plain data."""

    def __init__(self, message, type_name=""):
        super().__init__(message)
        self.type_name = type_name


# ---------------------------------------------------------------------------------------
# Frames
# ---------------------------------------------------------------------------------------

def pack(message: dict) -> bytes:
    body = json.dumps(message, separators=(",", ":"), allow_nan=True).encode("utf-8")
    return _HEADER.pack(len(body)) + body


class FrameReader:
    """Accumulates bytes; yields complete frames (parsed) as they arrive."""

    def __init__(self, limit: int):
        self.limit = limit
        self.buffer = bytearray()

    def feed(self, data: bytes) -> list:
        self.buffer += data
        frames = []
        while len(self.buffer) >= _HEADER.size:
            (size,) = _HEADER.unpack_from(self.buffer)
            if size > self.limit:
                raise WireError(f"a frame of {size} bytes (the limit is {self.limit})")
            if len(self.buffer) < _HEADER.size + size:
                break
            body = bytes(self.buffer[_HEADER.size:_HEADER.size + size])
            del self.buffer[:_HEADER.size + size]
            tokens = body.count(b"[") + body.count(b"{") + body.count(b",")
            if tokens > MAX_FRAME_TOKENS:           # bounds what json.loads builds
                raise WireError(f"a frame of {tokens:,} items (the limit is "
                                f"{MAX_FRAME_TOKENS:,})")
            try:
                frames.append(json.loads(body.decode("utf-8")))
            except (ValueError, RecursionError) as e:
                raise WireError(f"an unreadable frame ({type(e).__name__})") from None
        return frames


# ---------------------------------------------------------------------------------------
# Values
# ---------------------------------------------------------------------------------------

def _jax():
    import jax
    return jax


def _is_model_config(x) -> bool:
    import sys
    model = sys.modules.get("lrnn.model")
    return model is not None and type(x) is model.ModelConfig


def _is_jax_array(x) -> bool:
    import sys
    jax = sys.modules.get("jax")
    return jax is not None and isinstance(x, jax.Array)


def _array(arr: np.ndarray, *, jax: bool) -> dict:
    if arr.dtype.kind not in _ARRAY_KINDS and arr.dtype.name not in _EXTRA_DTYPES:
        raise Unsendable(f"an array of dtype {arr.dtype} (only numbers and booleans can be "
                         "sent)", f"ndarray[{arr.dtype}]")
    if arr.ndim > MAX_NDIM:
        raise Unsendable(f"an array with {arr.ndim} axes", "ndarray")
    if arr.nbytes > MAX_REPLY:
        raise Unsendable(f"an array of {arr.nbytes:,} bytes (the limit is {MAX_REPLY:,})",
                         "ndarray")
    if not arr.flags.c_contiguous:
        arr = np.array(arr, order="C")      # (ascontiguousarray would make 0-d arrays 1-d)
    dtype = arr.dtype.name if arr.dtype.name in _EXTRA_DTYPES else arr.dtype.str
    return {"t": "nd", "dtype": dtype, "shape": list(arr.shape), "jax": jax,
            "b64": base64.b64encode(arr.tobytes()).decode("ascii")}


def encode(value, *, ref=None, _depth=0, _count=None):
    """``value`` as JSON-ready plain data. ``ref(value)`` may return a name for an object that
    stands for one on the other side (the grader's proxies of notebook functions)."""
    count = _count if _count is not None else [0]
    count[0] += 1
    if count[0] > MAX_NODES:
        raise Unsendable(f"a value with more than {MAX_NODES:,} items", "container")
    if _depth > MAX_DEPTH:
        raise Unsendable(f"a value nested more than {MAX_DEPTH} levels deep", "container")
    if ref is not None:
        name = ref(value)
        if name is not None:
            return {"t": "ref", "name": name}
    if isinstance(value, np.generic):         # before float: np.float64 is a float
        arr = np.asarray(value)
        out = _array(arr, jax=False)
        out["t"] = "np"
        return out
    if value is None or isinstance(value, (bool, str)):
        return value if type(value) in (bool, str) or value is None else \
            (bool(value) if isinstance(value, bool) else str(value))
    if isinstance(value, int):
        if abs(value) >= 2 ** 4000:
            raise Unsendable("an integer of more than 4000 bits", "int")
        return value if type(value) is int else int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, complex):
        return {"t": "complex", "re": value.real, "im": value.imag}
    if isinstance(value, np.ndarray):
        return _array(value, jax=False)
    if _is_jax_array(value):
        jax = _jax()
        if jax.numpy.issubdtype(value.dtype, jax.dtypes.prng_key):
            impl = str(jax.random.key_impl(value))
            data = np.asarray(jax.random.key_data(value))
            return {"t": "key", "impl": impl, "data": _array(data, jax=False)}
        return _array(np.asarray(value), jax=True)
    kw = dict(ref=ref, _depth=_depth + 1, _count=count)
    if isinstance(value, tuple):
        return {"t": "tuple", "v": [encode(v, **kw) for v in value]}
    if isinstance(value, list):
        return [encode(v, **kw) for v in value]
    if isinstance(value, dict):
        keys, values = [], []
        for k, v in value.items():
            if not isinstance(k, (str, int, float, bool, tuple)) and k is not None:
                raise Unsendable(f"a dict with a key of type {type(k).__name__}", "dict")
            keys.append(encode(k, **kw))
            values.append(encode(v, **kw))
        return {"t": "dict", "k": keys, "v": values}
    if _is_model_config(value):
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value) if f.init}
        return {"t": "model_config", "v": encode(fields, **kw)}
    raise Unsendable(f"a value of type {type(value).__name__}", type(value).__name__)


def _decode_array(obj: dict, *, as_jax: bool):
    name = obj.get("dtype")
    if not isinstance(name, str) or len(name) > 20:
        raise WireError("an array without a valid dtype")
    if name in _EXTRA_DTYPES:
        import ml_dtypes
        dtype = np.dtype(getattr(ml_dtypes, name))
    else:
        try:
            dtype = np.dtype(name)
        except TypeError:
            raise WireError(f"an array of unknown dtype {name!r}") from None
        if dtype.kind not in _ARRAY_KINDS or dtype.str != name:
            raise WireError(f"an array of dtype {name!r}")
    shape = obj.get("shape")
    if not isinstance(shape, list) or len(shape) > MAX_NDIM or \
            not all(type(s) is int and 0 <= s < 2 ** 40 for s in shape):
        raise WireError("an array with an invalid shape")
    raw = obj.get("b64")
    if not isinstance(raw, str):
        raise WireError("an array without data")
    try:
        data = base64.b64decode(raw.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError):
        raise WireError("an array with corrupt data") from None
    size = 1
    for s in shape:
        size *= s
    if size * dtype.itemsize != len(data):
        raise WireError("an array whose data does not match its shape")
    arr = np.frombuffer(data, dtype=dtype).reshape(shape).copy()
    if as_jax and obj.get("jax") is True:
        return _jax().numpy.asarray(arr)
    return arr


def decode(obj, *, resolve=None, jax_arrays=True, _depth=0, _count=None):
    """Inverse of :func:`encode`. ``resolve(name)`` turns a ``ref`` back into an object (only
    the kernel accepts refs). With ``jax_arrays`` False, JAX arrays arrive as NumPy arrays."""
    count = _count if _count is not None else [0]
    count[0] += 1
    if count[0] > MAX_NODES or _depth > MAX_DEPTH:
        raise WireError("a value too large or too deeply nested")
    if obj is None or isinstance(obj, (bool, str, float)):
        return obj
    if isinstance(obj, int):
        return obj
    kw = dict(resolve=resolve, jax_arrays=jax_arrays, _depth=_depth + 1, _count=count)
    if isinstance(obj, list):
        return [decode(v, **kw) for v in obj]
    if not isinstance(obj, dict):
        raise WireError(f"unexpected JSON value of type {type(obj).__name__}")
    tag = obj.get("t")
    if tag == "nd":
        return _decode_array(obj, as_jax=jax_arrays)
    if tag == "np":
        arr = _decode_array(dict(obj, jax=False), as_jax=False)
        if arr.shape != ():
            raise WireError("a NumPy scalar with a shape")
        return arr[()]
    if tag == "complex":
        re, im = obj.get("re"), obj.get("im")
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (re, im)):
            raise WireError("a complex number with non-numeric parts")
        return complex(re, im)
    if tag == "tuple":
        items = obj.get("v")
        if not isinstance(items, list):
            raise WireError("a tuple without items")
        return tuple(decode(v, **kw) for v in items)
    if tag == "dict":
        keys, values = obj.get("k"), obj.get("v")
        if not isinstance(keys, list) or not isinstance(values, list) or \
                len(keys) != len(values):
            raise WireError("a dict with mismatched keys and values")
        out = {}
        for k, v in zip(keys, values):
            key = decode(k, **kw)
            if isinstance(key, (list, dict, np.ndarray)):
                raise WireError("a dict key that is not hashable")
            out[key] = decode(v, **kw)
        return out
    if tag == "key":
        impl = obj.get("impl")
        if impl not in _KEY_IMPLS:
            raise WireError(f"a PRNG key of unknown implementation {impl!r}")
        data = _decode_array(dict(obj.get("data") or {}, jax=False), as_jax=False)
        if not jax_arrays:
            return data
        return _jax().random.wrap_key_data(data, impl=impl)
    if tag == "model_config":
        if resolve is None:                   # a kernel's reply is data, never a config
            raise WireError("a model configuration where none is allowed")
        fields = decode(obj.get("v"), **kw)
        if not isinstance(fields, dict) or not all(isinstance(k, str) for k in fields):
            raise WireError("a model configuration without named fields")
        from lrnn.model import ModelConfig
        try:
            return ModelConfig(**fields)
        except (TypeError, ValueError) as e:
            raise WireError(f"an invalid model configuration ({e})") from None
    if tag == "ref":
        name = obj.get("name")
        if resolve is None or not isinstance(name, str):
            raise WireError("a reference to a notebook object where none is allowed")
        return resolve(name)
    raise WireError(f"unknown tag {tag!r}")
