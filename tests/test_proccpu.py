"""The benchmarks' CPU reader (benchmarks/proccpu.py) against real processes: a parent that
starts a child burning a known amount of CPU under a name with parentheses and spaces; the
child read by pid and in the parent's tree, and once the parent has reaped it, only in the
parent's reaped figure.

The tree measured is the parent's, started by the test: the test process's own tree holds
whatever other tests started and ended meanwhile (a pytest worker's servers)."""

from __future__ import annotations

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

PARENT = textwrap.dedent(
    f"""
    import subprocess, sys
    burn = subprocess.Popen(
        [sys.executable, "-c", {BURN!r}],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    burnt = burn.stdout.readline().strip()
    print(burn.pid, burnt, flush=True)
    sys.stdin.readline()  # the test reads the tree with the child alive
    burn.stdin.close()
    burn.wait()
    burn.stdout.close()
    print("reaped", flush=True)
    sys.stdin.readline()  # the test reads the reaped figure
    """
)


def test_a_child_burning_cpu_is_read_by_pid_in_the_tree_and_once_reaped() -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert parent.stdin is not None and parent.stdout is not None
    try:
        pid_text, burnt_text = parent.stdout.readline().split()
        child, burnt = int(pid_text), float(burnt_text)
        own = proccpu.cpu_seconds(child)
        # /proc counts in clock ticks (1/100 s): the two readings agree to a few ticks
        assert own is not None and abs(own - burnt) < 0.05
        assert proccpu.children(parent.pid) == [child]
        assert proccpu.descendants(parent.pid) == [child]
        with open(f"/proc/{child}/comm") as f:
            assert f.read().strip() == "wb) busy (x"
        tree = proccpu.TreeCpu(parent.pid).read()
        assert tree is not None and tree >= own
        parent.stdin.write("\n")
        parent.stdin.flush()
        assert parent.stdout.readline().strip() == "reaped"
        # gone, its CPU stays in the parent's reaped figure, and only there
        assert proccpu.cpu_seconds(child) is None
        assert proccpu.descendants(parent.pid) == []
        reaped = proccpu.TreeCpu(parent.pid, reaped=True).read()
        alone = proccpu.TreeCpu(parent.pid).read()
        assert reaped is not None and alone is not None
        assert reaped - alone >= burnt - 0.05
        assert proccpu.TreeCpu(None).read() is None
    finally:
        parent.stdin.close()
        parent.wait(30)
        parent.stdout.close()
