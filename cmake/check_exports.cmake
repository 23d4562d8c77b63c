# exports test (cmake -P): the shared library exports exactly the public API -
# every dynamic symbol it defines starts with rf_ (never rf__, never a helper
# that forgot `static`), every one carries a version node of the linker version
# script (rf_version@@RINGFEED_0.3: the script was applied), and every RF_API
# function of ringfeed.h is there.
#
# Inputs: LIB (libringfeed.so), HEADER (include/ringfeed.h), MAP (lib/ringfeed.map), NM.
cmake_minimum_required(VERSION 3.25)

# the version nodes the script defines: "RINGFEED_0.3 {"
file(READ ${MAP} map)
string(REGEX REPLACE "/\\*([^*]|\\*+[^*/])*\\*+/" "" map "${map}")   # drop comments
string(REGEX MATCHALL "[A-Za-z_][A-Za-z0-9_.]* *{" nodes "${map}")
list(TRANSFORM nodes REPLACE " *{$" "")
if(NOT nodes)
    message(FATAL_ERROR "exports: no version node found in ${MAP}")
endif()

execute_process(COMMAND ${NM} -D --defined-only ${LIB}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
    message(FATAL_ERROR "exports: ${NM} -D ${LIB} failed: ${err}")
endif()
string(REPLACE "\n" ";" lines "${out}")
set(exported "")
set(bad "")
set(unversioned "")
foreach(line ${lines})
    # "0000000000001234 T rf_version"; skip the linker's own section symbols
    if(line MATCHES "^[0-9a-fA-F]* *([A-Za-z]) ([^ ]+)$")
        set(type ${CMAKE_MATCH_1})
        set(sym ${CMAKE_MATCH_2})
        if(type STREQUAL "A" OR sym MATCHES "^_(init|fini|edata|end|__bss_start)$"
           OR sym MATCHES "^(_init|_fini|_edata|_end|__bss_start)$")
            continue()
        endif()
        # the default version: rf_version@@RINGFEED_0.3
        set(node "")
        if(sym MATCHES "@+(.*)$")
            set(node ${CMAKE_MATCH_1})
            string(REGEX REPLACE "@.*" "" sym "${sym}")
        endif()
        if(NOT node IN_LIST nodes)
            list(APPEND unversioned "${sym}@${node}")
        endif()
        list(APPEND exported ${sym})
        if(NOT sym MATCHES "^rf_" OR sym MATCHES "^rf__")
            list(APPEND bad ${sym})
        endif()
    endif()
endforeach()
if(bad)
    message(FATAL_ERROR "exports: symbols outside the public API are exported: ${bad}\n"
                        "(mark helpers static, or keep them rf__ and hidden)")
endif()
if(unversioned)
    message(FATAL_ERROR "exports: symbols without a version node of ${MAP} (${nodes}): "
                        "${unversioned}\n(is the library linked with --version-script?)")
endif()

file(READ ${HEADER} header)
string(REGEX MATCHALL "RF_API[^;(]*[ *]rf_[a-z0-9_]+ *\\(" decls "${header}")
set(missing "")
foreach(d ${decls})
    string(REGEX MATCH "rf_[a-z0-9_]+ *\\($" name "${d}")
    string(REGEX REPLACE " *\\($" "" name "${name}")
    list(FIND exported ${name} at)
    if(at LESS 0)
        list(APPEND missing ${name})
    endif()
endforeach()
list(LENGTH decls ndecl)
list(LENGTH exported nexp)
message(STATUS "exports: ${nexp} exported symbols (version nodes ${nodes}), "
               "${ndecl} RF_API declarations")
if(missing)
    message(FATAL_ERROR "exports: declared RF_API in ringfeed.h but not exported: ${missing}")
endif()
