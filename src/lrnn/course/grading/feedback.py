"""The Markdown feedback a student receives."""
from __future__ import annotations

import io
from pathlib import Path

def fmt(x) -> str:
    if isinstance(x, str):
        return x
    return f"{x:g}"


def render(key, sol, results, reason, notes) -> str:
    out = io.StringIO()
    out.write(f"# Feedback on `{Path(key).name}`\n\n")
    if sol is None:
        out.write(f"**Score: 0.** This submission could not be graded: {reason}.\n")
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
        out.write(f"- {note}\n")
    if notes:
        out.write("\n")
    out.write("| Exercise | Points | Result |\n|---|---|---|\n")
    for e in results:
        score = "–" if e["score"] == "manual" else fmt(e["score"])
        out.write(f"| {e['exercise']} · {e['title']} | {score} / {fmt(e['points'])} | "
                  f"{e['result']} |\n")
    for e in results:
        if e["result"] == "passed":
            continue
        out.write(f"\n## Exercise {e['exercise']} · {e['title']}: {e['result']}\n\n")
        if e["score"] == "manual":
            out.write("Graded by hand (open question). Your answer:\n\n")
            text = e["detail"] or "(no answer found)"
            out.write("> " + text.replace("\n", "\n> ") + "\n")
        else:
            detail = e["detail"].replace("```", "'''")
            out.write(f"```text\n{detail[:6000]}\n```\n")
    return out.getvalue()

