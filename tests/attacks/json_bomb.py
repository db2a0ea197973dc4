"""A JSON bomb (attack 7): every call the grader makes answers with a list of
twenty million empty dicts (about 60 MB on the wire, under the 64 MiB reply limit); parsed
whole, it took the grader from 175 MB to 3.46 GB."""
# %%
import lrnn.course.grading.harness as _h

_bomb = [{}] * 20_000_000


def _op_call(self, request):
    return {"status": "ok", "value": _bomb, "counts": {}}


_h.Harness.op_call = _op_call
