"""kernels/draws.py: flat draws and the unrolled threefry lowering give jax.random's numbers bit for bit."""
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax.kernels.draws import flat_normal, flat_uniform, threefry2x32_unrolled


@pytest.mark.parametrize("partitionable", [True, False])
def test_flat_draws_are_jax_random_draws(partitionable):
    """flat_normal / flat_uniform give jax.random's numbers for the shape, bit for bit, in both
    threefry modes (the problems' contexts and rewards, the algorithms' tie noise and the networks'
    initial weights use them)."""
    cases = [(shape, dtype) for shape in [(5, 4, 3), (7, 3), (2, 3, 4, 5), (6,), ()]
             for dtype in (jnp.float64, jnp.float32)]

    def draws(key):  # one compiled program for every case: (flat, shaped) pairs
        return [(flat_normal(key, shape, dtype), jax.random.normal(key, shape, dtype),
                 flat_uniform(key, shape, dtype, -0.5, 0.5), jax.random.uniform(key, shape, dtype, -0.5, 0.5))
                for shape, dtype in cases]

    with jax.threefry_partitionable(partitionable), jax.enable_x64(True):
        out = jax.jit(draws)(jax.random.PRNGKey(11))
    for (shape, dtype), (flat_n, shaped_n, flat_u, shaped_u) in zip(cases, out):
        assert flat_n.shape == shape and flat_n.dtype == dtype and flat_u.shape == shape
        assert (np.asarray(flat_n) == np.asarray(shaped_n)).all() and (np.asarray(flat_u) == np.asarray(shaped_u)).all()
    assert np.unique(np.asarray(out[0][0])).size == 60  # a real draw, not a constant


def test_threefry_known_answers():
    """The hash itself, in NumPy, against the known-answer vectors of Threefry-2x32-20 (Random123):
    (key1, key2, x1, x2) -> (y1, y2)."""
    vectors = [((0, 0, 0, 0), (0x6B200159, 0x99BA4EFE)),
               ((0xFFFFFFFF,) * 4, (0x1CB996FC, 0xBB002BE7)),
               ((0x13198A2E, 0x03707344, 0x243F6A88, 0x85A308D3), (0xC4923A9C, 0x483DF7A0))]
    for words, expected in vectors:
        out = threefry2x32_unrolled(*(np.array([w], np.uint32) for w in words))
        assert [int(o[0]) for o in out] == list(expected)


DRAWS = r'''
import sys
import jax, jax.numpy as jnp, numpy as np
jax.config.update("jax_enable_x64", True)
from bandits_jax import cpu_guard
from bandits_jax.kernels.draws import unrolled_threefry_on_cpu
cpu_guard()
print(unrolled_threefry_on_cpu())
k = jax.random.key(11)
runs = jnp.arange(6, dtype=jnp.uint32)
out = [jax.random.bits(k, (7, 3)), jax.random.bits(k, (5,), jnp.uint64), jax.random.normal(k, (4, 6)),
       jax.random.uniform(k, (9,), jnp.float32), jax.random.key_data(jax.random.split(k, 5)),
       jax.random.key_data(jax.random.fold_in(k, 123)), jax.random.key_data(jax.random.split(jax.random.PRNGKey(0))),
       jax.jit(jax.vmap(lambda s: jax.random.normal(jax.random.key(s), (3, 4))))(runs)]
with jax.threefry_partitionable(False):
    out.append(jax.random.normal(k, (4, 5)))
np.savez(sys.argv[1], *[np.asarray(o) for o in out])
'''


def test_the_unrolled_threefry_gives_jax_loop_numbers(tmp_path):
    """cpu_guard has jax lower threefry unrolled on CPU; bits, normal and uniform draws, splits and
    fold_ins (vmapped and not, both threefry modes) are the numbers of jax's own lowering, which
    BANDITS_JAX_UNROLLED_THREEFRY=0 keeps."""
    files = {}
    for setting in ("0", "1"):
        files[setting] = tmp_path / f"draws_{setting}.npz"
        done = subprocess.run([sys.executable, "-c", DRAWS, str(files[setting])], capture_output=True, text=True,
                              env={**os.environ, "BANDITS_JAX_UNROLLED_THREEFRY": setting}, check=True)
        assert done.stdout.split() == [str(setting == "1")]
    jax_loop, unrolled = np.load(files["0"]), np.load(files["1"])
    assert len(jax_loop.files) == 9
    for name in jax_loop.files:
        np.testing.assert_array_equal(unrolled[name], jax_loop[name])
