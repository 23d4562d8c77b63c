#!/usr/bin/env bash
# gpu_check.sh - the CUDA check of ringfeed on a lent GPU machine, in one go.
#
#   bash bench/gpu_check.sh [--out DIR] [--budget SECONDS] [--images N] [--workers 4,8,16]
#                           [--no-gpu] [--quick] [--dry-run] [--keep-data]
#   bash bench/gpu_check.sh --fetch-debs        # on a machine WITH Debian's registry, first
#
# The GPU machine has CUDA, PyTorch and torchvision but no package registry:
# --fetch-debs (run beforehand on a development machine) downloads the Debian
# packages the build needs (liburing, libjpeg-turbo, libturbojpeg, cmocka)
# into shared-debs/debs and unpacks them with dpkg -x into shared-debs/root,
# a prefix the build then uses (shared-debs/ is git-ignored: the device tool
# carries it). Then, on the GPU machine, within --budget seconds (default 450):
#
#   deps       shared-debs/root (or the system's libraries) for CMake and the loader
#   sysinfo    GPU, driver, CPUs, torch/torchvision, /dev/shm
#   configure  cmake -DRF_WITH_CUDA=ON into $RF_GPU_BUILD (default /tmp/rf-gpu-build)
#   build      all targets
#   gpu_tests  ctest: test_copier, test_cuda (must PASS, not skip, on a GPU), test_ring, test_loader
#   pytest     bindings/python/tests/test_cuda.py (device tensors == CPU output, ...)
#   bandwidth  rf-copy-bench: H2D GB/s of batch-sized copies, plain cudaMemcpyAsync
#              (pinned, pageable) vs the copier (pinned, pageable, direct)
#   data       rf-gen-folder: an ImageNet-like folder (500x375 JPEGs) on /dev/shm
#   e2e        bench/gpu_e2e.py: ringfeed vs torchvision DataLoader into the GPU at
#              4, 8, 16 workers (same workers, pin_memory=True, .cuda(non_blocking=True))
#   ctest_all  the whole test suite, if time is left
#
# Every step has a time limit (the smaller of its own cap and what is left of
# the budget); a failed or timed-out step is recorded and the script goes on
# with what does not depend on it. One JSON file of figures, $OUT/gpu_check.json
# ($OUT: the device tool's output folder; ./gpu-results otherwise), is written
# at the end whatever happened, next to the full log $OUT/gpu_check.log.
# Exit status: 0 when every step that ran passed, 1 otherwise.
#
# --no-gpu: the same steps where no GPU is needed (CUDA optional, tests may
# skip, e2e with device=cpu), to test this script on a development machine.
# --quick: a small data set and worker counts 2,4. --dry-run: print the plan.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT_DIR=${OUT:-$REPO/gpu-results}
BUDGET=450
IMAGES=8000
WORKERS=4,8,16
BATCH=256
SIZE=224
MODE=gpu
DRY=0
QUICK=0
FETCH=0
KEEP_DATA=0
DEBS_DIR=$REPO/shared-debs
BUILD=${RF_GPU_BUILD:-/tmp/rf-gpu-build}
PY=${PYTHON:-python3}
DEB_PACKAGES="liburing2 liburing-dev libturbojpeg0 libjpeg62-turbo libjpeg62-turbo-dev libcmocka0 libcmocka-dev"

usage() {
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//; /^set -euo/d'
}

while [ $# -gt 0 ]; do
    case $1 in
    --out) OUT_DIR=$2; shift 2 ;;
    --budget) BUDGET=$2; shift 2 ;;
    --images) IMAGES=$2; shift 2 ;;
    --workers) WORKERS=$2; shift 2 ;;
    --batch-size) BATCH=$2; shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    --no-gpu) MODE=cpu; shift ;;
    --quick) QUICK=1; shift ;;
    --dry-run) DRY=1; shift ;;
    --fetch-debs) FETCH=1; shift ;;
    --keep-data) KEEP_DATA=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "gpu_check: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
if [ "$QUICK" = 1 ]; then
    IMAGES=400; WORKERS=2,4; BATCH=32
fi

msg() { printf '[gpu_check %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

# ---------------------------------------------------------------------------
# --fetch-debs: on a development machine (Debian's registry reachable)
# ---------------------------------------------------------------------------
fetch_debs() {
    msg "fetching $DEB_PACKAGES into $DEBS_DIR"
    mkdir -p "$DEBS_DIR/debs"
    chmod 777 "$DEBS_DIR/debs" 2>/dev/null || true # apt's _apt user writes there
    (cd "$DEBS_DIR/debs" && rm -f ./*.deb &&
        { apt-get download $DEB_PACKAGES || { apt-get update -qq && apt-get download $DEB_PACKAGES; }; })
    rm -rf "$DEBS_DIR/root"
    mkdir -p "$DEBS_DIR/root"
    for f in "$DEBS_DIR"/debs/*.deb; do
        dpkg -x "$f" "$DEBS_DIR/root"
    done
    # Relocatable .pc files: /usr -> the prefix, found from the .pc file itself.
    # libjpeg's jconfig.h lives in the multiarch include folder.
    local pc
    for pc in "$DEBS_DIR"/root/usr/lib/*/pkgconfig/*.pc; do
        sed -i -e 's#=/usr\b#=${pcfiledir}/../../..#g' -e 's#-L/usr/#-L${pcfiledir}/../../../#g' \
            -e 's#-I/usr/#-I${pcfiledir}/../../../#g' "$pc"
        case $(basename "$pc") in
        libjpeg.pc) sed -i 's#^Cflags: -I${includedir}$#Cflags: -I${includedir} -I${includedir}/x86_64-linux-gnu#' "$pc" ;;
        esac
    done
    (cd "$DEBS_DIR/debs" && ls -1 ./*.deb | sed 's#^\./##') >"$DEBS_DIR/MANIFEST"
    if ! (cd "$REPO" && git check-ignore -q shared-debs/ 2>/dev/null); then
        msg "WARNING: shared-debs/ is not git-ignored in $REPO (add it to .gitignore)"
    fi
    msg "done: $(wc -l <"$DEBS_DIR/MANIFEST") packages, $(du -sh "$DEBS_DIR" | cut -f1) in $DEBS_DIR"
    msg "device tool: run with carry [\"shared-debs\"] and command: bash bench/gpu_check.sh"
}
if [ "$FETCH" = 1 ]; then
    fetch_debs
    exit 0
fi

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
RESERVE=20 # seconds kept for the JSON and the summary
: >"$WORK/steps.tsv"
FAILED=0

record() { # record NAME STATUS SECONDS RC NOTE
    printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "${5//$'\t'/ }" >>"$WORK/steps.tsv"
    if [ "$2" = failed ] || [ "$2" = timeout ]; then FAILED=1; fi
}

left() { echo $((DEADLINE - RESERVE - $(date +%s))); }

# step NAME CAP FUNCTION: runs FUNCTION (exported) under `timeout`; never
# stops the script. Returns the function's status (124: timed out).
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
    t0=$(date +%s.%N)
    timeout --kill-after=10 "$t" bash -c "$fn" || rc=$?
    dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    case $rc in
    0) status=ok ;;
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

assemble_json() {
    set +e
    local py=$PY
    command -v "$py" >/dev/null 2>&1 || py=python3
    WORK=$WORK REPO=$REPO MODE=$MODE START=$START BUDGET=$BUDGET JSON=$JSON \
        IMAGES=$IMAGES WORKERS=$WORKERS BATCH=$BATCH SIZE=$SIZE DATA="${DATA:-}" \
        "$py" - <<'PYEOF'
import json, os, re, subprocess, time
W = os.environ["WORK"]

def load(name):
    p = os.path.join(W, name)
    try:
        with open(p) as f:
            return json.load(f)
    except FileNotFoundError:
        return None
    except Exception as e:
        return {"error": "cannot read %s: %r" % (name, e)}

def text(name):
    try:
        with open(os.path.join(W, name), errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""

steps = []
for line in text("steps.tsv").splitlines():
    parts = line.split("\t")
    if len(parts) >= 5:
        steps.append({"step": parts[0], "status": parts[1], "seconds": float(parts[2] or 0),
                      "rc": int(parts[3] or 0), "note": parts[4]})

def ctest_results(out):
    res = {}
    for m in re.finditer(r"Test\s+#\d+: (\S+) \.+\s*(\*\*\*)?(Passed|Failed|Skipped|Not Run|Timeout|Exception)?(.*?)\s+[\d.]+ sec", out):
        res[m.group(1)] = (m.group(3) or (m.group(4) or "").strip() or "?").lower()
    m = re.search(r"(\d+)% tests passed, (\d+) tests failed out of (\d+)", out)
    summary = {"line": m.group(0)} if m else {}
    return {"tests": res, **summary}

def pytest_summary(out):
    lines = [l.strip("= ") for l in out.splitlines() if re.search(r"\d+ (passed|failed|skipped|error)", l)]
    last = lines[-1] if lines else ""
    counts = {k: int(v) for v, k in re.findall(r"(\d+) (passed|failed|skipped|errors?|xfailed)", last)}
    return {"line": last, **counts}

git = {}
try:
    rev = subprocess.run(["git", "-C", os.environ["REPO"], "rev-parse", "HEAD"], capture_output=True,
                         text=True, timeout=10)
    if rev.returncode == 0:
        git["revision"] = rev.stdout.strip()
        st = subprocess.run(["git", "-C", os.environ["REPO"], "status", "--porcelain", "--untracked-files=no"],
                            capture_output=True, text=True, timeout=10)
        git["dirty"] = bool(st.stdout.strip())
except Exception as e:
    git["error"] = repr(e)

doc = {
    "what": "ringfeed gpu_check (bench/gpu_check.sh)",
    "mode": os.environ["MODE"],
    "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(os.environ["START"]))),
    "seconds": round(time.time() - int(os.environ["START"]), 1),
    "budget_seconds": int(os.environ["BUDGET"]),
    "git": git,
    "params": {"images": int(os.environ["IMAGES"]), "workers": os.environ["WORKERS"],
               "batch_size": int(os.environ["BATCH"]), "image_size": int(os.environ["SIZE"]),
               "data": os.environ.get("DATA")},
    "steps": steps,
    "system": load("sys.json"),
    "tests": {"gpu_ctest": ctest_results(text("ctest_gpu.out")) if text("ctest_gpu.out") else None,
              "pytest_cuda": pytest_summary(text("pytest.out")) if text("pytest.out") else None,
              "ctest_all": ctest_results(text("ctest_all.out")) if text("ctest_all.out") else None},
    "bandwidth": load("bandwidth.json"),
    "data_generation": load("data.json"),
    "e2e": load("e2e.json"),
}
targets = {}
bw = doc["bandwidth"] or {}
if bw.get("plain_pinned_gbps"):
    r = bw["copier_pinned_gbps"] / bw["plain_pinned_gbps"]
    targets["copier_pinned_vs_plain"] = {"value": round(r, 3), "target": 0.8, "met": r >= 0.8}
    if bw.get("plain_pageable_gbps"):
        targets["pinned_vs_pageable_plain"] = round(bw["plain_pinned_gbps"] / bw["plain_pageable_gbps"], 2)
e2e = doc["e2e"] or {}
for w, e in sorted(((e2e.get("summary") or {}).get("workers") or {}).items(), key=lambda kv: int(kv[0])):
    if "ratio" in e:
        targets["e2e_vs_torchvision_workers_%s" % w] = {
            "ringfeed_images_per_sec": e.get("ringfeed"), "torchvision_images_per_sec": e.get("torchvision"),
            "value": e["ratio"], "later_epochs_value": e.get("ratio_later_epochs"), "target": 2.0,
            "met": e["ratio"] >= 2.0}
doc["targets"] = targets
doc["ok"] = all(s["status"] in ("ok", "skipped", "dry-run") for s in steps)
tmp = os.environ["JSON"] + ".tmp"
with open(tmp, "w") as f:
    json.dump(doc, f, indent=1, sort_keys=False)
os.replace(tmp, os.environ["JSON"])
print(json.dumps({"steps": {s["step"]: s["status"] for s in steps}, "targets": targets}, indent=1))
PYEOF
    local rc=$?
    if [ $rc -ne 0 ] || [ ! -s "$JSON" ]; then
        # No usable Python: the step table alone, so that something comes back.
        {
            printf '{"what": "ringfeed gpu_check (fallback: no JSON from python)", "mode": "%s", "steps": [' "$MODE"
            awk -F'\t' 'BEGIN{ORS=""} {gsub(/"/, "'"'"'", $5); if (NR>1) print ", "; printf "{\"step\": \"%s\", \"status\": \"%s\", \"seconds\": %s, \"rc\": %s, \"note\": \"%s\"}", $1, $2, $3, $4, $5}' "$WORK/steps.tsv"
            printf ']}\n'
        } >"$JSON"
    fi
    set -e
}

on_exit() {
    local rc=$?
    trap - EXIT
    set +e
    msg "writing $JSON"
    assemble_json
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

msg "ringfeed gpu_check: mode=$MODE budget=${BUDGET}s images=$IMAGES workers=$WORKERS batch=$BATCH"
msg "repo=$REPO out=$OUT_DIR build=$BUILD work=$WORK python=$(command -v "$PY" || echo none)"

# Everything the step functions need, exported (they run in `bash -c`).
export REPO BUILD WORK MODE PY IMAGES WORKERS BATCH SIZE DEBS_DIR QUICK
NPROC=$(nproc 2>/dev/null || echo 4)
export NPROC

# ---------------------------------------------------------------------------
# sysinfo
# ---------------------------------------------------------------------------
s_sysinfo() {
    set -uo pipefail
    {
        echo "--- uname: $(uname -a)"
        grep -E '^(PRETTY_NAME|VERSION_ID)=' /etc/os-release 2>/dev/null || true
        echo "--- nproc: $(nproc)"
        command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.current,pcie.link.width.current --format=csv || echo "nvidia-smi: not found"
        command -v nvcc >/dev/null && nvcc --version | tail -2 || echo "nvcc: not on PATH"
        ls -d /usr/local/cuda* 2>/dev/null || true
        command -v cmake >/dev/null && cmake --version | head -1 || echo "cmake: not found"
        command -v ninja >/dev/null && echo "ninja $(ninja --version)" || echo "ninja: not found"
        command -v pkg-config >/dev/null && echo "pkg-config $(pkg-config --version)" || echo "pkg-config: not found"
        command -v gcc >/dev/null && gcc --version | head -1 || echo "gcc: not found"
        df -h /dev/shm /tmp 2>/dev/null || true
        cat /proc/sys/kernel/io_uring_disabled 2>/dev/null | sed 's/^/io_uring_disabled=/' || true
    } 2>&1
    "$PY" - <<'PYEOF' >"$WORK/sys.json"
import json, os, platform, subprocess, shutil
d = {"hostname": platform.node(), "kernel": platform.release(), "machine": platform.machine(),
     "cpus": os.cpu_count(), "python": platform.python_version()}
try:
    d["affinity_cpus"] = len(os.sched_getaffinity(0))
except Exception:
    pass
try:
    with open("/etc/os-release") as f:
        d["os"] = dict(l.rstrip("\n").split("=", 1) for l in f if "=" in l).get("PRETTY_NAME", "").strip('"')
except Exception:
    pass
try:
    with open("/proc/meminfo") as f:
        d["mem_total_kb"] = int(f.readline().split()[1])
except Exception:
    pass
if shutil.which("nvidia-smi"):
    r = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,pcie.link.gen.max,pcie.link.width.max",
                        "--format=csv,noheader"], capture_output=True, text=True, timeout=30)
    d["nvidia_smi"] = r.stdout.strip() or r.stderr.strip()
try:
    import torch
    d["torch"] = torch.__version__
    d["torch_cuda"] = torch.version.cuda
    d["cuda_available"] = torch.cuda.is_available()
    if torch.cuda.is_available():
        d["gpu"] = torch.cuda.get_device_name(0)
        d["gpu_count"] = torch.cuda.device_count()
except Exception as e:
    d["torch"] = None
    d["torch_error"] = repr(e)
try:
    import torchvision
    d["torchvision"] = torchvision.__version__
except Exception as e:
    d["torchvision"] = None
try:
    import PIL
    d["pillow"] = PIL.__version__
except Exception:
    pass
st = os.statvfs("/dev/shm") if os.path.isdir("/dev/shm") else None
if st:
    d["dev_shm_free_bytes"] = st.f_bavail * st.f_frsize
print(json.dumps(d))
PYEOF
    cat "$WORK/sys.json"
}
export -f s_sysinfo

# ---------------------------------------------------------------------------
# deps: the carried prefix (or the system's libraries)
# ---------------------------------------------------------------------------
PREFIX=$DEBS_DIR/root
CMAKE_DEP_ARGS=()
setup_deps() {
    local archlib=$PREFIX/usr/lib/x86_64-linux-gnu note
    if [ -d "$PREFIX/usr/include" ] && [ -d "$archlib" ]; then
        export PKG_CONFIG_PATH=$archlib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
        export CMAKE_PREFIX_PATH=$PREFIX/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
        export LD_LIBRARY_PATH=$archlib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
        export CFLAGS="-I$PREFIX/usr/include -I$PREFIX/usr/include/x86_64-linux-gnu ${CFLAGS:-}"
        export LDFLAGS="-L$archlib ${LDFLAGS:-}"
        # Used when pkg-config is missing (CMake's find_path/find_library fallbacks).
        CMAKE_DEP_ARGS=(-DRF_JPEG_INCLUDE_DIR="$PREFIX/usr/include" -DRF_JPEG_LIBRARY="$archlib/libjpeg.so"
            -DRF_URING_INCLUDE_DIR="$PREFIX/usr/include" -DRF_URING_LIBRARY="$archlib/liburing.so"
            -DRF_CMOCKA_INCLUDE_DIR="$PREFIX/usr/include" -DRF_CMOCKA_LIBRARY="$archlib/libcmocka.so")
        note="prefix $PREFIX ($(cat "$DEBS_DIR/MANIFEST" 2>/dev/null | tr '\n' ' '))"
    else
        note="no $PREFIX: the system's libraries (run --fetch-debs on a development machine and carry shared-debs)"
    fi
    local miss=""
    for h in jpeglib.h liburing.h cmocka.h; do
        [ -f "$PREFIX/usr/include/$h" ] || [ -f "/usr/include/$h" ] || [ -f "/usr/local/include/$h" ] || miss="$miss $h"
    done
    if [ -n "$miss" ]; then
        note="$note; MISSING headers:$miss"
        msg "deps: $note"
        record deps failed 0 1 "$note"
        return 1
    fi
    msg "deps: $note"
    record deps ok 0 0 "$note"
}

# ---------------------------------------------------------------------------
# configure, build, tests
# ---------------------------------------------------------------------------
s_configure() {
    set -euo pipefail
    local gen=() cuda=ON
    command -v ninja >/dev/null && gen=(-G Ninja)
    [ "$MODE" = cpu ] && cuda=AUTO
    rm -rf "$BUILD"
    # shellcheck disable=SC2086
    cmake -S "$REPO" -B "$BUILD" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DRF_WITH_CUDA=$cuda \
        -DRF_WERROR=OFF -DRF_PYTHON="$(command -v "$PY")" $CMAKE_DEP_ARGS_STR
    grep -E '^(RF_HAVE_CUDA|RF_HAVE_URING|RF_JPEG_LIBRARY|RF_URING_LIBRARY)' "$BUILD/CMakeCache.txt" || true
}
export -f s_configure

s_build() {
    set -euo pipefail
    cmake --build "$BUILD" -j "$NPROC"
    ls -l "$BUILD"/libringfeed.so* "$BUILD"/rf-gen-folder
    ldd "$BUILD/libringfeed.so" | grep -E 'jpeg|uring|cudart|not found' || true
}
export -f s_build

s_gpu_tests() {
    set -uo pipefail
    local rc=0
    (cd "$BUILD" && ctest --output-on-failure -j 4 --timeout 240 \
        -R '^(test_copier|test_cuda|test_cuda_fake|test_ring|test_loader)$') 2>&1 |
        tee "$WORK/ctest_gpu.out" || rc=$?
    if [ "$MODE" = gpu ] && ! grep -qE 'test_cuda \.+ +Passed' "$WORK/ctest_gpu.out"; then
        echo "gpu_tests: test_cuda did not PASS on this GPU machine (skipped or failed)" |
            tee "$WORK/gpu_tests.note"
        rc=1
    fi
    return $rc
}
export -f s_gpu_tests

s_pytest() {
    set -uo pipefail
    local rc=0
    RINGFEED_LIBRARY="$BUILD/libringfeed.so" RINGFEED_GEN="$BUILD/rf-gen-folder" \
        PYTHONPATH="$REPO/bindings/python" PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
        "$PY" -m pytest -q -rs -p no:cacheprovider "$REPO/bindings/python/tests/test_cuda.py" 2>&1 |
        tee "$WORK/pytest.out" || rc=$?
    if [ "$MODE" = gpu ] && grep -qE 'no CUDA device' "$WORK/pytest.out"; then
        echo "pytest: the CUDA tests were skipped on this GPU machine" | tee "$WORK/pytest.note"
        rc=1
    fi
    return $rc
}
export -f s_pytest

s_bandwidth() {
    set -euo pipefail
    if [ ! -x "$BUILD/rf-copy-bench" ]; then
        echo '{"skipped": "rf-copy-bench was not built (no CUDA toolkit)"}' >"$WORK/bandwidth.json"
        echo "rf-copy-bench not built" >"$WORK/bandwidth.note"
        return 0
    fi
    local iters=200
    [ "$QUICK" = 1 ] && iters=20
    "$BUILD/rf-copy-bench" --batch 256 --size 224 --iters $iters --slots 4 --repeats 3 \
        --json "$WORK/bandwidth.json"
}
export -f s_bandwidth

s_data() {
    set -euo pipefail
    local per=$(((IMAGES + 9) / 10)) t0 t1
    rm -rf "$DATA"
    mkdir -p "$(dirname "$DATA")"
    t0=$(date +%s.%N)
    "$BUILD/rf-gen-folder" "$DATA" --classes 10 --per-class $per --width 500 --height 375 \
        --quality 90 --seed 1 --threads "$NPROC"
    t1=$(date +%s.%N)
    local n bytes
    n=$(find "$DATA" -name '*.jpg' | wc -l)
    bytes=$(du -sb "$DATA" | cut -f1)
    printf '{"path": "%s", "images": %d, "bytes": %d, "seconds": %s, "width": 500, "height": 375, "quality": 90}\n' \
        "$DATA" "$n" "$bytes" "$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b-a}')" >"$WORK/data.json"
    cat "$WORK/data.json"
}
export -f s_data

s_e2e() {
    set -uo pipefail
    local dev=cuda extra=(--extras)
    [ "$MODE" = cpu ] && dev=cpu && extra=()
    RINGFEED_LIBRARY="$BUILD/libringfeed.so" PYTHONPATH="$REPO/bindings/python" \
        PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
        "$PY" "$REPO/bench/gpu_e2e.py" --data "$DATA" --out "$WORK/e2e.json" --workers "$WORKERS" \
        --batch-size "$BATCH" --image-size "$SIZE" --device $dev --epochs 2 \
        --run-limit 60 --deadline "$E2E_DEADLINE" "${extra[@]}"
}
export -f s_e2e

s_ctest_all() {
    set -uo pipefail
    # install_consumer is left out: it runs the installed library with
    # LD_LIBRARY_PATH replaced, so it cannot find dependencies that live in a
    # non-system prefix (shared-debs/root) - a limit of this setup, not a bug.
    (cd "$BUILD" && ctest --output-on-failure -j "$NPROC" --timeout 240 -E '^install_consumer$') 2>&1 |
        tee "$WORK/ctest_all.out"
}
export -f s_ctest_all

# ---------------------------------------------------------------------------
# The plan
# ---------------------------------------------------------------------------
if [ "$DRY" = 1 ]; then
    record deps dry-run 0 0 "prefix $PREFIX"
else
    setup_deps || true
fi
CMAKE_DEP_ARGS_STR="${CMAKE_DEP_ARGS[*]:-}"
export CMAKE_DEP_ARGS_STR PKG_CONFIG_PATH="${PKG_CONFIG_PATH:-}" CMAKE_PREFIX_PATH="${CMAKE_PREFIX_PATH:-}" \
    LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}" CFLAGS="${CFLAGS:-}" LDFLAGS="${LDFLAGS:-}"
step sysinfo 40 s_sysinfo || true

BUILT=0
if step configure 120 s_configure && step build 240 s_build; then
    BUILT=1
fi
[ "$DRY" = 1 ] && BUILT=1

# Where the images go: tmpfs (/dev/shm) when it has room (~110 kB per image
# and a margin), else /tmp.
need=$((IMAGES * 110 * 1024 + (256 << 20)))
shm_free=$(df -B1 --output=avail /dev/shm 2>/dev/null | tail -1 | tr -d ' ' || echo 0)
if [ -n "$shm_free" ] && [ "$shm_free" -gt "$need" ] 2>/dev/null; then
    DATA_ROOT=/dev/shm/rf-gpu-check.$$
else
    DATA_ROOT=$WORK/data-root
    msg "data: /dev/shm has ${shm_free:-?} bytes free, ${need} wanted: using $DATA_ROOT"
fi
DATA=$DATA_ROOT/imagefolder
export DATA

if [ "$BUILT" = 1 ]; then
    step gpu_tests 150 s_gpu_tests || true
    step pytest 150 s_pytest || true
    step bandwidth 60 s_bandwidth || true
    if step data 90 s_data; then
        # e2e may use what is left but the time for ctest_all's minimum.
        E2E_DEADLINE=$(($(date +%s) + $(left) - 30))
        export E2E_DEADLINE
        step e2e 300 s_e2e || true
    else
        skip_step e2e "no data"
    fi
    if [ "$DRY" = 1 ] || [ "$(left)" -ge 60 ]; then
        step ctest_all 240 s_ctest_all || true
    else
        skip_step ctest_all "less than 60 s left"
    fi
else
    for s in gpu_tests pytest bandwidth data e2e ctest_all; do
        skip_step "$s" "the build failed"
    done
fi
exit 0
