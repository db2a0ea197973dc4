"""The peers of ``lrnn``'s GPU scan, timed in the benchmark's process on the benchmark's data.

* accelerated-scan (``accelerated_scan.scalar.scan``): a Triton kernel, layout ``(B, C, T)``,
  ``x_t = gate_t x_{t-1} + token_t``;
* flash-linear-attention's chunked HGRN (``fla.ops.hgrn.chunk_hgrn``): layout ``(B, T, D)``,
  ``h_t = exp(g_t) h_{t-1} + x_t``, so it receives ``g = log a``.

Both run on PyTorch. They are an optional extra (``pip install "lrnn[peers]"``); when absent,
``load_peers`` returns a one-line notice per missing peer and the benchmark goes on without
them. The data are converted to each peer's layout outside the timing (with ``torch``'s DLPack
import of the JAX arrays), and each peer's output is converted back and compared with ours.
"""
from __future__ import annotations

import dataclasses
import statistics
import time


@dataclasses.dataclass
class Peer:
    label: str
    prepare: object          # (torch a, torch b, torch g) -> (args, cotangent) in its layout
    run: object              # (*args) -> output in its layout
    to_ours: object          # output -> (B, L, N) torch tensor


def load_peers():
    """``(peers, notices)``: the peers that import here, and a one-line notice per absent one."""
    notices, peers = [], []
    try:
        import torch
    except ImportError:
        return [], ["peers: skipped (PyTorch is not installed; `pip install \"lrnn[peers]\"`)"]
    if not torch.cuda.is_available():
        return [], ["peers: skipped (PyTorch sees no CUDA GPU)"]
    try:
        from accelerated_scan.scalar import scan as as_scan

        def prep_as(a, b, g):
            t = lambda v: v.permute(0, 2, 1).contiguous()           # noqa: E731
            return (t(a), t(b)), t(g)
        peers.append(Peer("peer: accelerated-scan (Triton)", prep_as, as_scan,
                          lambda y: y.permute(0, 2, 1)))
    except Exception as err:                                          # noqa: BLE001
        notices.append(f"peers: accelerated-scan skipped ({type(err).__name__}: {err}; "
                       "`pip install \"lrnn[peers]\"`)")
    try:
        from fla.ops.hgrn import chunk_hgrn

        def prep_fla(a, b, g):
            return (b.contiguous(), torch.log(a).contiguous()), g.contiguous()
        peers.append(Peer("peer: fla chunk_hgrn", prep_fla,
                          lambda x, gl: chunk_hgrn(x, gl)[0], lambda y: y))
    except Exception as err:                                          # noqa: BLE001
        notices.append(f"peers: flash-linear-attention skipped ({type(err).__name__}: {err}; "
                       "`pip install \"lrnn[peers]\"`)")
    return peers, notices


def _torch(x):
    import torch
    try:
        return torch.from_dlpack(x)
    except Exception:                                                 # noqa: BLE001
        import numpy as np
        return torch.from_numpy(np.asarray(x)).cuda()


def _times(fn, repeats):
    import torch
    fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        ts.append(time.perf_counter() - t0)
    return min(ts), statistics.median(ts)


def time_peer(peer: Peer, a, b, g, ours, *, repeats: int) -> dict:
    """Time ``peer`` forward and forward+backward on JAX arrays ``a, b, g`` (B, L, N) float32
    and compare its output with ``ours``."""
    row = {"shape": list(b.shape), "dtype": "float32", "a": "time-varying (B, L, N)",
           "label": peer.label, "method": None}
    try:
        ta, tb, tg = (_torch(v) for v in (a, b, g))
        args, cot = peer.prepare(ta, tb, tg)
        y = peer.run(*args)
        mine = _torch(ours)
        row["err_vs_first_row"] = float((peer.to_ours(y) - mine).abs().max() / mine.abs().max())
        row["fwd_s"], row["fwd_median_s"] = _times(lambda: peer.run(*args), repeats)
        grads = [v.detach().clone().requires_grad_() for v in args]

        def fb():
            out = peer.run(*grads)
            out.backward(cot)
        row["fwdbwd_s"], row["fwdbwd_median_s"] = _times(fb, repeats)
    except Exception as err:                                          # noqa: BLE001
        row["error"] = f"{type(err).__name__}: {str(err)[:300]}"
    return row
