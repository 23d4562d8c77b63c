#!/usr/bin/env bash
# python test (run by CTest): pytest over the binding's tests.
#
#   run_pytest.sh PYTHON TESTS_DIR
#
# Exit status: pytest's, except
#   - "no tests collected" (pytest exit 5) is a FAILURE with a clear message:
#     a green run with nothing tested must not happen;
#   - pytest not installed: 77 (CTest reports "skipped") on a developer machine,
#     a failure when $CI is set;
#   - under $CI, the test-only packages from PyPI that `make deps` installs
#     (webdataset; moto and boto3 for the S3 server; pyarrow for the packer's
#     tables) must import: the tests that need them skip without them, which
#     CI must not take for a pass.
# The environment (RINGFEED_LIBRARY, RINGFEED_GEN, PYTHONPATH, ...) comes from CTest.
set -uo pipefail
py=$1
dir=$2

if ! "$py" -c 'import pytest' 2>/dev/null; then
    if [ -n "${CI:-}" ]; then
        echo "python: $py cannot import pytest (apt-get install python3-pytest)" >&2
        exit 1
    fi
    echo "python: SKIPPED - $py cannot import pytest (apt-get install python3-pytest)"
    exit 77
fi

if [ -n "${CI:-}" ] && ! "$py" -c 'import webdataset, moto, boto3, pyarrow.parquet' 2>/dev/null; then
    echo "python: $py cannot import webdataset, moto, boto3 and pyarrow (make deps installs them)" >&2
    exit 1
fi

echo "RINGFEED_LIBRARY=${RINGFEED_LIBRARY:-} RINGFEED_GEN=${RINGFEED_GEN:-}"
"$py" -m pytest -q -rs -p no:cacheprovider "$dir"
rc=$?
if [ "$rc" -eq 5 ]; then
    echo "python: FAILED - pytest collected no tests in $dir" >&2
    exit 1
fi
exit "$rc"
