"""One sweep as several processes (bandits_jax/distributed.py): the shares, the argument checks, and two
processes on localhost against one, bit for bit, with a resume after a lost share."""
import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

from bandits_jax import distributed
from bandits_jax.cli import main
from bandits_jax.core import ConfigError

SWEEP = ["run", "quickstart", "--size", "smoke", "--seeds", "5", "--only", "KernelUCB", "--only", "Random",
         "--quiet", "--no-plot", "--no-curve-cache"]


def test_shares_cover_the_seeds_once_in_order(monkeypatch):
    seeds = list(range(10, 17))
    for P in (1, 2, 3, 7, 9):
        parts = []
        for i in range(P):
            monkeypatch.setattr(distributed, "process", lambda i=i: (i, P))
            parts.append(distributed.share(seeds))
        assert sum(parts, []) == seeds
        assert max(map(len, parts)) - min(map(len, parts)) <= 1
    monkeypatch.setattr(distributed, "process", lambda: (1, 2))
    assert distributed.share(seeds) == [13, 14, 15, 16]


@pytest.mark.parametrize("flags, message", [
    (["--coordinator", "localhost:1234"], "together"),
    (["--coordinator", "localhost", "--num-processes", "2", "--process-id", "0"], "HOST:PORT"),
    (["--coordinator", "localhost:1234", "--num-processes", "0", "--process-id", "0"], "at least 1"),
    (["--coordinator", "localhost:1234", "--num-processes", "2", "--process-id", "2"], "in 0..1"),
])
def test_bad_process_flags_exit_2_before_anything_starts(flags, message, tmp_path, capsys):
    assert main(SWEEP + ["--out", str(tmp_path / "out")] + flags) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_auto_start_under_slurm_or_on_a_tpu_slice_only_with_several_hosts():
    assert distributed.auto_requested({"SLURM_NTASKS": "4", "SLURM_PROCID": "2"})
    assert not distributed.auto_requested({"SLURM_NTASKS": "1", "SLURM_PROCID": "0"})
    assert not distributed.auto_requested({"SLURM_NTASKS": "4", "SLURM_PROCID": "2", distributed.AUTO_ENV: "off"})
    assert distributed.auto_requested({distributed.AUTO_ENV: "auto"})
    assert distributed.auto_requested({"TPU_WORKER_HOSTNAMES": "t-0,t-1"})
    assert not distributed.auto_requested({"TPU_WORKER_HOSTNAMES": "t-0"})
    assert not distributed.auto_requested({})
    with pytest.raises(ConfigError, match="together"):
        distributed.initialize(num_processes=2)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def _cli(args, log):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    return subprocess.Popen([sys.executable, "-m", "bandits_jax.cli"] + args, stdout=log, stderr=subprocess.STDOUT,
                            env=env)


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
