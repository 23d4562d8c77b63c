#!/bin/bash
# gpu_check_tools.sh REPO - bench/gpu_check.sh's first step on an image without
# what the build needs (CTest: gpu_check_tools): the GPU machine may have an
# older cmake or none, no package registry, only what was carried.
#
#  1. a cmake older than 3.25 on PATH and nothing carried: the tools step
#     fails, says cmake is too old and none was carried, names cmake among what
#     is missing, and no other step runs (the JSON has the tools step alone);
#  2. the same with a cmake carried (shared-debs/cmake.tar.gz; a stand-in
#     here): the tools step uses it.
set -u
repo=$1
work=$(mktemp -d "${TMPDIR:-/tmp}/gpu_check_tools.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() {
    echo "gpu_check_tools: FAIL: $*" >&2
    for f in "$work"/log*; do echo "--- $f"; cat "$f"; done >&2
    exit 1
}

mkdir -p "$work/bin" "$work/empty" "$work/carried/c/bin"
# The modules the steps import are not this test's matter (torch is slow to import).
export GPU_CHECK_MODULES=json
[ -x /usr/bin/python3 ] && export PYTHON=/usr/bin/python3 # not a version manager's shim
printf '#!/bin/sh\necho "cmake version 3.16.3"\n' >"$work/bin/cmake"
chmod +x "$work/bin/cmake"

PATH=$work/bin:$PATH RF_GPU_DEPS=$work/empty OUT=$work/out1 \
    bash "$repo/bench/gpu_check.sh" --standin --tools-only >"$work/log1" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "1: exit status $rc, not 1"
grep -qE 'cmake +too-old +3\.16\.3' "$work/log1" || fail "1: the old cmake is not named"
grep -qE 'cmake +MISSING +and none carried' "$work/log1" || fail "1: no word on a carried cmake"
grep -qE 'MISSING:.* cmake' "$work/log1" || fail "1: cmake is not among what is missing"
python3 - "$work/out1/gpu_check.json" <<'PY' || fail "1: the JSON"
import json, sys
d = json.load(open(sys.argv[1]))
steps = [(s["step"], s["status"]) for s in d["steps"]]
assert steps == [("tools", "failed")], steps
assert any(t["tool"] == "cmake" and t["status"] == "too-old" for t in d["tools"]), d["tools"]
PY

for t in cmake ctest; do
    printf '#!/bin/sh\necho "%s version 3.28.4"\n' "$t" >"$work/carried/c/bin/$t"
    chmod +x "$work/carried/c/bin/$t"
done
tar -C "$work/carried/c" -czf "$work/carried/cmake.tar.gz" bin
PATH=$work/bin:$PATH RF_GPU_DEPS=$work/carried OUT=$work/out2 \
    bash "$repo/bench/gpu_check.sh" --standin --tools-only >"$work/log2" 2>&1
grep -qE 'cmake +carried +cmake version 3\.28\.4' "$work/log2" || fail "2: the carried cmake is not used"
echo "gpu_check_tools: ok"
