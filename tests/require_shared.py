"""The missing-prerequisite rule of tests/test_paths.h, for the Python and shell tests.

A test whose shared data (or other prerequisite) is absent FAILS when the environment has CI
set (to anything but "", "0" or "false"; `.ci/run` runs with CI=true), and elsewhere skips
with exit status 77 (ctest's SKIP_RETURN_CODE for these tests), printing "SKIPPED <test>:
<what is missing>" to stderr.

From Python:  require_shared.require_shared(shared_dir, "models/stories260K/stories260K.gguf")
From a shell: python3 tests/require_shared.py TEST_NAME SHARED_DIR RELATIVE... || exit $?
              python3 tests/require_shared.py --missing TEST_NAME "what is missing" ; exit $?
"""
import os
import sys

SKIP_EXIT_CODE = 77


def running_in_ci():
    return os.environ.get("CI", "") not in ("", "0", "false")


def missing_prerequisite(reason, test=None):
    """Exits: status 1 under CI, 77 (skip) elsewhere."""
    test = test or os.path.basename(sys.argv[0])
    if running_in_ci():
        print(f"FAILED {test}: {reason} [CI is set: a missing prerequisite fails the test]",
              file=sys.stderr, flush=True)
        sys.exit(1)
    print(f"SKIPPED {test}: {reason} (with CI=true this fails)", file=sys.stderr, flush=True)
    sys.exit(SKIP_EXIT_CODE)


def shared_dir(from_command_line):
    """RAPIDE_SHARED_DIR overrides the path CMake passes on the command line."""
    return os.environ.get("RAPIDE_SHARED_DIR", from_command_line)


def require_shared(shared_dir, *relatives, test=None):
    """Applies the rule when any shared_dir/<relative> does not exist."""
    for relative in relatives:
        path = os.path.join(shared_dir, relative)
        if not os.path.exists(path):
            missing_prerequisite(
                f"shared test data missing: {path} (RAPIDE_SHARED_DIR or ../shared next to "
                "the checkout)", test)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--missing":
        missing_prerequisite(sys.argv[3], sys.argv[2])
    if len(sys.argv) < 4:
        sys.exit("usage: require_shared.py TEST_NAME SHARED_DIR RELATIVE... | "
                 "--missing TEST_NAME REASON")
    require_shared(sys.argv[2], *sys.argv[3:], test=sys.argv[1])
