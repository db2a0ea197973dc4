"""The Markdown feedback a student receives.

Everything a student controls (file names, exception names and messages, answers to open
questions) is shown inside code spans or fenced blocks whose fence is longer than any run of
backticks in the text: it can never become Markdown or HTML (a forged table, a ``<!--``).
"""
from __future__ import annotations

import io
import re
from pathlib import Path


def fmt(x) -> str:
    if isinstance(x, str):
        return x
    return f"{x:g}"


def _longest_run(text: str, ch: str) -> int:
    return max((len(m) for m in re.findall(f"{re.escape(ch)}+", text)), default=0)


def fenced(text: str) -> str:
    """``text`` as a fenced block of plain text that no content can close."""
    fence = "`" * max(3, _longest_run(text, "`") + 1)
    return f"{fence}text\n{text}\n{fence}\n"


def code_span(text: str) -> str:
    """``text`` on one line, as inline code that no content can close."""
    text = " ".join(str(text).split())
    ticks = "`" * (_longest_run(text, "`") + 1)
    return f"{ticks} {text} {ticks}"


def render(key, sol, results, reason, notes) -> str:
    """``notes``: (text written by the grader, student-controlled text or None)."""
    out = io.StringIO()
    out.write(f"# Feedback on {code_span(Path(key).name)}\n\n")
    if sol is None:
        out.write("**Score: 0.** This submission could not be graded:\n\n")
        out.write(fenced(str(reason)))
        return out.getvalue()
    auto = [e for e in results if e["score"] != "manual"]
    manual = [e for e in results if e["score"] == "manual"]
    got = sum(e["score"] for e in auto)
    total = sum(e["points"] for e in auto)
    out.write(f"Assignment: **{sol['title']}** (`{Path(sol['path']).name}`)\n\n")
    out.write(f"**Automatic score: {fmt(got)} / {fmt(total)} points**")
    if manual:
        out.write(f", plus {fmt(sum(e['points'] for e in manual))} points graded by hand")
    out.write(".\n\n")
    for note in notes:
        text, student = note if isinstance(note, tuple) else (note, None)
        out.write(f"- {text}\n")
        if student is not None:
            out.write("\n" + "\n".join("  " + ln for ln in fenced(student).splitlines())
                      + "\n")
    if notes:
        out.write("\n")
    out.write("| Exercise | Points | Result |\n|---|---|---|\n")
    for e in results:
        score = "–" if e["score"] == "manual" else fmt(e["score"])
        out.write(f"| {e['exercise']} · {e['title']} | {score} / {fmt(e['points'])} | "
                  f"{e['result']} |\n")
    reviewed = [e for e in results if e.get("review")]
    if reviewed:
        out.write("\n## For your instructor to look at\n\n"
                  "These exercises passed their tests, and their points stand until your "
                  "instructor has looked at what ran: the grader records what an answer "
                  "calls while it is tested, and the code below can change what it sees. "
                  "Nothing here says that anything is wrong.\n\n")
        for e in reviewed:
            out.write(f"- Exercise {e['exercise']}:\n\n")
            out.write("\n".join("  " + ln for ln in fenced(e["review"]).splitlines()) + "\n")
    for e in results:
        if e["result"] == "passed":
            continue
        out.write(f"\n## Exercise {e['exercise']} · {e['title']}: {e['result']}\n\n")
        if e["score"] == "manual":
            out.write("Graded by hand (open question). Your answer:\n\n")
            out.write(fenced(e["detail"] or "(no answer found)"))
        else:
            out.write(fenced(e["detail"][:6000]))
    return out.getvalue()
