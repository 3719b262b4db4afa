#!/usr/bin/env bash
# Everything this project measures on a lent H200, one mode per device call (each call: `bash benchmarks/h200.sh MODE...`).
# Results go to $OUT; docs/data/ keeps them. Apex is built from .apex/ (git-ignored, NVIDIA/apex source) or unpacked
# from .apexlib/ (a build this script made earlier and sent back).
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
START=$(date +%s)
CALL_BUDGET_S=${CALL_BUDGET_S:-570}  # the device call's limit is 600 s: every run ends inside it, so results still come back
SEED4=adam+layernorm+fp32,apex-fusedadam+layernorm+fp32,apex-fusedadam+apex-fusedln+fp32,apex-fusedadam+apex-fusedln+bf16
log() { echo "[$(date -u +%T)] $*" | tee -a "$OUT/steps.log"; }

export APEX_BUILD_DIR=/tmp/apex-build
# torch.compile's caches (FX graphs, Triton kernels) in one known place, so a call can send them back and the next
# call carry them (.inductor/, git-ignored): a compiled stage's first process then skips a cold compile. Compiling
# is warm-up, never timed, so the cache changes how long a run takes, not what it measures.
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor-cache  # the build's staging copy, ninja objects and pip log (python -m bench_core apex)

apex_build() {  # apex_build LOG: `python -m bench_core apex build` into /tmp/apexlib; its output and time in $OUT/LOG
  local name=${1:-apex_build.log}
  log "building Apex $(cat .apex/COMMIT 2>/dev/null) ($name)"
  local t0; t0=$(date +%s.%N)
  # Doctor first, then only apex_C, amp_C and fused_layer_norm_cuda for this GPU (from a staging copy: .apex is
  # not edited), then the probe's smoke tests. `--full` would build all 11 extensions.
  PYTHONPATH=$ROOT python3 -m bench_core apex build --src .apex --target /tmp/apexlib > "$OUT/$name" 2>&1
  local rc=$? secs; secs=$(python3 -c "print(round($(date +%s.%N)-$t0,1))")
  echo "apex build exit $rc, elapsed $secs s" >> "$OUT/$name"
  log "apex build exit $rc in $secs s"
}

apex_pack() {  # the build, carried back in one archive (.apexlib/ on the next call)
  (cd /tmp && tar -cJf "$OUT/apexlib.tar.xz" apexlib/apex apexlib/apex_C*.so apexlib/amp_C*.so apexlib/fused_layer_norm_cuda*.so \
    apexlib/apex-*.dist-info 2>>"$OUT/apex_build.log"); ls -la "$OUT/apexlib.tar.xz" | tee -a "$OUT/steps.log"
}

apex() {
  if [ -f .apexlib/apexlib.tar.xz ]; then
    log "unpacking the carried Apex build"; mkdir -p /tmp/apexlib && tar -C /tmp -xJf .apexlib/apexlib.tar.xz
  elif [ ! -d /tmp/apexlib/apex ]; then
    apex_build apex_build.log; apex_pack
  fi
  export PYTHONPATH=/tmp/apexlib:${PYTHONPATH:-$ROOT}  # keeps what `wheels` added: replacing it drops plotly
}

apex_clean_twice() {  # "make apex <= 90 s": two builds, each from nothing (no target, no staging copy, no objects)
  for i in 1 2; do
    rm -rf /tmp/apexlib "$APEX_BUILD_DIR"
    apex_build "apex_build_clean_$i.log"
  done
  apex_pack; export PYTHONPATH=/tmp/apexlib:${PYTHONPATH:-$ROOT}
}

make_apex_twice() {  # issue 23's measurement: `make apex` itself, twice, each from a clean environment (no Apex
  # installed, no staging copy, no objects), into the image's own Python (the H200 has no package index, so the
  # Makefile's deps-app step is marked done with -o; BIN points make at that Python).
  local bin; bin=$(dirname "$(command -v python3)")
  for i in 1 2; do
    python3 -m pip uninstall -y -q apex >/dev/null 2>&1; rm -rf "${APEX_BUILD_DIR:-$HOME/.cache/bench_core/apex-build}"
    log "make apex $i (clean)"
    local t0; t0=$(date +%s.%N)
    make -o deps-app apex BIN="$bin" APEX_SRC="$ROOT/.apex" > "$OUT/make_apex_$i.log" 2>&1
    local rc=$? secs; secs=$(python3 -c "print(round($(date +%s.%N)-$t0,1))")
    echo "make apex exit $rc, elapsed $secs s" >> "$OUT/make_apex_$i.log"; log "make apex $i exit $rc in $secs s"
  done
  # carry the installed build to later calls, as apex_pack does for --target builds
  local site; site=$(python3 -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  mkdir -p /tmp/apexlib && (cd "$site" && cp -r apex apex_C*.so amp_C*.so fused_layer_norm_cuda*.so apex-*.dist-info /tmp/apexlib/)
  apex_pack
}

env_info() {
  { nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv; python3 -c \
    "import torch,sys;print('torch',torch.__version__,'cuda',torch.version.cuda,'python',sys.version.split()[0])"; \
    nproc; date -u; } > "$OUT/env.txt" 2>&1
}

run() {  # run NAME ARGS...: one CLI run, its JSON and log kept
  local name=$1; shift
  local left=$(( CALL_BUDGET_S - ($(date +%s) - START) ))
  if [ "$left" -lt 40 ]; then log "run $name skipped: ${left} s left in this call"; return; fi
  log "run $name: $*"
  local t0=$(date +%s.%N)
  timeout "$left" python3 -m bench_core run --quiet --no-db --json "$OUT/$name.json" "$@" > "$OUT/$name.log" 2>&1
  log "run $name exit $? wall $(python3 -c "print(round($(date +%s.%N)-$t0,1))") s"
}

sweep() {  # sweep NAME ARGS...: one `python -m bench_core sweep`, budgeted to end inside this call; JSON, CSV, HTML kept
  local name=$1; shift
  local left=$(( CALL_BUDGET_S - ($(date +%s) - START) ))
  if [ "$left" -lt 120 ]; then log "sweep $name skipped: ${left} s left in this call"; return; fi
  log "sweep $name (budget $(( left - 60 )) s): $*"
  local t0=$(date +%s.%N)
  # SIGINT at the limit: the sweep cancels as on Ctrl-C and still writes the points that finished
  timeout -s INT -k 30 "$left" python3 -m bench_core sweep --quiet --no-db --budget "$(( left - 60 ))s" --json "$OUT/sweep_$name.json" \
    --csv "$OUT/sweep_$name.csv" --html "$OUT/sweep_$name.html" "$@" > "$OUT/sweep_$name.log" 2>&1
  log "sweep $name exit $? wall $(python3 -c "print(round($(date +%s.%N)-$t0,1))") s"; tail -4 "$OUT/sweep_$name.log" | tee -a "$OUT/steps.log"
}

map_args() {  # map_args MAP: the comparison, base model and axes of one of issue 21's maps
  case $1 in
    # torchao FP8 compiled against compiled BF16, llama widths 1024-4096 x batch 2 and 4 (llama-1b's 16 x 2048), 2
    # processes a stage: each compiled FP8 process spends ~33 s compiling even with a warm cache
    fp8) echo "--compare adam-fused+rmsnorm+bf16+compile,adam-fused+rmsnorm+fp8-torchao+compile --model llama-1b
               --axis width=1024,2048,3072,4096 --axis batch_size=2,4 --repeats 2" ;;
    # the same at batch 1 and 2, to fit an 80 GB H100: width 4096 at batch 4 needs 89.1 GiB
    fp8_b12) echo "--compare adam-fused+rmsnorm+bf16+compile,adam-fused+rmsnorm+fp8-torchao+compile --model llama-1b
                   --axis width=1024,2048,3072,4096 --axis batch_size=1,2 --repeats 2" ;;
    # the b12 map's two widths either side of its predicted batch-2 crossing (width ~1,700-1,900), end to end: a
    # 10-minute b12 sweep measures batch 1's widest points only, so this checks its batch-2 predictions
    # (sweep_targets.py --measured THIS --predicted B12_SWEEP.json)
    fp8_b2) echo "--compare adam-fused+rmsnorm+bf16+compile,adam-fused+rmsnorm+fp8-torchao+compile --model llama-1b
                  --axis width=1024,2048 --axis batch_size=2 --repeats 2" ;;
    # the Apex BF16 stage against native BF16 on GPT, batch 1-32 at widths 768 and 1280 (gpt2-small's depth)
    apex) echo "--compare adam-fused+layernorm+bf16,apex-fusedadam+apex-fusedln+bf16 --model gpt2-small
                --axis batch_size=1:32:x2 --axis width=768,1280" ;;
    # Liger's fused linear cross-entropy against the LM head + CE: peak memory by vocabulary x batch (tokens), 1
    # process a stage (peak memory is the figure)
    flce) echo "--compare liger-flce --model gpt2-medium --axis vocab_size=32000,50304,128256 --axis batch_size=4,8,16
                --repeats 1" ;;
    *) return 1 ;;
  esac
}

for mode in "$@"; do
  case $mode in
    apex) apex ;;
    apex_clean_twice) apex_clean_twice ;;
    make_apex_twice) make_apex_twice ;;
    env) env_info; python3 -m bench_core.machine.probe_collect > "$OUT/probe.json" 2>"$OUT/probe.err" ;;
    gputests) log "gpu tests"; timeout 200 python3 -m pytest -q -m gpu tests/gpu -p no:cacheprovider > "$OUT/gpu_tests.log" 2>&1; log "gpu tests exit $?" ;;
    smoke) run smoke_all --preset all --model gpt2-small --warmup 3 --iters 8 ;;
    ttr)  # issue 18: time to result, the seed ladder on gpt2-small, 10 + 30, one process a stage (as the 59.4 s cold
      # and 36.8 s cached figures it compares with): twice cold (no probe, no ceilings), then cached
      for name in cold_1 cold_2 cached; do
        [ "$name" = cached ] || rm -rf "$(python3 -c 'from bench_core.machine.cache import cache_dir; print(cache_dir())')"
        # the seed's own four stages (the preset now adds native twins), as in the figures it compares with
        log "time to result $name"; python3 benchmarks/time_to_result.py -- --stages "$SEED4" --model gpt2-small \
          --warmup 10 --iters 30 --repeats 1 --no-db --json "$OUT/ttr_$name.json" > "$OUT/ttr_$name.log" 2>&1
        tail -1 "$OUT/ttr_$name.log" | tee -a "$OUT/steps.log"
      done ;;
    small) for i in 1 2; do run seed_small_$i --preset seed --model gpt2-small --repeats 2
                            run native_small_$i --preset native --model gpt2-small --repeats 2; done ;;
    small_seed) for i in 1 2; do run seed_small_$i --preset seed --model gpt2-small --repeats 2; done ;;
    medium_seed) for i in 1 2; do run seed_medium_$i --preset seed --model gpt2-medium --repeats 2; done ;;
    medium_native) for i in 1 2; do run native_medium_$i --preset native --model gpt2-medium --repeats 2; done ;;
    components) for m in gpt2-small gpt2-medium; do for i in 1 2; do log "components $m $i"
      timeout 200 python3 -m bench_core components --model "$m" --device cuda --json > "$OUT/components_${m}_$i.json" \
        2>"$OUT/components_${m}_$i.err"; log "exit $?"; done; done ;;
    final)  # one short call: at most 8 files back (ttr x2, gpu test, seed + native on gpt2-small, logs)
      env_info; python3 -m bench_core probe >> "$OUT/env.txt" 2>&1  # also warms the probe cache
      for i in 1 2; do
        log "time to result $i"; python3 benchmarks/time_to_result.py -- --preset seed --model gpt2-small --warmup 10 \
          --iters 30 --no-db --json "$OUT/ttr_$i.json" >> "$OUT/runs.log" 2>&1; tail -1 "$OUT/runs.log" | tee -a "$OUT/steps.log"
      done
      log "gpu test: graphs proof"; timeout 60 python3 -m pytest -q -m gpu tests/gpu/test_apex_parity.py \
        -k "graph" -p no:cacheprovider >> "$OUT/runs.log" 2>&1; log "exit $?"
      for p in seed native; do log "run ${p}_small"
        timeout 200 python3 -m bench_core run --quiet --no-db --preset $p --model gpt2-small --repeats 2 \
          --json "$OUT/${p}_small.json" >> "$OUT/runs.log" 2>&1; log "exit $?"; done ;;
    wheels)  # Liger-Kernel, torchao and plotly (for --html), carried as wheels (.whl/, git-ignored): the H200 has
      # no package index
      python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        > "$OUT/wheels.log" 2>&1; log "wheels exit $?"; export PYTHONPATH=/tmp/site:${PYTHONPATH:-$ROOT} ;;
    peers_gputests) log "gpu tests: peers"; timeout 170 python3 -m pytest -q -m gpu tests/gpu/test_peers_gpu.py \
      -p no:cacheprovider -rs > "$OUT/gpu_tests_peers.log" 2>&1; log "exit $?" ;;
    peers_proof) log "gpu tests: peers kernel proofs and FLCE memory"; timeout 120 python3 -m pytest -q -m gpu \
      tests/gpu/test_peers_gpu.py -k "proven or flce" -p no:cacheprovider -rs > "$OUT/gpu_tests_peers_proof.log" 2>&1
      log "exit $?" ;;
    trace)  # Kineto traces of the profiled steps (BENCH_SAVE_TRACE, read by run/step.py) for tests/data: Apex BF16
      # (seed ladder) and native BF16 on gpt2-small, gzipped in $OUT/traces/ (every stage of both runs is saved)
      BENCH_SAVE_TRACE="$OUT/traces" run trace_seed_small --preset seed --model gpt2-small --warmup 3 --iters 10
      BENCH_SAVE_TRACE="$OUT/traces" run trace_native_small --preset native --model gpt2-small --warmup 3 --iters 10
      ls -la "$OUT/traces" | tee -a "$OUT/steps.log" ;;
    agreement:*)  # agreement:MODEL (issue 19): two back-to-back complete runs of seed and of peers (run `wheels`
      # first), each stage in 3 processes (the CUDA default), then how many of run B's speedups lie in run A's
      # intervals (target: >= 90% of stages)
      model=${mode#agreement:}
      for p in seed peers; do for i in 1 2; do run "${p}_${model}_agree_$i" --preset $p --model "$model"; done; done
      python3 benchmarks/interval_agreement.py "$OUT/seed_${model}_agree_1.json" "$OUT/seed_${model}_agree_2.json" \
        "$OUT/peers_${model}_agree_1.json" "$OUT/peers_${model}_agree_2.json" > "$OUT/interval_agreement_$model.txt" 2>&1
      tail -2 "$OUT/interval_agreement_$model.txt" | tee -a "$OUT/steps.log" ;;
    agree:*)  # agree:PRESET:MODEL (issue 19): two back-to-back complete runs, 3 processes a stage (the CUDA default),
      # then how many of run B's speedups lie in run A's intervals
      IFS=: read -r _ preset model <<< "$mode"
      for i in 1 2; do run "${preset}_${model}_agree_$i" --preset "$preset" --model "$model"; done
      python3 benchmarks/interval_agreement.py "$OUT/${preset}_${model}_agree_1.json" "$OUT/${preset}_${model}_agree_2.json" \
        > "$OUT/interval_agreement_${preset}_$model.txt" 2>&1
      tail -2 "$OUT/interval_agreement_${preset}_$model.txt" | tee -a "$OUT/steps.log" ;;
    probe_cold)  # issue 18 item 9: where a cold probe's time goes (its `timings`), as the CLI runs it
      rm -rf "$(python3 -c 'from bench_core.machine.cache import cache_dir; print(cache_dir())')"
      log "cold probe"; python3 -m bench_core probe --json > "$OUT/probe_cold.json" 2>"$OUT/probe_cold.err"
      python3 -c "import json; print(json.load(open('$OUT/probe_cold.json')).get('timings'))" | tee -a "$OUT/steps.log" ;;
    gpu_new)  # every GPU test, after this round's changes (SwiGLU, seed twins, components on the engine)
      log "gpu tests: all"; timeout 330 python3 -m pytest -q -m gpu tests/gpu -p no:cacheprovider -rs \
        > "$OUT/gpu_tests_new.log" 2>&1; log "exit $?"; tail -3 "$OUT/gpu_tests_new.log" | tee -a "$OUT/steps.log" ;;
    swiglu:*)  # swiglu:MODEL (issue 18, item 7): native SwiGLU against Liger's fused SwiGLU, the peers stage and its
      # twin, twice; then the lever's GPU proof tests (run `wheels` first)
      model=${mode#swiglu:}
      for i in 1 2; do run "swiglu_${model}_$i" --stages adam-fused+rmsnorm+bf16,adam-fused+rmsnorm+bf16+liger-swiglu \
        --model "$model"; done
      log "gpu tests: swiglu"; timeout 150 python3 -m pytest -q -m gpu tests/gpu/test_peers_gpu.py -k "swiglu" \
        -p no:cacheprovider -rs > "$OUT/gpu_tests_swiglu.log" 2>&1; log "exit $?" ;;
    proofs)  # issue 19 item 5: each proof gap's GPU test, the lever verified and its fallback not (run `wheels` and
      # make apex first); then a peers run on llama-small, whose FP8 stages carry gemm_fp8_share
      log "gpu tests: proofs"; timeout 240 python3 -m pytest -q -m gpu tests/gpu/test_proofs_gpu.py -p no:cacheprovider \
        -rs > "$OUT/gpu_tests_proofs.log" 2>&1; log "exit $?"; tail -3 "$OUT/gpu_tests_proofs.log" | tee -a "$OUT/steps.log"
      run proofs_peers_llama-small --preset peers --model llama-small --repeats 1 ;;
    ttr3)  # issue 19: time to result of the seed ladder on gpt2-small, 3 processes a stage (default), probe cached
      python3 -m bench_core probe > /dev/null 2>&1   # target: <= 45 s
      for i in 1 2; do log "time to result, 3 processes a stage, $i"; python3 benchmarks/time_to_result.py -- --preset \
        seed --model gpt2-small --no-db --json "$OUT/ttr3_$i.json" > "$OUT/ttr3_$i.log" 2>&1
        tail -1 "$OUT/ttr3_$i.log" | tee -a "$OUT/steps.log"; done ;;
    warmup:*)  # warmup:MODEL (issue 19 item 2; run `apex` first): the seed ladder once, 3 processes a stage (the
      # default), every warm-up recorded (steps, SM clock); then from which step each process had settled, and the
      # warm-up it spared (benchmarks/warmup_settle.py)
      model=${mode#warmup:}
      python3 -m bench_core probe > /dev/null 2>&1   # cached, as ttr3 runs it
      run "warmup_seed_$model" --preset seed --model "$model"
      PYTHONPATH=$ROOT:${PYTHONPATH:-} python3 benchmarks/warmup_settle.py "$OUT/warmup_seed_$model.json" > "$OUT/warmup_settle_$model.txt" 2>&1
      tail -3 "$OUT/warmup_settle_$model.txt" | tee -a "$OUT/steps.log" ;;
    gpu_file:*)  # gpu_file:FILE:TIMEOUT: one file of tests/gpu, each test's outcome named (-rA)
      IFS=: read -r _ file limit <<< "$mode"; log "gpu tests: $file"
      timeout "${limit:-200}" python3 -m pytest -q -m gpu "tests/gpu/$file" -p no:cacheprovider -rA \
        > "$OUT/gpu_tests_${file%.py}.log" 2>&1; log "exit $?"; grep -E "^(FAILED|ERROR)" "$OUT/gpu_tests_${file%.py}.log" \
        | cut -c1-300 | tee -a "$OUT/steps.log" ;;
    noise)  # issue 19 item 4: the GPU and host during each stage's timed steps (SM clock, clock events, power,
      # temperature, other processes, host load, worker CPU, locked clocks): the launch-bound Apex BF16 stage on
      # gpt2-small with its native twin, 3 processes a stage, twice; NVML's own view alongside; then the GPU test
      nvidia-smi -q -d PERFORMANCE,CLOCK > "$OUT/noise_nvidia_smi.txt" 2>&1
      for i in 1 2; do run "noise_small_$i" --stages adam+layernorm+fp32,apex-fusedadam+apex-fusedln+bf16,\
adam-fused+layernorm+bf16 --model gpt2-small; done
      for i in 1 2; do python3 -c "import json,sys; [print(s['stage'], {k: s.get(k) for k in ('sm_clock_mhz_min',
        'sm_clock_mhz_median', 'throttle_reasons', 'power_w_median', 'temp_c_max', 'gpu_other_processes',
        'host_load_avg', 'host_cores', 'worker_cpu_share', 'clocks_locked', 'noise_reason')})
        for s in json.load(open(sys.argv[1]))['summary']]" "$OUT/noise_small_$i.json" 2>&1 | tee -a "$OUT/steps.log"; done
      log "gpu test: conditions"; timeout 120 python3 -m pytest -q -m gpu tests/gpu/test_conditions_gpu.py \
        -p no:cacheprovider -rs > "$OUT/gpu_tests_conditions.log" 2>&1; log "exit $?" ;;
    peaks)  # where the native and Apex BF16 stages' step peaks fall at 1, 2 and 12 blocks (gpt2-small, batch 1): the
      # depth check's peak-memory miss (benchmarks/peak_timeline.py); `apex` first
      log "peak timeline"; timeout 120 python3 benchmarks/peak_timeline.py --model gpt2-small --batch-size 1 \
        adam-fused+layernorm+bf16 apex-fusedadam+apex-fusedln+bf16 > "$OUT/peak_timeline.json" 2>"$OUT/peak_timeline.log"
      log "peak timeline exit $?"; cut -c1-400 "$OUT/peak_timeline.log" | tee -a "$OUT/steps.log" ;;
    sweep:*)  # sweep:MAP[:EXTRA,ARGS] (issue 21); `wheels` first for fp8 and flce, `apex` for apex. Files are named
      # sweep_MAP_N, N counting this call's sweeps, so one call can run a map twice. The maps: map_args.
      IFS=: read -r _ map extra <<< "$mode"; SWEEP_N=$(( ${SWEEP_N:-0} + 1 ))
      # shellcheck disable=SC2046,SC2086  # the map's arguments and EXTRA are split on purpose
      if args=$(map_args "$map"); then sweep "${map}_$SWEEP_N" $args ${extra//,/ }; else log "unknown sweep map $map"; fi ;;
    predict:*)  # predict:MAP: one map's points predicted only (a 1 s budget runs none), to check against sweeps
      # of the map that measured it end to end: python benchmarks/sweep_targets.py --measured
      # docs/data/h200_..._sweep_MAP_*.json --predicted sweep_MAP_N.json. `wheels` and `apex` first.
      map=${mode#predict:}; SWEEP_N=$(( ${SWEEP_N:-0} + 1 ))
      # shellcheck disable=SC2046  # the map's arguments are split on purpose
      sweep "${map}_$SWEEP_N" $(map_args "$map") --budget 1s ;;
    inductor_in)  # the compile cache a previous call sent back (inductor_out), if carried
      if [ -f .inductor/inductor_cache.tar.xz ]; then mkdir -p "$TORCHINDUCTOR_CACHE_DIR" && \
        tar -C "$TORCHINDUCTOR_CACHE_DIR" -xJf .inductor/inductor_cache.tar.xz; log "compile cache unpacked"; fi ;;
    inductor_out)  # the compile cache, for the next call (comes back only under 16 MiB). xz of a grown cache can
      # outlast the call's limit, and then the results archive is never made: skipped with under 90 s left, and
      # time-limited
      left=$(( CALL_BUDGET_S - ($(date +%s) - START) ))
      if [ "$left" -lt 90 ]; then log "inductor_out skipped: ${left} s left in this call"; else
        (cd "$TORCHINDUCTOR_CACHE_DIR" 2>/dev/null && timeout $(( left - 30 )) tar -cJf "$OUT/inductor_cache.tar.xz" .) \
          && ls -la "$OUT/inductor_cache.tar.xz" | tee -a "$OUT/steps.log" || rm -f "$OUT/inductor_cache.tar.xz"; fi ;;
    ttr1:*)  # ttr1:NAME[:VAR=VALUE,...,EXTRA,ARGS] (e.g. ttr1:seed4_1:--stages,SEED4): one time-to-result run of the seed ladder on gpt2-small, 3 processes
      # a stage, probe cached; VAR=VALUE items set the run's environment (e.g. BENCH_WARMUP_MIN_S=0.25)
      IFS=: read -r _ name extra <<< "$mode"
      left=$(( CALL_BUDGET_S - ($(date +%s) - START) ))
      if [ "$left" -lt 80 ]; then log "ttr1 $name skipped: ${left} s left in this call"; continue; fi
      python3 -m bench_core probe > /dev/null 2>&1
      envs=(); args=(); for item in ${extra//,/ }; do case $item in --*) args+=("$item") ;; *=*) envs+=("$item") ;;
        SEED4) args+=("$SEED4") ;; *) args+=("$item") ;; esac; done  # SEED4: the seed ladder's own four stages
      log "time to result $name: ${envs[*]} ${args[*]}"
      case " ${args[*]} " in *" --stages "*) ;; *) args=(--preset seed "${args[@]}") ;; esac
      env "${envs[@]}" timeout $(( left - 15 )) python3 benchmarks/time_to_result.py -- --model gpt2-small --no-db \
        --json "$OUT/$name.json" "${args[@]}" > "$OUT/$name.log" 2>&1; tail -1 "$OUT/$name.log" | tee -a "$OUT/steps.log" ;;
    buildprof:*)  # buildprof:PRESET:MODEL: one round of a ladder with each worker's imports timed and its build under
      # cProfile (BENCH_BUILD_PROFILE, run/worker.py), into $OUT/buildprof/: where the seconds before a stage's
      # go (and the gated warm-ups, which wait for the next build) go
      IFS=: read -r _ preset model <<< "$mode"; python3 -m bench_core probe > /dev/null 2>&1
      BENCH_BUILD_PROFILE=$OUT/buildprof run "buildprof_${preset}_$model" --preset "$preset" --model "$model" --repeats 1
      (cd "$OUT/buildprof" 2>/dev/null && head -3 imports_* | tee -a "$OUT/steps.log") ;;
    run:*)  # run:NAME:PRESET:MODEL[:EXTRA,ARGS]: one CLI run, e.g. run:peers_llama-1b_1:peers:llama-1b:--iters,15
      IFS=: read -r _ name preset model extra <<< "$mode"
      # shellcheck disable=SC2086  # EXTRA is split on purpose
      run "$name" --preset "$preset" --model "$model" ${extra//,/ } ;;
    quiet)  # issue 41: a bare training loop against the engine, alternating, three pairs on each launch-bound case;
      # QUIET_PINNED=1 (any non-empty value) adds to each pair a bare loop pinned as the engine pins its timed process,
      # and an engine run with its timed processes unpinned; QUIET_SIBLINGS=K a bare loop beside K stopped stand-ins
      # for look-ahead workers (each with its CUDA context and built stage); QUIET_BARE_PROCESSES=N each bare loop as
      # N processes pooled, as the engine pools a stage's (the kinds alternate process by process)
      log "quiet host"; timeout $(( CALL_BUDGET_S - ($(date +%s) - START) - 20 )) python3 benchmarks/quiet_host.py \
        --pairs "${QUIET_PAIRS:-3}" ${QUIET_CASES:+--cases "$QUIET_CASES"} ${QUIET_PINNED:+--pinned} \
        ${QUIET_SIBLINGS:+--siblings "$QUIET_SIBLINGS"} ${QUIET_BARE_PROCESSES:+--bare-processes "$QUIET_BARE_PROCESSES"} \
        --out "$OUT/quiet" \
        > "$OUT/quiet_host.log" 2>&1; log "quiet host exit $?"
      tail -8 "$OUT/quiet_host.log" | tee -a "$OUT/steps.log" ;;
    ttr_ab:*)  # ttr_ab:N (issue 41): time to result of the seed's four stages on gpt2-small, 3 processes a stage, this
      # tree and the carried .baseline tree (git archive of the commit before the change) in turn, N times each;
      # the first of each pair cold (probe cache removed), as the 50.5 s cold / 50.3 s cached figures were taken
      n=${mode#ttr_ab:}
      for i in $(seq 1 "$n"); do for tree in new old; do
        root=$ROOT; [ $tree = old ] && root=$ROOT/.baseline
        [ "$i" = 1 ] && rm -rf "$(python3 -c 'from bench_core.machine.cache import cache_dir; print(cache_dir())')"
        log "time to result $tree $i"
        (cd "$root" && PYTHONPATH=$root:${PYTHONPATH:-} python3 "$ROOT/benchmarks/time_to_result.py" -- --stages "$SEED4" \
          --model gpt2-small --no-db --json "$OUT/ttr_${tree}_$i.json" > "$OUT/ttr_${tree}_$i.log" 2>&1)
        tail -1 "$OUT/ttr_${tree}_$i.log" | tee -a "$OUT/steps.log"
      done; done ;;
    adamw8bit)  # issue 43: torchao's 8-bit AdamW against torch's fused Adam under BF16 on gpt2-small, twice (run
      # `wheels` first), then its GPU proof test
      for i in 1 2; do run "adamw8bit_small_$i" --stages adam-fused+layernorm+bf16,adamw-8bit+layernorm+bf16 \
        --model gpt2-small; done
      log "gpu test: adamw-8bit"; timeout 120 python3 -m pytest -q -m gpu tests/gpu/test_adamw_8bit_gpu.py \
        -p no:cacheprovider -rA > "$OUT/gpu_tests_adamw_8bit.log" 2>&1; log "exit $?" ;;
    hf:*)  # hf:NAME:PRESET:SOURCE[:EXTRA,ARGS] (issue 44): one CLI run of a preset on a Hugging Face architecture
      # (a catalog entry or a config.json path), e.g. hf:seed_gpt2_1:seed:gpt2 or hf:peers_qwen3_1:peers:qwen3-0.6b
      IFS=: read -r _ name preset source extra <<< "$mode"
      # shellcheck disable=SC2086  # EXTRA is split on purpose
      run "$name" --preset "$preset" --hf "$source" ${extra//,/ } ;;
    crosscheck)  # issue 44: the built-in llama-1b against Hugging Face LlamaForCausalLM of the same shape
      # (benchmarks/llama_1b_as_hf.json), native BF16 eager and compiled, 2 processes a stage, in turn
      for src in builtin hf; do
        if [ $src = builtin ]; then model=(--model llama-1b); else model=(--hf benchmarks/llama_1b_as_hf.json \
          --seq-len 2048 --batch-size 4); fi
        run "crosscheck_llama-1b_$src" --stages adam-fused+rmsnorm+bf16,adam-fused+rmsnorm+bf16+compile \
          "${model[@]}" --repeats 2
      done ;;
    recommend:*)  # recommend:NAME:MODEL[:EXTRA,ARGS] (issue 45): `python -m bench_core recommend --memory 60`, its
      # budget ending inside this call (9 minutes at most). EXTRA's commas split arguments, so a --check-set's keys
      # are joined by ';' (quote the mode): 'recommend:r1:llama-1b:--check-set,KEY1;KEY2'
      IFS=: read -r _ name model extra <<< "$mode"
      left=$(( CALL_BUDGET_S - ($(date +%s) - START) ))
      if [ "$left" -lt 120 ]; then log "recommend $name skipped: ${left} s left in this call"; continue; fi
      budget=$(( left - 60 < 540 ? left - 60 : 540 ))
      log "recommend $name (budget ${budget} s): $model $extra"
      # shellcheck disable=SC2086  # EXTRA is split on purpose
      # its own history file: the measured run (each stage's kernel proof) comes back beside the answer
      timeout -s INT -k 30 "$left" python3 -m bench_core recommend --model "$model" --memory 60 --budget "${budget}s" \
        --db "$OUT/$name.sqlite" --json "$OUT/$name.json" $(args=${extra//,/ }; echo "${args//;/,}") > "$OUT/$name.log" 2>&1
      log "recommend $name exit $?"; tail -6 "$OUT/$name.log" | tee -a "$OUT/steps.log" ;;
    *) log "unknown mode $mode" ;;
  esac
done
log "done"
# At most 8 files come back: everything but the Apex build travels in one archive.
(cd "$OUT" && tar -czf results.tar.gz --exclude=apexlib.tar.xz --exclude=inductor_cache.tar.xz --exclude=results.tar.gz ./* && \
  find . -maxdepth 1 -type f ! -name results.tar.gz ! -name apexlib.tar.xz ! -name inductor_cache.tar.xz ! -name steps.log -delete)
