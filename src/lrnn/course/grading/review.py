"""What the grader leaves to a person: code in the student's own cells that could switch off
or fool the trace of a banned call.

A ban (``forbid``) and a count (``count_calls``) are decided by what ran during the hidden
test (:mod:`lrnn.course.check.calltrace`), never by the text of the notebook. The trace runs in
the student's process, so code written to defeat it (a profile or trace function of its own,
frames, the garbage collector's view of objects, ``ctypes``, the import system, the grader's
own modules) could: where the student's cells use such tools, the submission's automatic
points stand but its row says "needs review", with the cells and what they use as evidence.
Course cells, edited or not, are not read; strings and comments never count.
"""
from __future__ import annotations

import ast

#: Names and attributes an answer has no reason to use (each can reach the trace).
FLAGGED = {
    "settrace": "sys.settrace", "setprofile": "a profile function",
    "settrace_all_threads": "threading.settrace_all_threads",
    "setprofile_all_threads": "threading.setprofile_all_threads",
    "monitoring": "sys.monitoring", "_getframe": "sys._getframe",
    "_current_frames": "sys._current_frames", "currentframe": "inspect.currentframe",
    "f_back": "frame objects", "f_globals": "frame objects", "f_locals": "frame objects",
    "f_builtins": "frame objects", "tb_frame": "frame objects", "gi_frame": "frame objects",
    "cr_frame": "frame objects", "get_referrers": "gc.get_referrers",
    "get_referents": "gc.get_referents", "get_objects": "gc.get_objects",
    "ctypes": "ctypes", "_ctypes": "ctypes", "meta_path": "the import system",
    "path_hooks": "the import system", "path_importer_cache": "the import system",
    "__code__": "code objects", "co_code": "code objects", "__builtins__": "builtins",
    "builtins": "builtins", "_lrnn_harness": "the grader's threads",
    "_lrnn_harness_trace": "the grader's trace",
}
#: Modules of the grader and its trace: importing them from the notebook is tampering.
GRADER_MODULES = ("lrnn.course.grading", "lrnn.course.check.calltrace", "lrnn.grading")


def _imported(node) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom) and node.module:
        return [node.module] + [f"{node.module}.{a.name}" for a in node.names]
    return []


def flags(cells) -> list[tuple[int, str]]:
    """[(cell index, what it uses)] over ``cells`` = [(index, source)]: the student's own
    cells. A cell that cannot be parsed is not flagged (it cannot run either)."""
    from .solutions import _python_ast
    out: list[tuple[int, str]] = []
    for index, source in cells:
        tree = _python_ast(source)
        if tree is None:
            continue
        seen = set()
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Name):
                names.append(node.id)
            elif isinstance(node, ast.Attribute):
                names.append(node.attr)
            for name in names:
                what = FLAGGED.get(name)
                if what and what not in seen:
                    seen.add(what)
                    out.append((index, what))
            for module in _imported(node):
                root = module.split(".")[0]
                what = FLAGGED.get(root) or FLAGGED.get(module.rsplit(".", 1)[-1])
                if module.startswith(GRADER_MODULES):
                    what = "the grader's own modules"
                if what and what not in seen:
                    seen.add(what)
                    out.append((index, what))
    return out
