# gpu_check_deps.sh - what bench/gpu_check.sh carries to a bare GPU image, and
# its check of the tools found there. Sourced by gpu_check.sh (functions and
# variables only; it runs nothing by itself).
#
# The GPU image has the NVIDIA driver, the CUDA toolkit, Python, PyTorch and
# torchvision, and nothing else can be installed there (no apt, no pip, no
# registry). So, on a development machine that reaches Debian's registry and
# PyPI, `gpu_check.sh --fetch-deps` fills $DEPS_DIR (shared-debs/, git-ignored,
# carried by the device tool):
#   debs/*.deb, root/   Debian 12's libjpeg62-turbo, liburing2, libcmocka0 and
#                       their -dev packages, unpacked with dpkg -x (root/usr/...),
#                       their .pc files made relocatable
#   cmake.tar.gz        cmake and ctest 3.28 with their modules, from PyPI's cmake
#                       wheel (linked against nothing but glibc 2.17 and libstdc++):
#                       used only where the image's cmake is missing or older than
#                       the 3.25 the build needs
#   py/                 pytest and its pure-Python dependencies, unpacked
#   MANIFEST            what is there
# On the GPU machine check_tools looks at what the image has and what was
# carried, links a small program against each carried library before the
# build may use it, says what is missing, and sets what the steps use.

DEPS_DEBS="libjpeg62-turbo libjpeg62-turbo-dev liburing2 liburing-dev libcmocka0 libcmocka-dev"
# pinned: Python 3.8 and later, no dependency beyond these
DEPS_PY="pytest==8.3.5 pluggy==1.5.0 iniconfig==2.0.0 packaging==24.2 exceptiongroup==1.2.2 tomli==2.2.1"
DEPS_CMAKE="cmake==3.28.4"

deps_msg() { printf '[gpu_check %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

# ---------------------------------------------------------------------------
# On a development machine: fetch_deps DIR
# ---------------------------------------------------------------------------
fetch_deps() {
    local dir=$1 py=${PYTHON:-python3} pc tmp
    deps_msg "fetching into $dir: Debian packages ($DEPS_DEBS), $DEPS_CMAKE, $DEPS_PY"
    mkdir -p "$dir/debs"
    chmod 777 "$dir/debs" 2>/dev/null || true # apt's _apt user writes there
    # shellcheck disable=SC2086
    (cd "$dir/debs" && rm -f ./*.deb &&
        { apt-get download $DEPS_DEBS || { apt-get update -qq && apt-get download $DEPS_DEBS; }; }) ||
        return 1
    rm -rf "$dir/root"
    mkdir -p "$dir/root"
    for f in "$dir"/debs/*.deb; do
        dpkg -x "$f" "$dir/root"
    done
    # Relocatable .pc files: /usr -> the prefix, found from the .pc file itself.
    # libjpeg's jconfig.h lives in the multiarch include folder.
    for pc in "$dir"/root/usr/lib/*/pkgconfig/*.pc; do
        sed -i -e 's#=/usr\b#=${pcfiledir}/../../..#g' -e 's#-L/usr/#-L${pcfiledir}/../../../#g' \
            -e 's#-I/usr/#-I${pcfiledir}/../../../#g' "$pc"
        case $(basename "$pc") in
        libjpeg.pc) sed -i 's#^Cflags: -I${includedir}$#Cflags: -I${includedir} -I${includedir}/x86_64-linux-gnu#' "$pc" ;;
        esac
    done
    tmp=$(mktemp -d)
    # shellcheck disable=SC2086
    "$py" -m pip download -q --no-deps --only-binary=:all: --platform manylinux2014_x86_64 \
        --python-version 3.11 -d "$tmp" "$DEPS_CMAKE" || return 1
    # shellcheck disable=SC2086
    "$py" -m pip download -q --no-deps --only-binary=:all: -d "$tmp/py" $DEPS_PY || return 1
    (cd "$tmp" && "$py" -m zipfile -e cmake-*.whl x >/dev/null) || return 1
    chmod +x "$tmp"/x/cmake/data/bin/* # zipfile does not keep the mode
    tar -C "$tmp/x/cmake/data" -czf "$dir/cmake.tar.gz" bin/cmake bin/ctest \
        "$(cd "$tmp/x/cmake/data" && ls -d share/cmake-*)/Modules" \
        "$(cd "$tmp/x/cmake/data" && ls -d share/cmake-*)/Templates" \
        "$(cd "$tmp/x/cmake/data" && ls -d share/cmake-*)/include" || return 1
    rm -rf "$dir/py"
    mkdir -p "$dir/py"
    for w in "$tmp"/py/*.whl; do
        "$py" -m zipfile -e "$w" "$dir/py" >/dev/null || return 1
    done
    rm -rf "$tmp"
    {
        (cd "$dir/debs" && ls -1 ./*.deb | sed 's#^\./##')
        echo "cmake.tar.gz: $DEPS_CMAKE (PyPI wheel: bin/cmake, bin/ctest, modules)"
        (cd "$dir/py" && ls -d ./*.dist-info | sed 's#^\./##; s#\.dist-info$##')
    } >"$dir/MANIFEST"
    deps_msg "done: $(du -sh "$dir" | cut -f1) in $dir"
    deps_msg "device tool: run with carry [\"shared-debs\"] and command: bash bench/gpu_check.sh"
}

# ---------------------------------------------------------------------------
# On the GPU machine: check_tools (sets the variables below; 1 when the build
# cannot happen at all)
# ---------------------------------------------------------------------------
# Set by check_tools, for the steps:
#   CMAKE CTEST         the cmake and ctest to use (the image's or the carried ones)
#   CMAKE_DEP_ARGS_STR  -D options for the carried prefix, RF_WITH_URING, RF_BUILD_TESTS
#   GPU_PY_PATH         the carried pytest, for PYTHONPATH
#   HAVE_TESTS          1 when cmocka links (the C tests can be built)
#   RUNTIME             the CUDA runtime for the library (RINGFEED_CUDART), "" when none
# and $WORK/tools.json, $WORK/tools.note.

tool_rows=()
tool_row() { # tool_row NAME STATUS DETAIL
    tool_rows+=("$1"$'\t'"$2"$'\t'"$3")
    printf '  %-14s %-9s %s\n' "$1" "$2" "$3"
}

version_ge() { # version_ge A B: A >= B (dotted numbers)
    [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -1)" = "$2" ]
}

# link_check NAME PROGRAM CFLAGS LIBS: compiles and runs PROGRAM (C source)
# against the carried prefix; prints its output; 0 when it ran.
link_check() {
    local name=$1 src=$2 cflags=$3 libs=$4 dir=$WORK/linkcheck
    mkdir -p "$dir"
    printf '%s\n' "$src" >"$dir/$name.c"
    # shellcheck disable=SC2086
    cc $cflags -o "$dir/$name" "$dir/$name.c" $libs >"$dir/$name.log" 2>&1 &&
        LD_LIBRARY_PATH=$DEPS_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$dir/$name" >>"$dir/$name.log" 2>&1
    local rc=$?
    tail -1 "$dir/$name.log"
    return $rc
}

check_tools() {
    local missing="" fatal=0 v py=$PY out
    tool_rows=()
    deps_msg "tools (what this image has, what was carried in $DEPS_DIR):"
    for t in cc make timeout tar gzip; do
        if command -v $t >/dev/null 2>&1; then
            tool_row "$t" found "$(command -v $t)"
        else
            tool_row "$t" MISSING ""
            missing="$missing $t"
            case $t in cc | timeout) fatal=1 ;; make) command -v ninja >/dev/null || fatal=1 ;; esac
        fi
    done
    command -v ninja >/dev/null 2>&1 && tool_row ninja found "$(ninja --version)"
    # cmake: the image's if >= 3.25, else the carried one.
    CMAKE="" CTEST=""
    if command -v cmake >/dev/null 2>&1; then
        v=$(cmake --version | head -1 | awk '{print $3}')
        if version_ge "$v" 3.25; then
            CMAKE=$(command -v cmake) CTEST=$(command -v ctest || true)
            tool_row cmake found "$v ($CMAKE)"
        else
            tool_row cmake too-old "$v at $(command -v cmake); the build needs 3.25"
        fi
    else
        tool_row cmake MISSING "not on PATH"
    fi
    if [ -z "$CMAKE" ] || [ -z "$CTEST" ]; then
        if [ -f "$DEPS_DIR/cmake.tar.gz" ]; then
            mkdir -p "$WORK/cmake"
            tar -C "$WORK/cmake" -xzf "$DEPS_DIR/cmake.tar.gz"
            chmod +x "$WORK"/cmake/bin/* 2>/dev/null || true
            if out=$("$WORK/cmake/bin/cmake" --version 2>&1 | head -1); then
                CMAKE=$WORK/cmake/bin/cmake CTEST=$WORK/cmake/bin/ctest
                tool_row cmake carried "$out"
            else
                tool_row cmake BROKEN "the carried one does not run: $out"
            fi
        else
            tool_row cmake MISSING "and none carried (run gpu_check.sh --fetch-deps beforehand)"
        fi
    fi
    [ -n "$CMAKE" ] || { missing="$missing cmake"; fatal=1; }
    # Python and what the steps import.
    if command -v "$py" >/dev/null 2>&1; then
        tool_row python found "$("$py" -c 'import sys; print(sys.version.split()[0])') ($(command -v "$py"))"
        local name status detail
        while IFS=$'\t' read -r name status detail; do
            tool_row "$name" "$status" "$detail"
            [ "$status" = found ] || missing="$missing $name"
        done < <(GPU_CHECK_MODULES=${GPU_CHECK_MODULES:-numpy torch torchvision PIL} "$py" - 2>&1 <<'PYEOF'
import importlib, os
for m in os.environ["GPU_CHECK_MODULES"].split():
    try:
        v = getattr(importlib.import_module(m), "__version__", "?")
        print("%s\tfound\t%s" % (m, v))
    except Exception as e:
        print("%s\tMISSING\t%s" % (m, str(e).splitlines()[-1] if str(e) else repr(e)))
PYEOF
)
        GPU_PY_PATH=""
        if "$py" -c 'import pytest' >/dev/null 2>&1; then
            tool_row pytest found "the image's"
        elif [ -d "$DEPS_DIR/py" ] && PYTHONPATH=$DEPS_DIR/py "$py" -c 'import pytest' >/dev/null 2>&1; then
            GPU_PY_PATH=$DEPS_DIR/py
            tool_row pytest carried "$(PYTHONPATH=$DEPS_DIR/py "$py" -c 'import pytest; print(pytest.__version__)')"
        else
            tool_row pytest MISSING "the Python CUDA tests cannot run"
            missing="$missing pytest"
        fi
    else
        tool_row python MISSING "$py"
        missing="$missing python"
    fi
    # The CUDA toolkit's headers (the library is built against them; no nvcc needed).
    local cuda_inc=""
    for d in "${CUDA_HOME:-}" "${CUDA_PATH:-}" /usr/local/cuda; do
        [ -n "$d" ] && [ -f "$d/include/cuda_runtime_api.h" ] && cuda_inc=$d/include && break
    done
    if [ -n "$cuda_inc" ]; then
        tool_row cuda-headers found "$cuda_inc ($(grep -m1 'define CUDART_VERSION' "$cuda_inc/cuda_runtime_api.h" | awk '{print $3}'))"
    else
        tool_row cuda-headers MISSING "no include/cuda_runtime_api.h under CUDA_HOME or /usr/local/cuda"
        missing="$missing cuda-headers"
        [ "$MODE" = gpu ] && fatal=1
    fi
    if command -v nvidia-smi >/dev/null 2>&1; then
        tool_row nvidia-smi found "$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -1)"
    else
        tool_row nvidia-smi MISSING "(information only)"
    fi
    # The libraries: the image's headers, else the carried prefix, linked first.
    DEPS_LIB=$DEPS_DIR/root/usr/lib/x86_64-linux-gnu
    local inc="-I$DEPS_DIR/root/usr/include -I$DEPS_DIR/root/usr/include/x86_64-linux-gnu"
    local lflags="-L$DEPS_LIB -Wl,-rpath-link,$DEPS_LIB"
    local dep_args=() use_prefix=0
    HAVE_TESTS=0
    if [ -f /usr/include/jpeglib.h ]; then
        tool_row libjpeg found "the image's /usr/include/jpeglib.h"
    elif out=$(link_check jpeg '#include <stdio.h>
#include <jpeglib.h>
int main(void) { struct jpeg_decompress_struct d; struct jpeg_error_mgr e;
  d.err = jpeg_std_error(&e); jpeg_create_decompress(&d); jpeg_destroy_decompress(&d);
  printf("libjpeg %d links and runs\n", JPEG_LIB_VERSION); return 0; }' "$inc" "$lflags -ljpeg"); then
        tool_row libjpeg carried "$out"
        use_prefix=1
        dep_args+=(-DRF_JPEG_INCLUDE_DIR="$DEPS_DIR/root/usr/include" -DRF_JPEG_LIBRARY="$DEPS_LIB/libjpeg.so")
    else
        tool_row libjpeg MISSING "neither the image's nor a carried one that links: $out"
        missing="$missing libjpeg"
        fatal=1
    fi
    if [ -f /usr/include/liburing.h ]; then
        tool_row liburing found "the image's"
    elif out=$(link_check uring '#include <stdio.h>
#include <liburing.h>
int main(void) { struct io_uring r; int rc = io_uring_queue_init(4, &r, 0);
  if (rc == 0) io_uring_queue_exit(&r);
  printf("liburing links; io_uring_queue_init: %d\n", rc); return 0; }' "$inc" "$lflags -luring"); then
        tool_row liburing carried "$out"
        use_prefix=1
        dep_args+=(-DRF_URING_INCLUDE_DIR="$DEPS_DIR/root/usr/include" -DRF_URING_LIBRARY="$DEPS_LIB/liburing.so")
    else
        tool_row liburing missing "building with the pread reader ($out)"
        dep_args+=(-DRF_WITH_URING=OFF)
    fi
    if [ -f /usr/include/cmocka.h ]; then
        tool_row cmocka found "the image's"
        HAVE_TESTS=1
    elif out=$(link_check cmocka '#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>
static void t(void **s) { (void)s; assert_int_equal(1, 1); }
int main(void) { const struct CMUnitTest ts[] = {cmocka_unit_test(t)};
  int rc = cmocka_run_group_tests(ts, NULL, NULL); printf("cmocka links and runs: %d\n", rc); return rc; }' \
        "$inc" "$lflags -lcmocka"); then
        tool_row cmocka carried "$out"
        use_prefix=1
        HAVE_TESTS=1
        dep_args+=(-DRF_CMOCKA_INCLUDE_DIR="$DEPS_DIR/root/usr/include" -DRF_CMOCKA_LIBRARY="$DEPS_LIB/libcmocka.so")
    else
        tool_row cmocka MISSING "the C tests cannot be built ($out)"
        missing="$missing cmocka"
        dep_args+=(-DRF_BUILD_TESTS=OFF)
    fi
    if [ "$use_prefix" = 1 ]; then
        export CFLAGS="$inc ${CFLAGS:-}" # jpeglib.h includes the multiarch jconfig.h
        export LDFLAGS="$lflags ${LDFLAGS:-}"
        export LD_LIBRARY_PATH=$DEPS_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
        export CMAKE_PREFIX_PATH=$DEPS_DIR/root/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
        export PKG_CONFIG_PATH=$DEPS_LIB/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
    fi
    CMAKE_DEP_ARGS_STR="${dep_args[*]:-}"
    # The CUDA runtime the library and the tests use: torch's (after
    # torch.cuda.init(), the libcudart it mapped), as a training job's would be.
    RUNTIME=""
    if [ "$MODE" = standin ]; then
        tool_row runtime stand-in "tests/fake_cudart.c, built with the tests (no GPU is used)"
    elif out=$("$py" - 2>&1 <<'PYEOF'
import torch
if not torch.cuda.is_available():
    raise SystemExit("torch.cuda.is_available() is False")
torch.cuda.init()
maps = [l.split()[-1] for l in open("/proc/self/maps") if "/" in l]
rt = sorted({m for m in maps if m.rsplit("/", 1)[-1].startswith("libcudart")})
print(rt[0] if rt else "none")
PYEOF
    ) && [ "$(echo "$out" | tail -1)" != none ]; then
        RUNTIME=$(echo "$out" | tail -1)
        tool_row runtime found "torch's $RUNTIME (RINGFEED_CUDART)"
    else
        tool_row runtime MISSING "torch has no usable CUDA runtime: $(echo "$out" | tail -1)"
        [ "$MODE" = gpu ] && missing="$missing cuda-runtime"
    fi
    printf '%s\n' "${tool_rows[@]}" >"$WORK/tools.tsv"
    if [ -n "$missing" ]; then
        echo "missing:$missing" >"$WORK/tools.note"
        deps_msg "MISSING:$missing"
    fi
    return $fatal
}
