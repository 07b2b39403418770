"""The benchmarks' CPU reader (benchmarks/proccpu.py) against real processes: a child that
burns a known amount of CPU under a name with parentheses and spaces, its tree, its reaped
CPU and a process that has gone."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from benchmarks import proccpu

BURN = textwrap.dedent(
    """
    import sys, time
    with open("/proc/self/comm", "w") as f:
        f.write("wb) busy (x")
    while time.process_time() < 0.3:
        pass
    print(time.process_time(), flush=True)
    sys.stdin.read()
    """
)


def test_a_child_burning_cpu_is_read_by_pid_in_the_tree_and_once_reaped() -> None:
    before = proccpu.TreeCpu(os.getpid(), reaped=True).read()
    assert before is not None
    child = subprocess.Popen(
        [sys.executable, "-c", BURN], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        burnt = float(child.stdout.readline())
        own = proccpu.cpu_seconds(child.pid)
        # /proc counts in clock ticks (1/100 s): the two readings agree to a few ticks
        assert own is not None and abs(own - burnt) < 0.05
        assert child.pid in proccpu.children(os.getpid())
        assert child.pid in proccpu.descendants(os.getpid())
        with open(f"/proc/{child.pid}/comm") as f:
            assert f.read().strip() == "wb) busy (x"
        tree = proccpu.TreeCpu(os.getpid()).read()
        assert tree is not None and tree - before >= own - 0.05
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(30)
        assert child.stdout is not None
        child.stdout.close()
    assert proccpu.cpu_seconds(child.pid) is None
    assert child.pid not in proccpu.descendants(os.getpid())
    # gone, its CPU stays in the parent's reaped figure, and only there
    after = proccpu.TreeCpu(os.getpid(), reaped=True).read()
    assert after is not None and after - before >= burnt - 0.05
    assert proccpu.TreeCpu(None).read() is None
