# install_consumer test (cmake -P): installs the build into a fresh prefix, then
# builds tests/consumer twice - with find_package(ringfeed) and with
# `pkg-config --cflags --libs ringfeed` - and runs both programs.
#
# Inputs: BUILD_DIR, SOURCE_DIR, WORK_DIR, C_COMPILER, GENERATOR.

foreach(v BUILD_DIR SOURCE_DIR WORK_DIR C_COMPILER)
    if(NOT DEFINED ${v})
        message(FATAL_ERROR "install_consumer: ${v} not set")
    endif()
endforeach()

function(run what)
    execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
    message(STATUS "[${what}] ${out}${err}")
    if(NOT rc EQUAL 0)
        message(FATAL_ERROR "install_consumer: ${what} failed (${rc})")
    endif()
endfunction()

set(prefix ${WORK_DIR}/prefix)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

# 1. install
run("install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
file(GLOB_RECURSE installed RELATIVE ${prefix} ${prefix}/*)
message(STATUS "installed: ${installed}")
foreach(pattern "include/ringfeed.h" "libringfeed.so$" "libringfeed.so.0$" "ringfeed.pc$"
                "ringfeed-config.cmake$" "ringfeed-config-version.cmake$" "ringfeed-targets.cmake$")
    set(hit "")
    foreach(f ${installed})
        if(f MATCHES "${pattern}")
            set(hit ${f})
        endif()
    endforeach()
    if(NOT hit)
        message(FATAL_ERROR "install_consumer: nothing installed matches ${pattern}")
    endif()
endforeach()

# The CUDA runtime is loaded at run time (lib/cuda/cudart.c), never linked: no
# installed pkg-config or CMake file may ask a consumer for it.
foreach(f ${installed})
    if(f MATCHES "\\.(pc|cmake)$")
        file(READ ${prefix}/${f} text)
        if(text MATCHES "cudart")
            message(FATAL_ERROR "install_consumer: ${f} asks for cudart")
        endif()
    endif()
endforeach()

# 2. find_package(ringfeed) -> ringfeed::ringfeed
set(gen_args "")
if(GENERATOR)
    set(gen_args -G ${GENERATOR})
endif()
run("configure consumer" ${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/consumer
    -B ${WORK_DIR}/cmake-build ${gen_args}
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_C_COMPILER=${C_COMPILER})
run("build consumer" ${CMAKE_COMMAND} --build ${WORK_DIR}/cmake-build)
run("run consumer (find_package)" ${WORK_DIR}/cmake-build/consumer)

# 3. pkg-config
find_program(PKG_CONFIG NAMES pkg-config pkgconf)
if(NOT PKG_CONFIG)
    message(FATAL_ERROR "install_consumer: pkg-config not found")
endif()
file(GLOB_RECURSE pcfile ${prefix}/*/ringfeed.pc)
get_filename_component(pcdir "${pcfile}" DIRECTORY)
execute_process(COMMAND ${CMAKE_COMMAND} -E env PKG_CONFIG_PATH=${pcdir}
                        ${PKG_CONFIG} --cflags --libs ringfeed
                RESULT_VARIABLE rc OUTPUT_VARIABLE pcflags ERROR_VARIABLE err
                OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install_consumer: pkg-config --cflags --libs ringfeed: ${err}")
endif()
message(STATUS "pkg-config --cflags --libs ringfeed: ${pcflags}")
if(NOT pcflags MATCHES "-I${prefix}/" OR NOT pcflags MATCHES "-L${prefix}/")
    message(FATAL_ERROR "install_consumer: ringfeed.pc does not point into ${prefix}")
endif()
separate_arguments(pcflags UNIX_COMMAND "${pcflags}")
execute_process(COMMAND ${CMAKE_COMMAND} -E env PKG_CONFIG_PATH=${pcdir}
                        ${PKG_CONFIG} --variable=libdir ringfeed
                OUTPUT_VARIABLE libdir OUTPUT_STRIP_TRAILING_WHITESPACE)
run("compile consumer (pkg-config)" ${C_COMPILER} -std=c11 -Wall -Wextra -Werror
    ${SOURCE_DIR}/tests/consumer/main.c -o ${WORK_DIR}/consumer-pc ${pcflags})
run("run consumer (pkg-config)" ${CMAKE_COMMAND} -E env LD_LIBRARY_PATH=${libdir}
    ${WORK_DIR}/consumer-pc)

file(REMOVE_RECURSE ${WORK_DIR})
message(STATUS "install_consumer: ok")
