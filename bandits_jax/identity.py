"""A run's identity: a hash of everything that fixes its numbers once its seed is given.

The sweep's curve cache finds a finished curve again by this identity, whatever experiment or name it
was computed under (`sweep.py`); the records keep it beside each curve.
"""
from __future__ import annotations

import hashlib
import json
import re
from collections import OrderedDict

import jax
import numpy as np

from .core import Trial, check_stream
from .devices import precision_scope
from .programs import maker_of, remembered
from .runner import STEP_READS, horizon_sizes, make_step, program_makers, run_start, shape_sig
from .trials import trial_run


def run_identity(problem, algorithm, params: dict, *, base_key: int = 0, precision: str = "float64") -> str:
    """A hash (32 hex digits) of everything that fixes a run's numbers once its seed is given.

    It hashes the traced programs (jaxprs) of the run's start and of one step (of the whole trial for
    a `Trial`), the arrays they close over (data sets, fixed vectors), the hyper-parameter values
    `params` ({name: float}), the algorithm's stream where it is not 0 (a stream-0 curve keeps the
    identity it had before streams existed), the horizon, base key and precision, and the versions
    of bandits_jax, jax and jaxlib. Names play no part: two curves of two experiments built the same
    way share an identity, so the sweep's curve cache finds one for the other; any change of an
    option, of the stream, of the data or of the code inside the compiled step gives another
    identity. Vmap size and segment length are left out: they change numbers by float rounding at
    most.
    """
    return run_identities(problem, algorithm, [params], base_key=base_key, precision=precision)[0]


def run_identities(problem, algorithm, points: list, *, base_key: int = 0, precision: str = "float64") -> list:
    """`run_identity` of each hyper-parameter point of `points` ([{name: float}], the points of one
    grid), one per point, in order. The hyper-parameters are traced as abstract values, so the
    programs are traced once for all points that name the same hyper-parameters."""
    fixed = {"horizon": None if isinstance(algorithm, Trial) else problem.spec.horizon, "base_key": base_key,
             "precision": precision, "versions": [package_version(p) for p in ("bandits_jax", "jax", "jaxlib")]}
    stream = check_stream(algorithm.name, algorithm.stream)
    if stream:
        fixed["stream"] = stream
    programs, out = {}, []
    for params in points:
        names = tuple(sorted(params))
        if names not in programs:
            programs[names] = programs_digest(problem, algorithm, names, base_key, precision)
        digest = programs[names].copy()
        point = {**fixed, "params": {k: float(v) for k, v in sorted(params.items())}}
        digest.update(json.dumps(point, sort_keys=True).encode())
        out.append(digest.hexdigest()[:32])
    return out


_DIGESTS: "OrderedDict[tuple, tuple]" = OrderedDict()  # Maker key: (sha256 object, the objects it names)
_DIGESTS_KEEP = 256


def programs_digest(problem, algorithm, names: tuple, base_key: int, precision: str):
    """A sha256 object fed with the traced start and step (the trial) of a run whose hyper-parameters
    are `names`, and the arrays those programs close over; traced once per process for the same
    problem and algorithm objects (`runner.program_makers`: every phase of an arena asks again)."""
    maker = maker_of(*program_makers(problem, algorithm), names, base_key, precision)
    return remembered(_DIGESTS, maker, _DIGESTS_KEEP,
                      lambda: _traced_digest(problem, algorithm, names, base_key, precision)).copy()


def _traced_digest(problem, algorithm, names: tuple, base_key: int, precision: str):
    """`programs_digest`, traced: the start and step jaxprs (the trial's), and their constants."""
    with precision_scope(precision):
        # abstract inputs (the weak float of a Python number, as before): tracing computes and compiles
        # nothing, so `run --check` compiles no program
        weak_float = jax.ShapeDtypeStruct((), jax.dtypes.canonicalize_dtype(np.float64), weak_type=True)
        values = {k: weak_float for k in names}
        seed = jax.ShapeDtypeStruct((), np.uint32)
        digest = hashlib.sha256()
        if isinstance(algorithm, Trial):
            digest.update(_program_bytes(jax.make_jaxpr(trial_run(problem, algorithm, base_key))(seed, values)))
            return digest
        start = run_start(problem, algorithm, base_key, horizon_sizes(algorithm, problem.spec))
        program, (_, _, instance, state) = jax.make_jaxpr(start, return_shape=True)(seed, values)
        digest.update(_program_bytes(program))
        digest.update(_step_bytes(problem, algorithm, values, state, instance, precision))
    return digest


_STEPS: "OrderedDict[tuple, tuple]" = OrderedDict()  # step Maker key: (`_program_bytes` of its jaxpr, the objects)
_STEPS_KEEP = 64


def _step_bytes(problem, algorithm, values: dict, state, instance, precision: str) -> bytes:
    """`_program_bytes` of the traced step, traced once per process for the same step functions and shapes:
    it reads only `runner.STEP_READS` of the problem, which the problems of one Coop world at several
    message TTLs share (their starts differ)."""
    maker = maker_of(*program_makers(problem, algorithm, STEP_READS), tuple(values), precision,
                     shape_sig(state), shape_sig(instance))
    key, t = jax.ShapeDtypeStruct((2,), np.uint32), jax.ShapeDtypeStruct((), np.int32)  # a raw PRNG key
    return remembered(_STEPS, maker, _STEPS_KEEP, lambda: _program_bytes(
        jax.make_jaxpr(make_step(problem, algorithm))(values, state, instance, key, key, t)))


def _program_bytes(program) -> bytes:
    """What a traced program gives a digest: its jaxpr's text (object addresses left out) and its
    constants (shape, dtype, bytes)."""
    parts = [_ADDRESS.sub("", str(program.jaxpr)).encode()]
    for const in program.consts:
        const = np.asarray(const)
        parts += [f"{const.shape} {const.dtype}".encode(), np.ascontiguousarray(const).tobytes()]
    return b"".join(parts)


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")  # object addresses differ between processes


def package_version(package: str) -> str:
    """The installed version of `package` ("not installed" when it is not)."""
    from importlib import metadata

    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"
