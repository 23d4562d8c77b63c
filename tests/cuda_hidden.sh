#!/bin/bash
# cuda_hidden.sh LIB PROBE - a CUDA-enabled libringfeed loads and runs on the
# CPU where no CUDA runtime can be found (CTest: cuda_hidden).
#
#  1. LIB's dynamic section has no NEEDED libcudart (readelf -d).
#  2. In a private mount namespace (unshare -m; needs root or CAP_SYS_ADMIN),
#     every folder holding a libcudart* (those in the ld.so cache, the default
#     folders, /usr/local/cuda*/lib*, targets/*/lib) is covered by a folder of
#     links to everything else in it, so that only libcudart* disappear. Then,
#     without LD_LIBRARY_PATH / LD_PRELOAD / RINGFEED_CUDART, `ldd PROBE` must
#     not mention libcudart or a missing library, and PROBE (tests/cuda_probe.c)
#     must read a folder on the CPU with rf_cuda_device_count() == 0 and
#     cuda.reason "no CUDA runtime: tried ... (not found)"; once more with
#     RINGFEED_CUDART naming a missing file, which the reason must list.
#
# Where unshare -m is not permitted: if no libcudart is visible anyway the
# probe runs as is, else the test is skipped (77) after step 1.
set -u

if [ "${1:-}" = "--inside" ]; then
    inside=1
    shift
else
    inside=0
fi
lib=$1
probe=$2
fail() {
    echo "cuda_hidden: FAIL: $*" >&2
    exit 1
}

# Every libcudart* this machine's loader could find.
visible_cudart() {
    {
        ldconfig -p 2>/dev/null | awk '/libcudart/ {print $NF}'
        for d in /lib /usr/lib /lib64 /usr/lib64 /usr/local/lib /lib/*-linux-gnu \
            /usr/lib/*-linux-gnu /usr/local/cuda*/lib* /usr/local/cuda*/targets/*/lib; do
            ls -d "$d"/libcudart* 2>/dev/null
        done
    } | sort -u | while read -r f; do
        [ -e "$f" ] && echo "$f"
    done
}

run_probe() {
    echo "+ ldd $probe"
    out=$(env -u LD_LIBRARY_PATH -u LD_PRELOAD -u RINGFEED_CUDART ldd "$probe") ||
        fail "ldd $probe failed"
    echo "$out"
    echo "$out" | grep -q libcudart && fail "ldd: $probe would load a libcudart"
    echo "$out" | grep -q "not found" && fail "ldd: a library of $probe is missing"
    echo "+ cuda_probe (no runtime anywhere)"
    env -u LD_LIBRARY_PATH -u LD_PRELOAD -u RINGFEED_CUDART "$probe" --expect-devices 0 \
        --expect-reason "no CUDA runtime: tried libcudart.so" \
        --expect-reason "(not found)" || fail "cuda_probe without a runtime"
    missing=${TMPDIR:-/tmp}/cuda_hidden_absent/libcudart.so
    echo "+ cuda_probe (RINGFEED_CUDART=$missing)"
    env -u LD_LIBRARY_PATH -u LD_PRELOAD RINGFEED_CUDART="$missing" "$probe" \
        --expect-devices 0 --expect-reason "no CUDA runtime: tried RINGFEED_CUDART=$missing" \
        --expect-reason "(not found)" ||
        fail "cuda_probe with RINGFEED_CUDART naming a missing file"
}

if [ $inside = 1 ]; then
    # In the private namespace: cover each folder holding a libcudart.
    work=$3
    mount --make-rprivate / || fail "mount --make-rprivate /"
    i=0
    for d in $(visible_cudart | xargs -r -n1 realpath | xargs -r -n1 dirname | sort -u); do
        i=$((i + 1))
        mkdir -p "$work/orig$i" "$work/cover$i"
        mount --bind "$d" "$work/orig$i" || fail "mount --bind $d"
        for e in "$d"/* "$d"/.[!.]*; do
            [ -e "$e" ] || [ -L "$e" ] || continue
            name=${e##*/}
            case $name in libcudart*) continue ;; esac
            ln -s "$work/orig$i/$name" "$work/cover$i/$name"
        done
        mount --bind "$work/cover$i" "$d" || fail "mount --bind over $d"
        echo "hidden: $d/libcudart*"
    done
    left=$(visible_cudart)
    [ -z "$left" ] || fail "still visible after hiding: $left"
    run_probe
    echo "cuda_hidden: ok"
    exit 0
fi

echo "+ readelf -d $lib"
dyn=$(readelf -d "$lib") || fail "readelf -d $lib"
echo "$dyn" | grep -E "NEEDED|RUNPATH|RPATH"
if echo "$dyn" | grep -E "NEEDED" | grep -q libcudart; then
    fail "$lib has a NEEDED libcudart: it cannot load where no CUDA runtime is installed"
fi

if unshare -m true 2>/dev/null; then
    work=$(mktemp -d "${TMPDIR:-/tmp}/cuda_hidden.XXXXXX") || fail "mktemp"
    unshare -m bash "$0" --inside "$lib" "$probe" "$work"
    rc=$?
    rm -rf "$work"
    exit $rc
fi
echo "cuda_hidden: unshare -m is not permitted here"
left=$(visible_cudart)
if [ -n "$left" ]; then
    echo "cuda_hidden: SKIPPED - cannot hide the CUDA runtime without unshare -m: $left"
    exit 77
fi
run_probe
echo "cuda_hidden: ok (no runtime installed)"
