"""One test per rule: a rule is checked on every file (notebook, module, record) it covers and
its test reports every offender at once, not one test per file."""


def assert_every(items, check, name=str):
    """Run ``check(item)`` on every item; fail once, listing each item whose check failed and
    why."""
    items = list(items)
    assert items, f"{check.__name__}: nothing to check"
    problems = []
    for item in items:
        try:
            check(item)
        except AssertionError as err:
            message = str(err).strip() or "assertion failed"
            problems.append(f"{name(item)}: {message}")
    assert not problems, (f"{check.__name__}: {len(problems)} of {len(items)} break the rule:\n"
                          + "\n".join(problems))
