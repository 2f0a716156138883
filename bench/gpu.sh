#!/usr/bin/env bash
# The GPU measurements of bench/README.md in one command, each step under its own time limit so
# that a slow step costs only itself:
#   bench/gpu.sh OUTDIR
# from the repository root, with a python3 whose jax has its CUDA plugin (`pip install -e ".[cuda]"`,
# or an image that ships jax with CUDA and the package's dependencies; the package itself is
# taken from the clone). Writes OUTDIR/<step>.log (every line time-stamped, so a
# step cut off by its limit still gives its rate), OUTDIR/scale.json and OUTDIR/results.tgz (the
# runs' result folders). Step limits and sizes can be set from the environment (defaults below).
#
# The scale step runs one bench process per algorithm, SCALE_PROCS of them at once (compiles are
# most of its time and run on the CPU cores): their compiled calls take turns on the device
# (bench.harness.share_device), so no timed run overlaps another. Each process gets a share of the
# device memory: the algorithms of SCALE_BIG (large states) SCALE_BIG_FRACTION each on
# SCALE_BIG_PROCS processes, the others SCALE_FRACTION each. An algorithm's JSON lands in
# OUTDIR/scale/ as soon as it is done, and a second run of the script skips the algorithms there;
# OUTDIR/scale.json merges them (bench.merge). Compiled programs go to JAX's persistent cache in
# OUTDIR/jax_cache (JAX_COMPILATION_CACHE_DIR), so a second run on the same machine loads what a cut-off
# first run compiled (its compile column is then the load time).
set -u
out=${1:?usage: bench/gpu.sh OUTDIR}
mkdir -p "$out" && out=$(cd "$out" && pwd)
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 JAX_COMPILATION_CACHE_DIR=${JAX_COMPILATION_CACHE_DIR:-$out/jax_cache}
FNUCB_SEEDS=${FNUCB_SEEDS:-1000} FNUCB_HORIZON=${FNUCB_HORIZON:-5000} FNUCB_LIMIT=${FNUCB_LIMIT:-140}
FNUCB_CHUNK=${FNUCB_CHUNK:+--chunk $FNUCB_CHUNK}
SCALE_BIG=${SCALE_BIG:-approx_dis_kernel_ucb_duets,dis_kernel_ucb_duets,approx_dis_kernel_ucb,dis_kernel_ucb,async_kernel_ucb,n_kernel_ucb,fn_ucb_authors,naive_igp_ucb,igp_ucb,fn_ucb}
SCALE_ALGORITHMS=${SCALE_ALGORITHMS:-$SCALE_BIG,coop_kernel_ucb,dist_kernel_ucb_coop,eager_kernel_ucb,neural_ucb,neural_ts,duets,duets_authors,kernel_ucb,kernel_ts,naive_linucb,ind_kernel_ucb,oful,one_kernel_ucb,fed_glb_ucb,ind_alba,cokernel_fc,dis_lin_ucb,fed_lin_ucb,cokernel_ind_alloc,ind_rage,ind_rage_code,cokernel_fb,cokernel_fb_ind_alloc,ind_peace_fb_omega,uniform_random,linucb,lints,ind_poly_alba,successive_elimination,uniform_allocation,ind_peace_fb,ind_uniform_fb,ind_uniform_fb_means}
SCALE_SEEDS=${SCALE_SEEDS:-1,10,100,1000} SCALE_BUDGET=${SCALE_BUDGET:-30} SCALE_LIMIT=${SCALE_LIMIT:-300}
SCALE_PROCS=${SCALE_PROCS:-6} SCALE_FRACTION=${SCALE_FRACTION:-0.06}
SCALE_BIG_PROCS=${SCALE_BIG_PROCS:-2} SCALE_BIG_FRACTION=${SCALE_BIG_FRACTION:-0.27}
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
scale_one() {  # scale_one ALGORITHM MEMORY_FRACTION: one bench process, unless its JSON is there
  [ -s "$out/scale/$1.json" ] && return
  XLA_PYTHON_CLIENT_PREALLOCATE=false XLA_PYTHON_CLIENT_MEM_FRACTION=$2 BANDITS_JAX_BENCH_LOCK="$out/scale/lock" \
    $PY -m bench --only scale --scale-algorithms "$1" --seeds "$SCALE_SEEDS" --scale-budget-seconds "$SCALE_BUDGET" \
    $SCALE_HORIZON --out "$out/scale/$1.part.json" 2>&1 | stamp > "$out/scale/$1.log"
  [ -s "$out/scale/$1.part.json" ] && mv "$out/scale/$1.part.json" "$out/scale/$1.json"
}
scale_pool() {  # scale_pool PROCESSES FRACTION ALGORITHM...: the algorithms, PROCESSES at a time
  local procs=$1 fraction=$2
  shift 2
  printf '%s\n' "$@" | xargs -P "$procs" -I{} bash -c 'scale_one "$1" "$2"' _ {} "$fraction"
}
scale_step() {  # the big-state algorithms and the others in two pools at once, then the merge
  mkdir -p "$out/scale"
  local big=() small=() alg
  for alg in ${SCALE_ALGORITHMS//,/ }; do
    if [[ ",$SCALE_BIG," == *",$alg,"* ]]; then big+=("$alg"); else small+=("$alg"); fi
  done
  [ ${#big[@]} -eq 0 ] || scale_pool "$SCALE_BIG_PROCS" "$SCALE_BIG_FRACTION" "${big[@]}" &
  [ ${#small[@]} -eq 0 ] || scale_pool "$SCALE_PROCS" "$SCALE_FRACTION" "${small[@]}" &
  wait
}
export -f scale_one scale_pool scale_step stamp
export out PY SCALE_ALGORITHMS SCALE_BIG SCALE_SEEDS SCALE_BUDGET SCALE_HORIZON SCALE_PROCS SCALE_FRACTION \
  SCALE_BIG_PROCS SCALE_BIG_FRACTION
step scale "$SCALE_LIMIT" bash -c scale_step
ls "$out"/scale/*.json >/dev/null 2>&1 && (cd "$site" && $PY -m bench.merge "$out/scale.json" "$out"/scale/*.json > "$out/scale_table.txt")
step approx "$APPROX_LIMIT" $PY -m bandits_jax.cli run async/synthetic-f1 --set sync_convention=rounds \
  --only Approx-DisKernelUCB --horizon "$APPROX_HORIZON" --out "$out/approx" --no-plot --no-curve-cache
runs=$(cd "$out" && ls -d fnucb approx 2>/dev/null)
[ -z "$runs" ] || { tar -czf "$out/results.tgz" -C "$out" $runs && rm -rf "$out/fnucb" "$out/approx"; }
ls -la "$out"
