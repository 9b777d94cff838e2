#!/usr/bin/env python3
"""`rapide` links no MPI; the ranks run in `rapide-mpi` (issue 51).

usage: rapide_without_mpi_test.py RAPIDE_BINARY SHARED_DIR [RAPIDE_MPI_BINARY]

* ldd of rapide names no libmpi / Open MPI library (installing the rapide package must not
  pull Open MPI), and `rapide --version` says "mpi none".
* `rapide run --tp 2`, `--pp 2` and `rapide serve --disaggregate` exit 1 with one line that
  names rapide-mpi and the command that runs the ranks (`mpirun -np 2 rapide-mpi serve ...`),
  instead of starting.
* Given rapide-mpi (a build with RAPIDE_MPI): its ldd does name libmpi and its --version
  names the MPI library.
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from checks import check, report  # noqa: E402
from require_shared import require_shared, shared_dir  # noqa: E402

BINARY, SHARED = sys.argv[1], shared_dir(sys.argv[2])
MPI_BINARY = sys.argv[3] if len(sys.argv) > 3 else None
MODEL = "models/stories260K/stories260K.gguf"
require_shared(SHARED, MODEL, test="e2e_rapide_without_mpi")


def run(args, timeout=60):
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout)


def mpi_libraries(binary):
    """The lines of ldd's output that name an MPI library."""
    out = run(["ldd", binary])
    assert out.returncode == 0, out.stderr
    return [line.strip() for line in out.stdout.splitlines()
            if "libmpi" in line or "openmpi" in line or "libopen-" in line]


check(mpi_libraries(BINARY) == [], f"rapide links no MPI library: {mpi_libraries(BINARY)}")
version = run([BINARY, "--version"]).stdout
check("\nmpi none" in version, f"rapide --version says mpi none:\n{version}")

model = os.path.join(SHARED, MODEL)
for args, flag in [(["run", "-m", model, "-p", "Once", "-n", "2", "--tp", "2"], "--tp 2"),
                   (["run", "-m", model, "-p", "Once", "-n", "2", "--pp", "2"], "--pp 2"),
                   (["serve", "-m", model, "--port", "0", "--disaggregate"], "--disaggregate")]:
    out = run([BINARY] + args)
    lines = out.stderr.strip().splitlines()
    last = lines[-1] if lines else ""
    check(out.returncode == 1, f"{flag}: exit status 1 (got {out.returncode})")
    check(last.startswith("error: " + flag) and "rapide-mpi" in last
          and "mpirun -np 2 rapide-mpi serve ... " + flag.split()[0] in last,
          f"{flag}: refused naming rapide-mpi and its mpirun command: {last!r}")

if MPI_BINARY:
    check(mpi_libraries(MPI_BINARY) != [], "rapide-mpi links the MPI library")
    version = run([MPI_BINARY, "--version"]).stdout
    check("\nmpi " in version and "\nmpi none" not in version,
          f"rapide-mpi --version names the MPI library:\n{version}")
    # Usage text names the binary the user ran.
    usage = run([MPI_BINARY, "--help"]).stdout
    check("Usage: rapide-mpi " in usage, f"rapide-mpi --help names rapide-mpi: {usage[:120]!r}")
usage = run([BINARY, "--help"]).stdout
check("Usage: rapide [" in usage, f"rapide --help names rapide: {usage[:120]!r}")

sys.exit(report())
