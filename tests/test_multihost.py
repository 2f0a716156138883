"""One sweep as several processes (bandits_jax/multihost.py): the shares, the argument checks, two
processes on localhost against one, bit for bit, with a resume after a lost share, and how processes
stop together when one of them has bad input (before joining or after)."""
import json
import os
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from bandits_jax import multihost
from bandits_jax.cli import main
from bandits_jax.core import ConfigError

SWEEP = ["run", "quickstart", "--size", "smoke", "--seeds", "5", "--only", "KernelUCB", "--only", "Random",
         "--quiet", "--no-plot", "--no-curve-cache"]


def test_shares_cover_the_seeds_once_in_order(monkeypatch):
    seeds = list(range(10, 17))
    for P in (1, 2, 3, 7, 9):
        parts = []
        for i in range(P):
            monkeypatch.setattr(multihost, "process", lambda i=i: (i, P))
            parts.append(multihost.share(seeds))
        assert sum(parts, []) == seeds
        assert max(map(len, parts)) - min(map(len, parts)) <= 1
    monkeypatch.setattr(multihost, "process", lambda: (1, 2))
    assert multihost.share(seeds) == [13, 14, 15, 16]


@pytest.mark.parametrize("flags, message", [
    (["--coordinator", "localhost:1234"], "together"),
    (["--coordinator", "localhost", "--num-processes", "2", "--process-id", "0"], "HOST:PORT"),
    (["--coordinator", "localhost:1234", "--num-processes", "0", "--process-id", "0"], "at least 1"),
    (["--coordinator", "localhost:1234", "--num-processes", "2", "--process-id", "2"], "in 0..1"),
    (["--coordinator", "127.0.0.1:99999", "--num-processes", "2", "--process-id", "0"], "1..65535"),
    (["--coordinator", "127.0.0.1:0", "--num-processes", "2", "--process-id", "1"], "1..65535"),
])
def test_bad_process_flags_exit_2_before_anything_starts(flags, message, tmp_path, capsys):
    assert main(SWEEP + ["--out", str(tmp_path / "out")] + flags) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_auto_start_under_slurm_or_on_a_tpu_slice_only_with_several_hosts():
    assert multihost.auto_requested({"SLURM_NTASKS": "4", "SLURM_PROCID": "2"})
    assert not multihost.auto_requested({"SLURM_NTASKS": "1", "SLURM_PROCID": "0"})
    assert not multihost.auto_requested({"SLURM_NTASKS": "4", "SLURM_PROCID": "2", multihost.AUTO_ENV: "off"})
    assert multihost.auto_requested({multihost.AUTO_ENV: "auto"})
    assert multihost.auto_requested({"TPU_WORKER_HOSTNAMES": "t-0,t-1"})
    assert not multihost.auto_requested({"TPU_WORKER_HOSTNAMES": "t-0"})
    assert not multihost.auto_requested({})
    with pytest.raises(ConfigError, match="together"):
        multihost.initialize(num_processes=2)


def test_join_timeout_from_the_environment():
    assert multihost.join_timeout({}) == multihost.JOIN_TIMEOUT_S == 60
    assert multihost.join_timeout({multihost.JOIN_TIMEOUT_ENV: " 7 "}) == 7
    for bad in ("0", "-3", "1.5", "soon"):
        with pytest.raises(ConfigError, match="whole number"):
            multihost.join_timeout({multihost.JOIN_TIMEOUT_ENV: bad})


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def _cli(args, log, **env):
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}, **env}
    return subprocess.Popen([sys.executable, "-m", "bandits_jax.cli"] + args, stdout=log, stderr=subprocess.STDOUT,
                            env=env)


TINY = ["run", "--problem", "linear:horizon=20", "--algorithm", "uniform_random", "--seeds", "4", "--quiet",
        "--no-plot", "--no-curve-cache"]
JOIN_S = 5  # the join timeout these tests set


def _pair(tmp_path, name, extra, port):
    """Start processes 0 and 1 of a sweep of TINY, with `extra` flags for each ({id: [...]}); returns
    [(process, its log file, start time)]."""
    started = []
    for i in (0, 1):
        log = tmp_path / f"{name}-{i}.txt"
        with open(log, "w") as fh:
            flags = ["--out", str(tmp_path / name), "--coordinator", f"127.0.0.1:{port}", "--num-processes", "2",
                     "--process-id", str(i)]
            started.append((_cli(TINY + flags + extra.get(i, []), fh, **{multihost.JOIN_TIMEOUT_ENV: str(JOIN_S)}),
                            log, time.monotonic()))
    return started


def _ended(started) -> list:
    """[(exit status, seconds it ran, its output)] of each started process (their end is polled)."""
    ends = {}
    while len(ends) < len(started):
        for k, (proc, log, t0) in enumerate(started):
            if k not in ends and proc.poll() is not None:
                ends[k] = (proc.returncode, time.monotonic() - t0, log.read_text())
        time.sleep(0.05)
    return [ends[k] for k in range(len(started))]


def _one_line(output: str) -> bool:
    return output.count("\n") == 1 and output.startswith("bandits-jax: error: ") and "Traceback" not in output


@pytest.mark.parametrize("bad", [1, 0])
def test_a_bad_flag_on_one_process_stops_it_alone_and_the_other_at_the_join_timeout(bad, tmp_path):
    started = _pair(tmp_path, "out", {bad: ["--set", "no_such_key=1"]}, _free_port())
    ends = _ended(started)
    status, seconds, output = ends[bad]
    assert status == 2 and _one_line(output) and "unknown key 'no_such_key'" in output, output
    assert seconds < 20
    status, seconds, output = ends[1 - bad]
    assert status == 1 and _one_line(output) and "not every process of the sweep joined" in output, output
    assert seconds < JOIN_S + 25  # its own check, then the join timeout
    assert not (tmp_path / "out" / "chunks").exists()


def test_a_process_stopped_after_joining_names_itself_to_the_others(tmp_path):
    """Process 1 refuses its --chunk only once it has joined (memory is checked on its devices): process 0
    stores its share, stops at the barrier with one line naming process 1, and both leave at once."""
    started = _pair(tmp_path, "out", {1: ["--chunk", str(10 ** 15)]}, _free_port())
    (status0, seconds0, output0), (status1, seconds1, output1) = _ended(started)
    assert status1 == 2 and _one_line(output1) and "--chunk" in output1, output1
    assert status0 == 1 and _one_line(output0) and "process 1 of the sweep stopped" in output0, output0
    assert abs(seconds0 - seconds1) < 10
    assert sorted(p.name for p in (tmp_path / "out" / "chunks" / "uniform_random").glob("*.npz")) == ["seeds_0-1.npz"]


def test_two_processes_equal_one_bit_for_bit_and_resume(tmp_path):
    two, one = tmp_path / "two", tmp_path / "one"
    port = _free_port()
    with open(tmp_path / "log.txt", "w") as log:
        procs = [_cli(SWEEP + ["--out", str(two), "--coordinator", f"localhost:{port}", "--num-processes", "2",
                               "--process-id", str(i)], log) for i in (1, 0)]
        procs.append(_cli(SWEEP + ["--out", str(one)], log))
        codes = [p.wait(timeout=600) for p in procs]
    assert codes == [0, 0, 0], (tmp_path / "log.txt").read_text()[-2000:]
    # each process stored its own share: seeds 0-1 and 2-4
    assert sorted(p.name for p in (two / "chunks" / "KernelUCB").glob("*.npz")) == ["seeds_0-1.npz", "seeds_2-4.npz"]
    a, b = np.load(one / "results.npz"), np.load(two / "results.npz")
    assert sorted(a.files) == sorted(b.files) and len(a.files) > 4
    for key in a.files:
        np.testing.assert_array_equal(b[key], a[key], err_msg=key)
    assert json.loads((two / "metadata.json").read_text())["processes"] == 2
    # process 1's share lost (killed before it stored it): one process computes those seeds only
    for curve in ("KernelUCB", "Random"):
        (two / "chunks" / curve / "seeds_2-4.npz").unlink()
    (two / "results.npz").unlink()
    with open(tmp_path / "log2.txt", "w") as log:
        assert _cli(SWEEP + ["--out", str(two)], log).wait(timeout=600) == 0
    timing = json.loads((two / "metadata.json").read_text())["timing"]
    assert {c: timing[c]["seeds_computed"] for c in ("KernelUCB", "Random")} == {"KernelUCB": 3, "Random": 3}
    b = np.load(two / "results.npz")
    for key in a.files:
        np.testing.assert_array_equal(b[key], a[key], err_msg=key)


LATE = """
import sys, time
from bandits_jax import multihost
multihost.initialize(sys.argv[1], 2, int(sys.argv[2]))
with multihost.leave_together():
    time.sleep(float(sys.argv[3]))
    multihost.barrier("bandits_jax sweep: chunks stored")
"""


@pytest.mark.slow
def test_a_barrier_waits_for_a_share_that_ends_much_later(tmp_path):
    """jax's collective barrier on the CPU gives up after 30 s; the sweep's waits for the slowest share."""
    port = _free_port()
    with open(tmp_path / "log.txt", "w") as log:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
        procs = [subprocess.Popen([sys.executable, "-c", LATE, f"127.0.0.1:{port}", str(i), str(40 * i)], stdout=log,
                                  stderr=subprocess.STDOUT, env=env) for i in (0, 1)]
        codes = [p.wait(timeout=300) for p in procs]
    assert codes == [0, 0], (tmp_path / "log.txt").read_text()[-2000:]
