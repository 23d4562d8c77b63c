# gpu_check_steps.sh - the steps of bench/gpu_check.sh, one function each,
# sourced by it and exported: each runs in `bash -c` under a time limit, reads
# the variables gpu_check.sh exports (REPO BUILD WORK MODE PY NPROC RUNTIME
# CMAKE CTEST ...), writes its figures as JSON into $WORK/<step>.json and, when
# something is worth saying in the summary, one line into $WORK/<step>.note.
# Exit status: 0 passed, 77 skipped (nothing to run), 124 timed out, other: failed.
#
# A step for a later check is a function s_NAME here and one `step` line in
# gpu_check.sh's plan (s_normalize is the slot for the on-device normalization).

# The CUDA runtime the library loads in the steps: torch's on a GPU, the
# stand-in built with the tests in a rehearsal (FAKE_CUDART_DEVICES: two).
runtime_env() {
    if [ "$MODE" = standin ]; then
        export RINGFEED_CUDART=$BUILD/fake-cudart/libcudart.so.$CUDA_MAJOR FAKE_CUDART_DEVICES=2
    elif [ -n "${RUNTIME:-}" ]; then
        export RINGFEED_CUDART=$RUNTIME
    fi
}
export -f runtime_env

s_sysinfo() {
    set -uo pipefail
    {
        echo "--- uname: $(uname -a)"
        grep -E '^(PRETTY_NAME|VERSION_ID)=' /etc/os-release 2>/dev/null || true
        echo "--- nproc: $(nproc)"
        command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.current,pcie.link.width.current --format=csv || echo "nvidia-smi: not found"
        command -v nvcc >/dev/null && nvcc --version | tail -2 || echo "nvcc: not on PATH"
        [ -n "$CMAKE" ] && "$CMAKE" --version | head -1
        command -v gcc >/dev/null && gcc --version | head -1 || echo "gcc: not found"
        df -h /dev/shm /tmp 2>/dev/null || true
        cat /proc/sys/kernel/io_uring_disabled 2>/dev/null | sed 's/^/io_uring_disabled=/' || true
    } 2>&1
    "$PY" "$REPO/bench/gpu_check_report.py" --sysinfo >"$WORK/sysinfo.json"
    cat "$WORK/sysinfo.json"
}
export -f s_sysinfo

s_configure() {
    set -euo pipefail
    local gen=() cuda=ON
    command -v ninja >/dev/null && gen=(-G Ninja)
    [ "$MODE" = cpu ] && cuda=AUTO
    rm -rf "$BUILD"
    # shellcheck disable=SC2086
    "$CMAKE" -S "$REPO" -B "$BUILD" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DRF_WITH_CUDA=$cuda \
        -DRF_WERROR=OFF -DRF_PYTHON="$(command -v "$PY")" $CMAKE_DEP_ARGS_STR
    grep -E '^(RF_HAVE_CUDA|RF_HAVE_URING|RF_JPEG_LIBRARY|RF_URING_LIBRARY|RF_CMOCKA_LIBRARY)' \
        "$BUILD/CMakeCache.txt" || true
}
export -f s_configure

# What the checks need, first; ctest_all builds the rest if time is left.
s_build() {
    set -euo pipefail
    local targets="ringfeed rf-gen-folder" t
    [ -n "${CUDA_MAJOR:-}" ] && targets="$targets rf-copy-bench"
    if [ "$HAVE_TESTS" = 1 ]; then
        for t in "$REPO"/tests/test_copier*.c "$REPO"/tests/test_cuda*.c "$REPO"/tests/test_ring.c; do
            targets="$targets $(basename "$t" .c)"
        done
        [ -n "${CUDA_MAJOR:-}" ] && targets="$targets rf_fake_cudart rf_fake_cudart_$CUDA_OTHER cuda_probe"
    fi
    # shellcheck disable=SC2086
    "$CMAKE" --build "$BUILD" -j "$NPROC" --target $targets
    ls -l "$BUILD"/libringfeed.so* "$BUILD"/rf-gen-folder
}
export -f s_build

# The C tests of the CUDA path: on a GPU, test_cuda* on torch's runtime (the
# ones that need the stand-in's knobs skip there) and test_cuda*_fake on the
# stand-in; test_cuda must pass there, not skip.
s_cuda_tests() {
    set -uo pipefail
    local rc=0
    runtime_env
    (cd "$BUILD" && "$CTEST" --output-on-failure -j "$NPROC" --timeout 120 \
        -R '^(test_copier.*|test_ring|test_cuda.*|cuda_fake_.*)$') 2>&1 |
        tee "$WORK/cuda_tests.out" || rc=$?
    if [ "$MODE" = gpu ] && ! grep -qE 'test_cuda \.+ +Passed' "$WORK/cuda_tests.out"; then
        echo "cuda_tests: test_cuda did not PASS on this GPU (skipped or failed)" |
            tee "$WORK/cuda_tests.note"
        rc=1
    fi
    return $rc
}
export -f s_cuda_tests

s_pytest() {
    set -uo pipefail
    local rc=0
    runtime_env
    RINGFEED_LIBRARY="$BUILD/libringfeed.so" RINGFEED_GEN="$BUILD/rf-gen-folder" \
        RINGFEED_TEST_FAKE_CUDART="$BUILD/fake-cudart/libcudart.so.$CUDA_MAJOR" \
        PYTHONPATH="$REPO/bindings/python${GPU_PY_PATH:+:$GPU_PY_PATH}" PYTHONDONTWRITEBYTECODE=1 \
        PYTHONUNBUFFERED=1 "$PY" -m pytest -q -rs -p no:cacheprovider \
        "$REPO/bindings/python/tests/test_cuda.py" "$REPO/bindings/python/tests/test_cuda_device.py" \
        2>&1 | tee "$WORK/pytest.out" || rc=$?
    if [ "$MODE" = gpu ] && grep -qE 'no CUDA device' "$WORK/pytest.out"; then
        echo "pytest: the CUDA tests were skipped on this GPU" | tee "$WORK/pytest.note"
        rc=1
    fi
    return $rc
}
export -f s_pytest

# Pinned vs pageable: plain cudaMemcpyAsync of ring-slot-sized batches, and
# the copier (to its device buffers; straight into caller memory).
s_bandwidth() {
    set -euo pipefail
    if [ ! -x "$BUILD/rf-copy-bench" ]; then
        echo '{"skipped": "rf-copy-bench was not built (no CUDA toolkit)"}' >"$WORK/bandwidth.json"
        return 77
    fi
    local iters=200 batch=256
    [ "$MODE" = gpu ] || { iters=10; batch=32; } # the stand-in copies with memcpy: a smoke test
    runtime_env
    "$BUILD/rf-copy-bench" --batch $batch --size 224 --iters $iters --slots 4 --repeats 3 \
        --json "$WORK/bandwidth.json"
}
export -f s_bandwidth

# A photo-like set (rf-gen-folder: ImageNet-like 500x375 JPEGs) and a set of
# tiny files (16x16 JPEGs, a few hundred bytes each) for the reader.
s_data() {
    set -euo pipefail
    local t0 t1 t2
    rm -rf "$DATA" "$TINY"
    mkdir -p "$(dirname "$DATA")"
    t0=$(date +%s.%N)
    "$BUILD/rf-gen-folder" "$DATA" --classes 10 --per-class $(((IMAGES + 9) / 10)) --width 500 \
        --height 375 --quality 90 --seed 1 --threads "$NPROC"
    t1=$(date +%s.%N)
    "$BUILD/rf-gen-folder" "$TINY" --classes 10 --per-class $(((TINY_FILES + 9) / 10)) --width 16 \
        --height 16 --quality 90 --seed 2 --threads "$NPROC"
    t2=$(date +%s.%N)
    "$PY" - "$DATA" "$TINY" "$t0" "$t1" "$t2" >"$WORK/data.json" <<'PYEOF'
import json, os, sys
def size(root):
    n = b = 0
    for d, _, fs in os.walk(root):
        for f in fs:
            n += 1
            b += os.path.getsize(os.path.join(d, f))
    return n, b
(pn, pb), (tn, tb) = size(sys.argv[1]), size(sys.argv[2])
t0, t1, t2 = map(float, sys.argv[3:6])
print(json.dumps({"photo": {"path": sys.argv[1], "files": pn, "bytes": pb, "seconds": round(t1 - t0, 2),
                            "width": 500, "height": 375, "quality": 90},
                  "tiny": {"path": sys.argv[2], "files": tn, "bytes": tb, "seconds": round(t2 - t1, 2),
                           "width": 16, "height": 16}}))
PYEOF
    cat "$WORK/data.json"
}
export -f s_data

# End to end into the GPU: ringfeed vs DataLoader(pin_memory=True) with
# .cuda(non_blocking=True), at E2E_WORKERS workers (without a GPU: on the CPU).
s_e2e() {
    set -uo pipefail
    local dev=cuda extra=(--extras)
    [ "$MODE" = gpu ] || { dev=cpu; extra=(); }
    runtime_env
    RINGFEED_LIBRARY="$BUILD/libringfeed.so" PYTHONPATH="$REPO/bindings/python" \
        PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
        "$PY" "$REPO/bench/gpu_e2e.py" --data "$DATA" --out "$WORK/e2e.json" \
        --workers "$E2E_WORKERS" --batch-size "$BATCH" --image-size "$SIZE" --device $dev \
        --epochs 2 --run-limit "$E2E_RUN_LIMIT" --deadline "$STEP_DEADLINE" "${extra[@]}"
}
export -f s_e2e

# The slot for the on-device normalization's check (float16 equal to torch's
# (x.float()/255 - mean)/std within 1 ulp): bench/gpu_normalize.py --data DIR
# --out FILE --device cuda|cpu, once it exists; skipped until then.
s_normalize() {
    set -uo pipefail
    if [ ! -f "$REPO/bench/gpu_normalize.py" ]; then
        echo '{"skipped": "bench/gpu_normalize.py does not exist yet (normalization on the device)"}' \
            >"$WORK/normalize.json"
        echo "no on-device normalization in this tree yet" >"$WORK/normalize.note"
        return 77
    fi
    local dev=cuda
    [ "$MODE" = gpu ] || dev=cpu
    runtime_env
    RINGFEED_LIBRARY="$BUILD/libringfeed.so" PYTHONPATH="$REPO/bindings/python" \
        PYTHONDONTWRITEBYTECODE=1 "$PY" "$REPO/bench/gpu_normalize.py" --data "$DATA" \
        --out "$WORK/normalize.json" --device $dev
}
export -f s_normalize

# How the CPU pipeline scales: images/s at each worker count, centre crop and
# RandomResizedCrop on the photo-like set, and tiny files for the reader.
s_scaling() {
    set -uo pipefail
    RINGFEED_LIBRARY="$BUILD/libringfeed.so" PYTHONPATH="$REPO/bindings/python" \
        PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
        "$PY" "$REPO/bench/gpu_scaling.py" --data "$DATA" --tiny "$TINY" --out "$WORK/scaling.json" \
        --workers "$SCALING_WORKERS" --batch-size "$BATCH" --image-size "$SIZE" \
        --run-seconds "$SCALING_RUN_S" --deadline "$STEP_DEADLINE"
}
export -f s_scaling

# The rest of the suite, if time is left: what needs a registry (pip_install:
# PyPI), the binding's whole pytest suite (its test-only packages are not on
# the image) and install_consumer (the carried prefix is not the system's)
# are left out.
s_ctest_all() {
    set -uo pipefail
    "$CMAKE" --build "$BUILD" -j "$NPROC" || return 1
    runtime_env
    (cd "$BUILD" && "$CTEST" --output-on-failure -j "$NPROC" --timeout 120 \
        -E '^(pip_install|install_consumer|python)$') 2>&1 | tee "$WORK/ctest_all.out"
}
export -f s_ctest_all
