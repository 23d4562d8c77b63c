#!/usr/bin/env bash
# cmake/fuzz_deps.sh - the decoders' libraries built with the fuzzer's
# instrumentation, for the fuzz build only (`make fuzz`, `make fuzz-deep`).
#
#   cmake/fuzz_deps.sh DIR CC LIB...      LIB: jpeg spng deflate zlib webp
#
# Debian's libraries are not instrumented: linked against them, libFuzzer
# sees ringfeed's own code (fuzz_decode's seeds: 520 edges, its decode glue
# and resampler) and nothing of the decoder behind it (markers, scans,
# scaling, the error handler's jumps), so it cannot steer its mutations
# there; with libjpeg-turbo instrumented the same seeds reach 1935 edges.
# This builds the same libraries from
# the same sources Debian builds them from - the Debian source package of the
# version installed (its patches applied: security fixes included), else
# the archive's current one - with -fsanitize=fuzzer-no-link,address,undefined,
# static and position-independent, into DIR/prefix (lib/*.a, include/).
# CMake's RF_FUZZ_DEPS=DIR/prefix (cmake/fuzz_deps.cmake) then links every
# target of that build folder against them instead of the system's.
#
# The sources come from the Debian archive the machine already uses: the
# system's apt sources (deb lines) turned into deb-src ones in a private apt
# state under DIR/apt, so nothing in /etc changes and no root is needed;
# `apt-get source --download-only`, then `dpkg-source -x` (dpkg-dev, with
# build-essential). Nothing third-party is kept in the tree. Each library is
# built once: DIR/prefix/.stamp-LIB records the version, compiler and flags,
# and a later run with the same ones does nothing (no network either).
#
# Environment: JOBS (parallel compile jobs, default nproc), FUZZ_DEPS_CFLAGS
# (replaces the instrumentation flags below).
set -euo pipefail

if [ $# -lt 3 ]; then
    echo "usage: $0 DIR CC LIB... (LIB: jpeg spng deflate zlib webp)" >&2
    exit 2
fi
dir=$(mkdir -p "$1" && cd "$1" && pwd)
cc=$2
shift 2
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}
cflags=${FUZZ_DEPS_CFLAGS:--O1 -gline-tables-only -fno-omit-frame-pointer -fPIC -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined}
prefix=$dir/prefix
src=$dir/src
mkdir -p "$prefix/lib" "$prefix/include" "$src" "$dir/build"

say() { echo "fuzz-deps: $*" >&2; }
die() {
    echo "fuzz-deps: $*" >&2
    echo "fuzz-deps: (make fuzz FUZZ_DEPS= builds the fuzzers against the system's libraries," \
         "uninstrumented)" >&2
    exit 1
}

command -v "$cc" >/dev/null || die "compiler $cc not found"
ccver=$("$cc" --version | head -n1)

# LIB -> Debian source package, and the binary package whose installed
# version picks the source version.
source_of() {
    case $1 in
    jpeg) echo "libjpeg-turbo libjpeg62-turbo-dev" ;;
    spng) echo "libspng libspng-dev" ;;
    deflate) echo "libdeflate libdeflate-dev" ;;
    zlib) echo "zlib zlib1g-dev" ;;
    webp) echo "libwebp libwebp-dev" ;;
    *) die "unknown library $1 (jpeg spng deflate zlib webp)" ;;
    esac
}

# ---- the private apt state: the system's archive, as deb-src ----------------
apt_ready=0
apt_opts=()
apt_setup() {
    [ $apt_ready = 1 ] && return
    command -v apt-get >/dev/null && command -v dpkg-source >/dev/null ||
        die "apt-get and dpkg-source (dpkg-dev) are needed to fetch the Debian sources"
    local a=$dir/apt
    mkdir -p "$a/lists/partial" "$a/cache/archives/partial" "$a/sources.list.d"
    rm -f "$a/sources.list.d/"*
    local f n=0
    # one-line sources: "deb [opts] URI suite comp..." -> "deb-src ..."
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -f "$f" ] || continue
        n=$((n + 1))
        sed -n 's/^[[:space:]]*deb[[:space:]]/deb-src /p' "$f" >"$a/sources.list.d/$n.list"
    done
    # deb822 sources: the stanzas of Types deb, as deb-src
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        n=$((n + 1))
        awk 'BEGIN { RS = ""; ORS = "\n\n" }
             /(^|\n)Types:[^\n]*[[:space:]]deb([[:space:]]|$)/ &&
             !/(^|\n)Enabled:[[:space:]]*no/ {
                 sub(/(^|\n)Types:[^\n]*/, "\nTypes: deb-src"); print }' \
            "$f" >"$a/sources.list.d/$n.sources"
    done
    apt_opts=(-o "Dir::Etc::SourceList=/dev/null" -o "Dir::Etc::SourceParts=$a/sources.list.d"
              -o "Dir::State::Lists=$a/lists" -o "Dir::Cache=$a/cache"
              -o "Dir::State::status=/var/lib/dpkg/status" -o "APT::Sandbox::User=root"
              -o "Debug::NoLocking=1" -q)
    say "apt-get update (deb-src of the system's sources, state in $a)"
    # a source without deb-src (a third-party repository) fails its part
    # only; whether the packages came is what counts, below
    apt-get "${apt_opts[@]}" update >"$a/update.log" 2>&1 || true
    apt_ready=1
}

# Fetches and unpacks the source package of LIB into $src; prints its folder.
fetch() {
    local pkg bin ver d
    read -r pkg bin <<<"$(source_of "$1")"
    ver=$(dpkg-query -W -f '${source:Version}' "$bin" 2>/dev/null || true)
    apt_setup
    local dl=$src/dl-$pkg
    rm -rf "$dl"
    mkdir -p "$dl"
    # the installed version first (the headers the build compiles against are
    # that version's), else the archive's
    if ! { [ -n "$ver" ] && (cd "$dl" && apt-get "${apt_opts[@]}" source --download-only \
                                "$pkg=$ver") >"$dl.log" 2>&1; } &&
       ! (cd "$dl" && apt-get "${apt_opts[@]}" source --download-only "$pkg") >>"$dl.log" 2>&1
    then
        cat "$dir/apt/update.log" "$dl.log" >&2
        die "cannot download the Debian source package $pkg (deb-src of the system's" \
            "apt sources, see above)"
    fi
    local dsc
    dsc=$(ls "$dl"/*.dsc | head -n1)
    d=$src/$(basename "$dsc" .dsc)
    rm -rf "$d"
    dpkg-source -x "$dsc" "$d" >"$dl.log" 2>&1 || { cat "$dl.log" >&2; die "dpkg-source -x $dsc failed"; }
    echo "$d"
}

# Compiles the C files named (relative to $1) into $prefix/lib/$2 (an archive).
compile_archive() {
    local root=$1 out=$2 extra=$3
    shift 3
    local b=$dir/build/$(basename "$out" .a)
    rm -rf "$b" "$b.log"
    mkdir -p "$b"
    local f o n=0 objs=()
    for f in "$@"; do
        o=$b/$(echo "$f" | tr / _).o
        objs+=("$o")
        # shellcheck disable=SC2086
        $cc $cflags $extra -c "$root/$f" -o "$o" 2>>"$b.log" &
        n=$((n + 1))
        if [ $n -ge "$jobs" ]; then
            wait -n || true
            n=$((n - 1))
        fi
    done
    wait
    for o in "${objs[@]}"; do
        [ -f "$o" ] || { cat "$b.log" >&2; die "$out: compiling failed"; }
    done
    rm -f "$prefix/lib/$out"
    ar rcs "$prefix/lib/$out" "${objs[@]}"
}

build_jpeg() {
    local s=$1 b=$dir/build/jpeg
    rm -rf "$b"
    mkdir -p "$b"
    # jchuff.c (the encoder's Huffman coder: the seeds' JPEGs, never the
    # fuzzed decode) takes ~170 CPU-seconds to compile with UBSan, 11 without;
    # the rest of the library takes ~40 with it. The pixel loops (IDCT,
    # colour conversion, upsampling) and the entropy decoders' inner loops:
    # libFuzzer's tracing of their comparisons took half the decode time and
    # steers nothing the markers do not (their edges are still counted).
    cat >"$b/../jpeg-project.cmake" <<'EOF'
set_source_files_properties(jchuff.c PROPERTIES COMPILE_OPTIONS -fno-sanitize=undefined)
set_source_files_properties(jidctint.c jidctfst.c jidctflt.c jidctred.c jdcolor.c jdmerge.c
    jdsample.c jdhuff.c jdphuff.c jdarith.c jdcoefct.c jquant1.c jquant2.c
    PROPERTIES COMPILE_OPTIONS -fno-sanitize-coverage=trace-cmp)
EOF
    cmake -S "$s" -B "$b" -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_C_FLAGS="$cflags" -DCMAKE_C_FLAGS_RELEASE="" -DENABLE_SHARED=0 -DENABLE_STATIC=1 \
        -DWITH_SIMD=0 -DWITH_TURBOJPEG=0 -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
        -DCMAKE_PROJECT_INCLUDE="$b/../jpeg-project.cmake" >"$b.log" 2>&1 ||
        { cat "$b.log" >&2; die "libjpeg-turbo: cmake failed"; }
    cmake --build "$b" -j "$jobs" --target jpeg-static >>"$b.log" 2>&1 ||
        { tail -n 40 "$b.log" >&2; die "libjpeg-turbo: build failed"; }
    cp "$b/libjpeg.a" "$prefix/lib/"
    cp "$s/jpeglib.h" "$s/jmorecfg.h" "$s/jerror.h" "$b/jconfig.h" "$prefix/include/"
}

build_zlib() {
    local s=$1
    compile_archive "$s" libz.a "-DHAVE_UNISTD_H -DHAVE_STDARG_H -D_LARGEFILE64_SOURCE=1" \
        adler32.c compress.c crc32.c deflate.c gzclose.c gzlib.c gzread.c gzwrite.c infback.c \
        inffast.c inflate.c inftrees.c trees.c uncompr.c zutil.c
    cp "$s/zlib.h" "$s/zconf.h" "$prefix/include/"
}

build_spng() {
    local s=$1
    # as Debian builds it (meson -Denable_opt=false); against the instrumented
    # zlib when there is one in the prefix
    compile_archive "$s" libspng.a "-DSPNG_DISABLE_OPT -I$prefix/include" spng/spng.c
    cp "$s/spng/spng.h" "$prefix/include/"
}

build_deflate() {
    local s=$1
    # the decompressor only: ringfeed inflates (deflate_compress.c alone
    # would take twice as long as the rest)
    compile_archive "$s" libdeflate.a "-I$s" lib/deflate_decompress.c lib/zlib_decompress.c \
        lib/gzip_decompress.c lib/adler32.c lib/crc32.c lib/utils.c lib/x86/cpu_features.c \
        lib/arm/cpu_features.c
    cp "$s/libdeflate.h" "$prefix/include/"
}

build_webp() {
    local s=$1 b=$dir/build/webp o
    rm -rf "$b"
    local off=()
    for o in ANIM_UTILS CWEBP DWEBP GIF2WEBP IMG2WEBP VWEBP WEBPINFO WEBPMUX EXTRAS; do
        off+=("-DWEBP_BUILD_$o=OFF")
    done
    # the pixel kernels (src/dsp): as for libjpeg-turbo's, no comparison
    # tracing (a third of the decode time), their edges still counted
    mkdir -p "$b"
    cat >"$b/../webp-project.cmake" <<'EOF'
file(GLOB _dsp ${CMAKE_CURRENT_SOURCE_DIR}/src/dsp/*.c)
set_source_files_properties(${_dsp} PROPERTIES COMPILE_OPTIONS -fno-sanitize-coverage=trace-cmp)
EOF
    cmake -S "$s" -B "$b" -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_C_FLAGS="$cflags" -DCMAKE_C_FLAGS_RELEASE="" -DBUILD_SHARED_LIBS=OFF \
        -DCMAKE_POSITION_INDEPENDENT_CODE=ON "${off[@]}" \
        -DCMAKE_PROJECT_INCLUDE="$b/../webp-project.cmake" >"$b.log" 2>&1 ||
        { cat "$b.log" >&2; die "libwebp: cmake failed"; }
    cmake --build "$b" -j "$jobs" --target webp webpdemux >>"$b.log" 2>&1 ||
        { tail -n 40 "$b.log" >&2; die "libwebp: build failed"; }
    cp "$b/libwebp.a" "$b/libwebpdemux.a" "$prefix/lib/"
    mkdir -p "$prefix/include/webp"
    cp "$s"/src/webp/{decode,demux,encode,mux_types,types}.h "$prefix/include/webp/"
}

# zlib before spng (spng compiles against the prefix's zlib.h when it is there)
order=""
for want in zlib jpeg spng deflate webp; do
    for lib in "$@"; do
        [ "$lib" = "$want" ] && order="$order $lib"
    done
done
for lib in "$@"; do
    source_of "$lib" >/dev/null # unknown names fail here
done

stamp_of() {
    local pkg bin ver
    read -r pkg bin <<<"$(source_of "$1")"
    ver=$(dpkg-query -W -f '${source:Version}' "$bin" 2>/dev/null || echo "archive")
    echo "$pkg $ver | $ccver | $cflags"
}

todo=""
for lib in $order; do
    if [ "$(cat "$prefix/.stamp-$lib" 2>/dev/null)" = "$(stamp_of "$lib")" ]; then
        say "$lib: instrumented, up to date ($(stamp_of "$lib" | cut -d'|' -f1))"
    else
        todo="$todo $lib"
    fi
done
[ -z "$todo" ] && exit 0
apt_setup # once, here: fetch runs in a subshell
# CPU seconds of the children so far, from the builtin's output in file $1
cpu_of() {
    tail -n1 "$1" | tr 'ms' '  ' | awk '{ print $1 * 60 + $2 + $3 * 60 + $4 }'
}
for lib in $todo; do
    t0=$SECONDS
    s=$(fetch "$lib")
    t1=$SECONDS
    times >"$dir/.times0" # no subshell: the children's CPU time so far
    "build_$lib" "$s"
    times >"$dir/.times1"
    stamp_of "$lib" >"$prefix/.stamp-$lib"
    say "$(basename "$s"): fetched in $((t1 - t0)) s, built in $((SECONDS - t1)) s" \
        "($jobs jobs; $(awk -v a="$(cpu_of "$dir/.times0")" -v b="$(cpu_of "$dir/.times1")" \
                         'BEGIN { printf "%.0f", b - a }') CPU-seconds)"
done
rm -f "$dir/.times0" "$dir/.times1"
