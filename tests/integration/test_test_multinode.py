"""`accelkit test --suite distributed --nnodes N --node-rank R --rdzv-endpoint HOST:PORT`
through the CLI: bad node options as one-line errors, a node left alone, and a real two-node
torchrun run on this machine (two node processes, a c10d rendezvous on 127.0.0.1, gloo on the
CPU) with a rank killed from outside half-way."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from accelkit.results.io import load_results
from tests.helpers import REPO, assert_one_line_error, run_cli

MULTINODE_CASES = REPO / "tests" / "fixtures" / "multinode"


NODE_ARGS = ("test", "--suite", "distributed", "--nnodes", "2")


def test_bad_node_options_are_one_line_errors_and_write_nothing(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    proc = run_cli("test", "--suite", "distributed", "--nnodes", "2", "--json", str(out))
    assert_one_line_error(proc, 2, "needs --rdzv-endpoint HOST:PORT")
    proc = run_cli("test", "--nnodes", "2", "--rdzv-endpoint", "127.0.0.1:1", "--json", str(out))
    assert_one_line_error(proc, 2, "add --suite distributed")
    assert not out.exists()


def test_a_node_without_node_0_is_unavailable_in_one_line(tmp_path: Path) -> None:
    port = _free_port()
    endpoint = f"127.0.0.1:{port}"
    proc = run_cli(
        *NODE_ARGS, "--node-rank", "1", "--rdzv-endpoint", endpoint, "--join-timeout", "2"
    )
    assert_one_line_error(proc, 3, "node 0 did not answer within 2 s")


def test_node_0_without_the_others_is_unavailable_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    endpoint = f"127.0.0.1:{_free_port()}"
    proc = run_cli(
        *NODE_ARGS, "--json", str(out), "--rdzv-endpoint", endpoint, "--join-timeout", "2"
    )
    assert_one_line_error(proc, 3, "node 1 did not join")
    assert not out.exists()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _node(rank: int, port: int, *extra: str, env: dict[str, str]) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "accelkit", *NODE_ARGS, "--cases", str(MULTINODE_CASES)]
    argv += ["--node-rank", str(rank), "--rdzv-endpoint", f"127.0.0.1:{port}"]
    argv += ["--join-timeout", "120", *extra]
    return subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **env},
    )


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_two_nodes_pass_a_case_and_name_a_rank_killed_half_way(tmp_path: Path) -> None:
    """Node 0 and node 1 as two `accelkit test` processes, two ranks each: the all_reduce
    case passes; in the second case node 1's highest rank is killed by SIGKILL while the
    others wait for it in a collective. The case fails naming that rank, its node and the
    signal, the
    run ends (no hang), and the Flight Recorder dumps of the surviving ranks of both nodes
    are in the results file's folder."""
    pids = tmp_path / "pids"
    pids.mkdir()
    env = {"ACCELKIT_TEST_PID_DIR": str(pids)}
    out = tmp_path / "two-nodes.json"
    port = _free_port()
    node1 = _node(1, port, env=env)
    node0 = _node(0, port, "--json", str(out), env=env)
    try:
        deadline = time.monotonic() + 300
        while not list(pids.glob("rank*.pid")) and time.monotonic() < deadline:
            assert node0.poll() is None, node0.communicate()[0]
            time.sleep(0.5)
        (victim,) = pids.glob("rank*.pid")
        os.kill(int(victim.read_text()), signal.SIGKILL)
        output0, _ = node0.communicate(timeout=300)
        output1, _ = node1.communicate(timeout=120)
    finally:
        for proc in (node0, node1):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert node0.returncode == 1, output0
    assert node1.returncode == 0, output1
    assert "node 1: served 2 rank sessions" in output1
    cases = {c.id: c for c in load_results(out).cases}
    passed = cases["conformance/distributed/all_reduce_over_two_nodes"]
    assert passed.status == "passed", passed.message
    killed = cases["conformance/distributed/a_rank_is_killed_half_way"]
    assert killed.status == "failed"
    message = killed.message or ""
    rank = int(victim.stem.removeprefix("rank"))
    first = message.splitlines()[0]
    assert first.startswith(f"AssertionError: rank {rank} (node 1, pid {victim.read_text()})")
    assert first.endswith("died: killed by signal 9 (SIGKILL)"), message
    assert "Flight Recorder dumps (node 0: ranks " in message and "; node 1: rank " in message
    dumps = tmp_path / "two-nodes-flight-recorder" / "02-rank"
    survivors = sorted(f"rank_{r}" for r in range(4) if r != rank)
    assert sorted(p.name for p in dumps.iterdir()) == survivors
    assert "--nnodes" in json.loads(out.read_text())["run"]["argv"]
