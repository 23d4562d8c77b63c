#!/usr/bin/env bash
# gpu_check.sh - the CUDA check of ringfeed on a lent GPU machine, in one go,
# ending with one JSON file of figures within its budget (default 330 s: the
# whole run, JSON included, inside 6 minutes).
#
#   bash bench/gpu_check.sh [--out DIR] [--budget SECONDS] [--images N] [--tiny N]  (N: files)
#                           [--e2e-workers 16] [--scaling-workers 1,2,4,8,16]
#                           [--standin | --no-gpu] [--quick] [--dry-run] [--keep-data]
#                           [--tools-only]
#   bash bench/gpu_check.sh --fetch-deps     # beforehand, on a machine WITH Debian's registry
#
# The GPU machine has only the NVIDIA driver, the CUDA toolkit, Python, PyTorch
# and torchvision: no apt, no pip, no registry, maybe an older cmake or none.
# --fetch-deps (bench/gpu_check_deps.sh) fills shared-debs/ (git-ignored; the
# device tool carries it) with what the build and the tests need beyond that:
# Debian's libjpeg-turbo, liburing and cmocka, a cmake, pytest. Then, there:
#
#   tools       what the image has and what was carried (each carried library is
#               linked with a test program first); what is missing, said first;
#               the CUDA runtime: torch's, set as RINGFEED_CUDART for every step
#   sysinfo     GPU, driver, CPUs, torch/torchvision, /dev/shm
#   configure   cmake into $RF_GPU_BUILD (default /tmp/rf-gpu-build)
#   build       the library, rf-gen-folder, rf-copy-bench, the CUDA tests
#   cuda_tests  ctest: test_copier*, test_ring, test_cuda* on the GPU (test_cuda must
#               pass, not skip) and test_cuda*_fake on the stand-in runtime
#   pytest      the binding's CUDA tests (device tensors equal the CPU loader's, ...)
#   bandwidth   rf-copy-bench: pinned vs pageable, plain cudaMemcpyAsync vs the copier
#   data        a photo-like set (500x375 JPEGs) and tiny files, on /dev/shm
#   e2e         bench/gpu_e2e.py: ringfeed vs DataLoader(pin_memory=True) into the GPU,
#               at 16 workers
#   normalize   the on-device normalization's check (bench/gpu_normalize.py, when it exists)
#   scaling     bench/gpu_scaling.py: images/s at 1, 2, 4, 8, 16 workers (centre crop,
#               RandomResizedCrop) and tiny files/s for the reader
#   ctest_all   the rest of the suite (nothing that needs a registry), if time is left
#
# Every step has a time limit (the smaller of its own cap and what is left of
# the budget); a failed or timed-out step is recorded and the script goes on
# with what does not depend on it. $OUT/gpu_check.json ($OUT: the device tool's
# output folder; ./gpu-results otherwise) is written at the end whatever
# happened, next to the full log $OUT/gpu_check.log. Exit status: 0 when every
# step that ran passed, 1 otherwise.
#
# --standin: a rehearsal without a GPU: the runtime is the stand-in
# (tests/fake_cudart.c) built with the tests, the steps that need torch's CUDA
# run on the CPU, and the JSON says the figures are the stand-in's. --no-gpu:
# no CUDA at all. --quick: small data sets. --dry-run: print the plan.
# --tools-only: the tools step alone (exit 1 when the build could not run).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT_DIR=${OUT:-$REPO/gpu-results}
BUDGET=330
IMAGES=""     # default: 250 per core, 800 to 4000 (written at about 60 per second per core)
TINY_FILES="" # default: 1250 per core, 4000 to 20000
E2E_WORKERS=16
SCALING_WORKERS=1,2,4,8,16
SCALING_RUN_S=3
E2E_RUN_LIMIT=45
BATCH=256
SIZE=224
MODE=gpu
DRY=0
FETCH=0
KEEP_DATA=0
TOOLS_ONLY=0
DEPS_DIR=${RF_GPU_DEPS:-$REPO/shared-debs}
BUILD=${RF_GPU_BUILD:-/tmp/rf-gpu-build}
PY=${PYTHON:-python3}

usage() {
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//; /^set -euo/d'
}

while [ $# -gt 0 ]; do
    case $1 in
    --out) OUT_DIR=$2; shift 2 ;;
    --budget) BUDGET=$2; shift 2 ;;
    --images) IMAGES=$2; shift 2 ;;
    --tiny) TINY_FILES=$2; shift 2 ;;
    --e2e-workers) E2E_WORKERS=$2; shift 2 ;;
    --scaling-workers) SCALING_WORKERS=$2; shift 2 ;;
    --batch-size) BATCH=$2; shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    --standin) MODE=standin; shift ;;
    --no-gpu) MODE=cpu; shift ;;
    --quick) IMAGES=800; TINY_FILES=4000; BATCH=64; SCALING_RUN_S=2; E2E_RUN_LIMIT=20; shift ;;
    --dry-run) DRY=1; shift ;;
    --fetch-deps | --fetch-debs) FETCH=1; shift ;;
    --keep-data) KEEP_DATA=1; shift ;;
    --tools-only) TOOLS_ONLY=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "gpu_check: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done

# shellcheck source=bench/gpu_check_deps.sh
. "$REPO/bench/gpu_check_deps.sh"
if [ "$FETCH" = 1 ]; then
    fetch_deps "$DEPS_DIR"
    exit $?
fi
# shellcheck source=bench/gpu_check_steps.sh
. "$REPO/bench/gpu_check_steps.sh"

msg() { printf '[gpu_check %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

# ---------------------------------------------------------------------------
# Bookkeeping: the log, the steps, the JSON written on exit
# ---------------------------------------------------------------------------
mkdir -p "$OUT_DIR"
OUT_DIR=$(cd "$OUT_DIR" && pwd)
LOG=$OUT_DIR/gpu_check.log
JSON=$OUT_DIR/gpu_check.json
WORK=$(mktemp -d /tmp/rf-gpu-check.XXXXXX)
: >"$LOG"
exec > >(tee -a "$LOG") 2>&1
START=$(date +%s)
DEADLINE=$((START + BUDGET))
RESERVE=15 # seconds kept for the JSON and the summary
: >"$WORK/steps.tsv"
FAILED=0

record() { # record NAME STATUS SECONDS RC NOTE
    printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "${5//$'\t'/ }" >>"$WORK/steps.tsv"
    if [ "$2" = failed ] || [ "$2" = timeout ]; then FAILED=1; fi
}

left() { echo $((DEADLINE - RESERVE - $(date +%s))); }

# step NAME CAP FUNCTION: runs FUNCTION (exported) under `timeout`; never
# stops the script. Returns the function's status (124: timed out, 77: skipped).
step() {
    local name=$1 cap=$2 fn=$3 t rc=0 t0 dt status
    t=$(left)
    if [ "$cap" -lt "$t" ]; then t=$cap; fi
    if [ "$DRY" = 1 ]; then
        msg "[dry-run] step $name (limit ${t}s): $fn"
        record "$name" dry-run 0 0 ""
        return 0
    fi
    if [ "$t" -lt 5 ]; then
        msg "==> $name: SKIPPED (no time left in the ${BUDGET}s budget)"
        record "$name" skipped 0 0 "no time left"
        return 1
    fi
    msg "==> $name (limit ${t}s)"
    STEP_DEADLINE=$(($(date +%s) + t - 5))
    export STEP_DEADLINE
    t0=$(date +%s.%N)
    timeout --kill-after=5 "$t" bash -c "$fn" || rc=$?
    dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    case $rc in
    0) status=ok ;;
    77) status=skipped ;;
    124 | 137) status=timeout ;;
    *) status=failed ;;
    esac
    msg "<== $name: $status (rc $rc, ${dt}s)"
    record "$name" "$status" "$dt" "$rc" "$(cat "$WORK/$name.note" 2>/dev/null || true)"
    return $rc
}

skip_step() { # skip_step NAME REASON
    msg "==> $1: SKIPPED ($2)"
    record "$1" skipped 0 0 "$2"
}

on_exit() {
    local rc=$?
    trap - EXIT
    set +e
    msg "writing $JSON"
    WORK=$WORK REPO=$REPO MODE=$MODE START=$START BUDGET=$BUDGET JSON=$JSON IMAGES=$IMAGES \
        TINY_FILES=$TINY_FILES E2E_WORKERS=$E2E_WORKERS SCALING_WORKERS=$SCALING_WORKERS \
        BATCH=$BATCH SIZE=$SIZE RUNTIME=${RINGFEED_CUDART_USED:-} \
        "$PY" "$REPO/bench/gpu_check_report.py" --json "$JSON" ||
        printf '{"what": "ringfeed gpu_check", "mode": "%s", "error": "the report failed; see gpu_check.log"}\n' \
            "$MODE" >"$JSON"
    if [ "$KEEP_DATA" != 1 ] && [ -n "${DATA_ROOT:-}" ] && [ -d "$DATA_ROOT" ]; then
        rm -rf "$DATA_ROOT"
    fi
    msg "finished in $(($(date +%s) - START))s; figures: $JSON; log: $LOG"
    if [ "$FAILED" = 1 ] || [ $rc -ne 0 ]; then
        msg "RESULT: some steps FAILED (see the steps in $JSON)"
        exit 1
    fi
    msg "RESULT: all steps passed"
    exit 0
}
trap on_exit EXIT
trap 'msg "interrupted"; exit 130' INT TERM

NPROC=$(nproc 2>/dev/null || echo 4)
clamp() { local v=$(($1 * NPROC)); [ $v -lt $2 ] && v=$2; [ $v -gt $3 ] && v=$3; echo $v; }
IMAGES=${IMAGES:-$(clamp 250 800 4000)}
TINY_FILES=${TINY_FILES:-$(clamp 1250 4000 20000)}
msg "ringfeed gpu_check: mode=$MODE budget=${BUDGET}s images=$IMAGES tiny=$TINY_FILES e2e_workers=$E2E_WORKERS scaling=$SCALING_WORKERS"
msg "repo=$REPO out=$OUT_DIR build=$BUILD work=$WORK deps=$DEPS_DIR nproc=$NPROC"

# ---------------------------------------------------------------------------
# tools: first, and what is missing said before anything runs
# ---------------------------------------------------------------------------
TOOLS_OK=1
if [ "$DRY" = 1 ]; then
    record tools dry-run 0 0 ""
    CMAKE=cmake CTEST=ctest HAVE_TESTS=1 RUNTIME="" GPU_PY_PATH="" CMAKE_DEP_ARGS_STR=""
else
    t0=$(date +%s)
    if check_tools; then
        record tools ok "$(($(date +%s) - t0))" 0 "$(cat "$WORK/tools.note" 2>/dev/null || true)"
    else
        TOOLS_OK=0
        record tools failed "$(($(date +%s) - t0))" 1 "$(cat "$WORK/tools.note" 2>/dev/null || true)"
    fi
fi
if [ "$TOOLS_ONLY" = 1 ]; then
    [ "$TOOLS_OK" = 1 ] || FAILED=1
    exit 0
fi
CUDA_MAJOR=""
for d in "${CUDA_HOME:-}" "${CUDA_PATH:-}" /usr/local/cuda; do
    if [ -n "$d" ] && [ -f "$d/include/cuda_runtime_api.h" ]; then
        CUDA_MAJOR=$(($(grep -m1 'define CUDART_VERSION' "$d/include/cuda_runtime_api.h" | awk '{print $3}') / 1000))
        break
    fi
done
CUDA_OTHER=$([ "$CUDA_MAJOR" = 12 ] && echo 11 || echo $((${CUDA_MAJOR:-13} - 1)))
[ "$MODE" = cpu ] && CUDA_MAJOR=""
RINGFEED_CUDART_USED=$([ "$MODE" = standin ] && echo "$BUILD/fake-cudart/libcudart.so.$CUDA_MAJOR" || echo "${RUNTIME:-}")

# Where the data go: tmpfs (/dev/shm) when it has room, else the work folder.
need=$((IMAGES * 110 * 1024 + TINY_FILES * 2048 + (256 << 20)))
shm_free=$(df -B1 --output=avail /dev/shm 2>/dev/null | tail -1 | tr -d ' ' || echo 0)
if [ -n "$shm_free" ] && [ "$shm_free" -gt "$need" ] 2>/dev/null; then
    DATA_ROOT=/dev/shm/rf-gpu-check.$$
else
    DATA_ROOT=$WORK/data-root
    msg "data: /dev/shm has ${shm_free:-?} bytes free, ${need} wanted: using $DATA_ROOT"
fi
DATA=$DATA_ROOT/photo TINY=$DATA_ROOT/tiny

# Everything the step functions read, exported (they run in `bash -c`).
export REPO BUILD WORK MODE PY NPROC IMAGES TINY_FILES BATCH SIZE DATA TINY E2E_WORKERS \
    E2E_RUN_LIMIT SCALING_WORKERS SCALING_RUN_S CMAKE CTEST HAVE_TESTS RUNTIME GPU_PY_PATH \
    CMAKE_DEP_ARGS_STR CUDA_MAJOR CUDA_OTHER

# ---------------------------------------------------------------------------
# The plan
# ---------------------------------------------------------------------------
step sysinfo 20 s_sysinfo || true
BUILT=0
if [ "$TOOLS_OK" = 1 ] && step configure 60 s_configure && step build 150 s_build; then
    BUILT=1
fi
[ "$DRY" = 1 ] && BUILT=1
if [ "$BUILT" = 1 ]; then
    if [ "$HAVE_TESTS" = 1 ]; then
        step cuda_tests 90 s_cuda_tests || true
    else
        skip_step cuda_tests "no cmocka: the C tests were not built"
    fi
    step pytest 75 s_pytest || true
    step bandwidth 40 s_bandwidth || true
    if step data 45 s_data; then
        step e2e 100 s_e2e || true
        step normalize 30 s_normalize || true
        step scaling 100 s_scaling || true
    else
        for s in e2e normalize scaling; do skip_step "$s" "no data"; done
    fi
    if [ "$DRY" = 1 ] || [ "$(left)" -ge 60 ]; then
        step ctest_all 200 s_ctest_all || true
    else
        skip_step ctest_all "less than 60 s left"
    fi
else
    if [ "$TOOLS_OK" != 1 ]; then
        skip_step configure "tools missing"
        skip_step build "tools missing"
    fi
    for s in cuda_tests pytest bandwidth data e2e normalize scaling ctest_all; do
        skip_step "$s" "$([ "$TOOLS_OK" = 1 ] && echo "the build failed" || echo "tools missing")"
    done
fi
exit 0
