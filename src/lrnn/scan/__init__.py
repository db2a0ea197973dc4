"""Linear scans: one API, interchangeable backends, and a reference beside the fast ones.

``linear_scan(a, b)`` computes the first-order linear recurrence

    x_t = a_t * x_{t-1} + b_t,        x_{-1} = 0,

along axis -2 of ``b`` (shape ``(..., L, N)``); ``initial=`` starts it from another state
``x_{-1}`` (``(..., N)``, folded into the first input, so every backend runs unchanged) and
``return_final=True`` also returns the last state, so a sequence runs chunk by chunk (with
``reverse=True`` the scan starts from ``x_L`` and its final state is ``x_0``). It is the
recurrence of the LRU (LRU §3.3, eq. 3 after diagonalisation) and, through ``rotation_scan``,
of the RotRNN (RotRNN eq. 6 in the rotated basis, Appendix B.1).

Backends (``method=``):

* ``"sequential"``  — ``lax.scan`` over time: the reference, O(L) steps of O(N) work.
* ``"associative"`` — ``lax.associative_scan`` with the operator
  ``(a, b) ∘ (a', b') = (a'·a, a'·b + b')``, as in the LRU appendix and the RotRNN code.
* ``"chunked"``     — a sequential scan inside chunks of length ``T`` (all chunks at once),
  a short sequential scan over the chunk ends, then one fix-up multiply.
* ``"pallas"``      — a Pallas kernel (``lrnn.scan.pallas``; the kernel in ``pallas_triton``, its
  tiles per GPU generation in ``pallas_tuning``): an unrolled time loop with the state in
  registers, reading ``b`` and writing ``x`` once, cut into chunks of time when batch × channels
  cannot fill the GPU. Compiled with Triton on a GPU, run in Pallas interpret mode (slow, for
  testing) elsewhere.
* ``"auto"``        — the fastest method that can run the call here (see ``describe``).

``linear_scan_planes(a, b_re, b_im)`` is the same complex scan with its inputs and states
kept as two real planes: the layers use it so that the Pallas kernel reads and writes planes
with no complex array split or joined around it (``complex_arrays()`` turns that off, for
the benchmark's comparison).

``override(fn)`` (a context manager) makes ``linear_scan`` return ``fn(a, b, reverse)``
instead, to time or study a model with another scan (the benchmarks use the papers' code).

Every method is differentiated by the same custom VJP: the adjoint of a linear recurrence is
the same recurrence run backwards, so the backward pass is one more scan and the memory kept
for it is ``a`` and ``x``, O(L·N), instead of every level of the associative scan.

``reference`` holds the NumPy float64 transcriptions (``linear_scan``, ``rotation_scan``,
``linear_scan_vjp``) that the tests and ``lrnn doctor`` compare every backend with.

Layout: ``sequential`` (the JAX reference), ``associative``, ``chunked`` and ``pallas`` (the GPU
kernel, with ``pallas_triton`` and ``pallas_tuning``) are the backends; ``_api`` holds ``linear_scan``/``rotation_scan`` and
the custom VJP, ``_choose`` what ``"auto"`` picks. Imports only ``jax``, NumPy and ``lrnn._validate``.
"""
from . import associative, chunked, reference, sequential
from ._api import (METHODS, available_methods, complex_arrays, complex_to_pairs, linear_scan,
                   linear_scan_planes, override, pairs_to_complex, rotation_scan)
from ._choose import choose_method, describe
from .associative import binary_operator
from .chunked import default_chunk_size

__all__ = ["linear_scan", "linear_scan_planes", "rotation_scan", "choose_method", "describe",
           "binary_operator", "available_methods", "METHODS", "pairs_to_complex", "complex_to_pairs",
           "default_chunk_size", "override", "complex_arrays", "sequential", "associative",
           "chunked",
           "reference"]
