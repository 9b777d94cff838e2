"""What the MPI end-to-end tests (issue 21) share: mpirun's command line for 2 ranks as root,
the check that mpirun exists, and finding or awaiting the processes of a job.

    import mpi_fixture
    mpi_fixture.require_mpirun(TEST)
    with RapideServer(binary, args, launcher=mpi_fixture.MPIRUN) as server:
        os.kill(mpi_fixture.rank_pid(server.proc.pid, 1), signal.SIGKILL)
        assert mpi_fixture.wait_for_exit(server.proc, 60)
"""
import os
import shutil
import subprocess
import time

import require_shared

MPIRUN = ["mpirun", "-np", "2", "--allow-run-as-root", "--oversubscribe"]


def mpirun(ranks):
    """MPIRUN for another rank count (refusal tests)."""
    return ["mpirun", "-np", str(ranks), "--allow-run-as-root", "--oversubscribe"]


def require_mpirun(test):
    """Fails under CI and skips elsewhere without mpirun (require_shared's rule); lets Open MPI
    run as root, which it refuses without these (mpirun's flag covers mpirun only)."""
    if shutil.which("mpirun") is None:
        require_shared.missing_prerequisite("mpirun not installed (apt-get install openmpi-bin)",
                                            test)
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")


def run(cmd, timeout=120):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def rank_pid(mpirun_pid, rank):
    """The pid of rank `rank` among mpirun's children (Open MPI puts the rank in each one's
    environment)."""
    children = run(["pgrep", "-P", str(mpirun_pid)]).stdout.split()
    for pid in children:
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if f"OMPI_COMM_WORLD_RANK={rank}\0".encode() in f.read():
                    return int(pid)
        except OSError:
            continue
    raise AssertionError(f"no rank {rank} among mpirun's children {children}")


def wait_for_exit(proc, seconds):
    """Whether `proc` ended within `seconds`."""
    deadline = time.time() + seconds
    while proc.poll() is None and time.time() < deadline:
        time.sleep(0.2)
    return proc.poll() is not None
