"""Leak the hidden tests' inputs (attack 10): log every request the grader sends to
the kernel (the hidden inputs, the forbid targets, the counted names) and raise with the log,
from the calls and from a later cell, so that it lands in my feedback."""
# %%
import lrnn.course.grading.harness as _h

_LOG = []
_orig = _h.Harness.op_call


def _op_call(self, request):
    _LOG.append("LEAKED-REQUEST " + repr(request)[:2000])
    return {"status": "raised", "ename": "ValueError", "evalue": "\n".join(_LOG)[-8000:],
            "counts": {}}


_h.Harness.op_call = _op_call
