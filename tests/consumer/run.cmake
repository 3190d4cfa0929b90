# ctest driver of the consumer project (tests/CMakeLists.txt):
#   cmake -DMODE=install|subdirectory -DSRC=<checkout> -DBIN=<build> -DWORK=<scratch> -P run.cmake
# install:      cmake --install BIN into WORK/prefix, check the installed files,
#               build the consumer with find_package(moejit), run it
# subdirectory: build the consumer with add_subdirectory(SRC) (library only), run it
# Each run prewarms gpt-oss-120b for a budget of 1 token into a private cache.
cmake_minimum_required(VERSION 3.25)
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

set(configure_args -DCMAKE_BUILD_TYPE=Release)
if(MODE STREQUAL "install")
  run(${CMAKE_COMMAND} --install ${BIN} --prefix ${WORK}/prefix)
  foreach(f include/moejit/moe_layer.hpp include/moejit/device.hpp lib/libmoejit.a lib/libmoejit.so
            lib/cmake/moejit/moejitConfig.cmake lib/cmake/moejit/moejitConfigVersion.cmake
            lib/cmake/moejit/moejitTargets.cmake bin/moejit-prewarm bin/moejit-cache bin/moejit-run)
    if(NOT EXISTS ${WORK}/prefix/${f})
      message(FATAL_ERROR "cmake --install did not install ${f}")
    endif()
  endforeach()
  list(APPEND configure_args -DCMAKE_PREFIX_PATH=${WORK}/prefix)
  set(programs consumer_static consumer_shared device_check)
elseif(MODE STREQUAL "subdirectory")
  list(APPEND configure_args -DMOEJIT_SOURCE_DIR=${SRC})
  if(DEFINED ENV{CMAKE_CXX_COMPILER_LAUNCHER})
    list(APPEND configure_args -DCMAKE_CXX_COMPILER_LAUNCHER=$ENV{CMAKE_CXX_COMPILER_LAUNCHER})
  endif()
  set(programs consumer_static consumer_shared device_check)
else()
  message(FATAL_ERROR "MODE must be install or subdirectory, got '${MODE}'")
endif()

run(${CMAKE_COMMAND} -S ${SRC}/tests/consumer -B ${WORK}/build ${configure_args})
include(ProcessorCount)
ProcessorCount(jobs)
if(jobs GREATER 2)
  set(jobs 2)
endif()
run(${CMAKE_COMMAND} --build ${WORK}/build -j ${jobs})
set(ENV{MOEJIT_CACHE_DIR} ${WORK}/cache)
foreach(p IN LISTS programs)
  if(p STREQUAL "device_check")
    run(${WORK}/build/${p})
  else()
    run(${WORK}/build/${p} 1)
    if(NOT last_output MATCHES "\"failed\": 0")
      message(FATAL_ERROR "${p}: unexpected report:\n${last_output}")
    endif()
  endif()
  message(STATUS "${p}: ok\n${last_output}")
endforeach()
