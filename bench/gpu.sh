#!/usr/bin/env bash
# The GPU measurements of bench/README.md in one command, each step under its own time limit so
# that a slow step costs only itself:
#   bench/gpu.sh OUTDIR
# from the repository root, with a python3 whose jax has its CUDA plugin (`pip install -e ".[cuda]"`,
# or an image that ships jax with CUDA and the package's dependencies; the package itself is
# taken from the clone). Writes OUTDIR/<step>.log (every line time-stamped, so a
# step cut off by its limit still gives its rate), OUTDIR/scale.json and OUTDIR/results.tgz (the
# runs' result folders). Step limits and sizes can be set from the environment (defaults below).
set -u
out=${1:?usage: bench/gpu.sh OUTDIR}
mkdir -p "$out" && out=$(cd "$out" && pwd)
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
FNUCB_SEEDS=${FNUCB_SEEDS:-1000} FNUCB_HORIZON=${FNUCB_HORIZON:-5000} FNUCB_LIMIT=${FNUCB_LIMIT:-140}
FNUCB_CHUNK=${FNUCB_CHUNK:+--chunk $FNUCB_CHUNK}
SCALE_ALGORITHMS=${SCALE_ALGORITHMS:-kernel_ucb,linucb,neural_ucb,fn_ucb_authors,async_kernel_ucb,dis_kernel_ucb_duets,duets,coop_kernel_ucb,cokernel_fc}
SCALE_SEEDS=${SCALE_SEEDS:-1,100,1000} SCALE_BUDGET=${SCALE_BUDGET:-20} SCALE_LIMIT=${SCALE_LIMIT:-300}
SCALE_HORIZON=${SCALE_HORIZON:+--scale-horizon $SCALE_HORIZON}
APPROX_HORIZON=${APPROX_HORIZON:-10000} APPROX_LIMIT=${APPROX_LIMIT:-100}

stamp() { while IFS= read -r line; do printf '%s %s\n' "$(date +%s.%N | cut -c1-14)" "$line"; done; }
step() {  # step NAME LIMIT COMMAND...: run it under `timeout`, log it time-stamped, show its end
  local name=$1 limit=$2
  shift 2
  [ "$limit" -gt 0 ] || { echo "== $name: skipped (limit 0)"; return; }
  echo "== $name (limit $limit s): $*"
  timeout "$limit" "$@" 2>&1 | stamp > "$out/$name.log"
  echo "== $name: exit ${PIPESTATUS[0]}"
  tail -n 4 "$out/$name.log"
}

# the package as an install would lay it out (kernels/ is bandits_jax.kernels) and `bench`, in a
# folder the steps run in
site=$(mktemp -d) && cp -r bandits_jax "$site/" && cp -r kernels "$site/bandits_jax/kernels" && ln -s "$PWD/bench" "$site/bench" || exit 1
cd "$site" || exit 1
step env 40 bash -c "nvidia-smi -L; $PY -c '
import bandits_jax, jax, jaxlib, flax, optax, chex, numpy
print(\"guard\", bandits_jax.cpu_guard(), \"backend\", jax.default_backend(), jax.devices())
print(\"jax\", jax.__version__, \"jaxlib\", jaxlib.__version__, \"flax\", flax.__version__,
      \"optax\", optax.__version__, \"chex\", chex.__version__, \"numpy\", numpy.__version__)'"
step fnucb "$FNUCB_LIMIT" $PY -m bandits_jax.cli run fnucb/fig1a --only "FN-UCB (N=10)" --seeds "$FNUCB_SEEDS" \
  --horizon "$FNUCB_HORIZON" $FNUCB_CHUNK --out "$out/fnucb" --no-plot --no-curve-cache
step scale "$SCALE_LIMIT" $PY -m bench --only scale --scale-algorithms "$SCALE_ALGORITHMS" --seeds "$SCALE_SEEDS" \
  --scale-budget-seconds "$SCALE_BUDGET" $SCALE_HORIZON --out "$out/scale.json"
step approx "$APPROX_LIMIT" $PY -m bandits_jax.cli run async/synthetic-f1 --set sync_convention=rounds \
  --only Approx-DisKernelUCB --horizon "$APPROX_HORIZON" --out "$out/approx" --no-plot --no-curve-cache
tar -czf "$out/results.tgz" -C "$out" $(cd "$out" && ls -d fnucb approx 2>/dev/null) && rm -rf "$out/fnucb" "$out/approx"
ls -la "$out"
