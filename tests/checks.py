"""Soft assertions for the Python tests: every check prints ok/FAIL and the run goes on, so one
run reports every broken behaviour; report() gives the exit status (1 if any check failed)."""

failures = []


def check(condition, what):
    print(("ok   " if condition else "FAIL ") + what, flush=True)
    if not condition:
        failures.append(what)


def report():
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("all checks passed")
    return 0
