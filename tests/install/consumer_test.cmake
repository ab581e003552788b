# Installs the build tree into a fresh prefix, then configures, builds and
# runs docs/consumer against it. Run by CTest for the shared build, and by
# .ci/run for a static one (-DBUILD_SHARED_LIBS=OFF):
#   cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK_DIR=... [-DCONSUMER_ARGS=...] -P consumer_test.cmake
# CONSUMER_ARGS: more arguments (a ;-list) for the consumer's configuration,
# such as the compiler and sanitizer flags of instrumented libraries.
foreach(var BUILD_DIR SOURCE_DIR WORK_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "consumer_test.cmake needs -D${var}=...")
  endif()
endforeach()

function(run_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  message(STATUS "${what}: ok")
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")
run_step("install" ${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${prefix}")
run_step("configure consumer" ${CMAKE_COMMAND} -S "${SOURCE_DIR}/docs/consumer"
  -B "${WORK_DIR}/build" -G Ninja "-DCMAKE_PREFIX_PATH=${prefix}" ${CONSUMER_ARGS})
run_step("build consumer" ${CMAKE_COMMAND} --build "${WORK_DIR}/build")
run_step("run consumer" "${WORK_DIR}/build/consumer")
if(NOT last_output MATCHES "consumer: ok")
  message(FATAL_ERROR "consumer printed no success line:\n${last_output}")
endif()
run_step("run consumer_cpu" "${WORK_DIR}/build/consumer_cpu")
if(NOT last_output MATCHES "consumer_cpu: ok")
  message(FATAL_ERROR "consumer_cpu printed no success line:\n${last_output}")
endif()

# Asking for a component that does not exist fails configuration.
file(WRITE "${WORK_DIR}/bad/CMakeLists.txt"
  "cmake_minimum_required(VERSION 3.25)\nproject(bad LANGUAGES CXX)\n"
  "find_package(primcache REQUIRED COMPONENTS no_such_component)\n")
execute_process(COMMAND ${CMAKE_COMMAND} -S "${WORK_DIR}/bad" -B "${WORK_DIR}/bad/build"
  -G Ninja "-DCMAKE_PREFIX_PATH=${prefix}" RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
if(rc EQUAL 0)
  message(FATAL_ERROR "find_package accepted a component that does not exist")
endif()
message(STATUS "unknown component rejected: ok")
