# cmake/fuzz_deps.cmake - the fuzz build against the decoders' libraries built
# with the fuzzer's instrumentation (cmake/fuzz_deps.sh; `make fuzz`).
#
# Included by the top-level CMakeLists.txt once the system's libraries are
# found, when RF_FUZZ_DEPS names the prefix fuzz_deps.sh filled (lib/*.a,
# include/). Each library found there (of those RF_FUZZ_DEPS_LIBS lists,
# when it is set: jpeg;spng;deflate;zlib;webp) replaces the system's in the targets
# rf_jpeg, rf_spng (with the prefix's zlib when it has one), rf_deflate and
# rf_webp, for every target of this build folder: one copy of each library in
# a process, its headers those of the same version. Only the fuzz build sets
# RF_FUZZ_DEPS, and its code is built with AddressSanitizer (the libraries'
# coverage hooks resolve to the sanitizer runtime's where libFuzzer is not
# linked, as in the *_seeds programs). Sets _rf_fuzz_deps_desc for the summary.

if(NOT RF_SANITIZE MATCHES "address")
    message(FATAL_ERROR "RF_FUZZ_DEPS=${RF_FUZZ_DEPS}: the instrumented libraries need "
                        "RF_SANITIZE=address,undefined (make fuzz sets both)")
endif()
set(_p ${RF_FUZZ_DEPS})
set(_rf_fuzz_deps_desc "")

# rf_fuzz_dep_use(TARGET archives...): the imported target (or the one an
# alias names) links the prefix's archives and includes its headers first.
function(rf_fuzz_dep_use tgt)
    get_target_property(_real ${tgt} ALIASED_TARGET)
    if(NOT _real)
        set(_real ${tgt})
    endif()
    get_target_property(_type ${_real} TYPE)
    if(_type STREQUAL "INTERFACE_LIBRARY")
        set_target_properties(${_real} PROPERTIES INTERFACE_LINK_LIBRARIES "${ARGN}")
    else() # an UNKNOWN IMPORTED library: the first archive is its location
        list(POP_FRONT ARGN _first)
        set_target_properties(${_real} PROPERTIES IMPORTED_LOCATION "${_first}"
                              INTERFACE_LINK_LIBRARIES "${ARGN}")
    endif()
    set_target_properties(${_real} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${RF_FUZZ_DEPS}/include"
                          INTERFACE_COMPILE_OPTIONS "" INTERFACE_LINK_OPTIONS "")
endfunction()

# 1 in ${out} when the prefix holds the archive and the library is wanted.
function(rf_fuzz_dep_wanted out name file)
    set(_w 0)
    if(EXISTS ${RF_FUZZ_DEPS}/lib/${file} AND (NOT RF_FUZZ_DEPS_LIBS OR name IN_LIST RF_FUZZ_DEPS_LIBS))
        set(_w 1)
    endif()
    set(${out} ${_w} PARENT_SCOPE)
endfunction()

set(_zlib z)
rf_fuzz_dep_wanted(_want zlib libz.a)
if(_want)
    set(_zlib ${_p}/lib/libz.a)
endif()
foreach(_d "jpeg;libjpeg.a" "spng;libspng.a" "deflate;libdeflate.a" "webp;libwebpdemux.a")
    list(GET _d 0 _name)
    list(GET _d 1 _file)
    rf_fuzz_dep_wanted(_want ${_name} ${_file})
    if(NOT _want)
        continue()
    endif()
    if(NOT TARGET rf_${_name})
        message(STATUS "RF_FUZZ_DEPS: ${_file} ignored: this build has no ${_name}")
        continue()
    endif()
    if(_name STREQUAL "spng")
        rf_fuzz_dep_use(rf_spng ${_p}/lib/libspng.a ${_zlib} m)
    elseif(_name STREQUAL "webp")
        rf_fuzz_dep_use(rf_webp ${_p}/lib/libwebpdemux.a ${_p}/lib/libwebp.a Threads::Threads m)
    else()
        rf_fuzz_dep_use(rf_${_name} ${_p}/lib/${_file})
    endif()
    list(APPEND _rf_fuzz_deps_desc ${_name})
endforeach()
if(NOT _zlib STREQUAL "z" AND TARGET rf_spng)
    list(APPEND _rf_fuzz_deps_desc zlib)
endif()
string(REPLACE ";" " " _rf_fuzz_deps_desc "instrumented: ${_rf_fuzz_deps_desc} (${_p})")
unset(_p)
