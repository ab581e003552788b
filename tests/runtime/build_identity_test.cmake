# The build identity changes when a code-generation source or the LLVM
# version changes, and stays when nothing did. Run by CTest:
#   cmake -DSCRIPT=cmake/build_identity.cmake -DWORK_DIR=... -P build_identity_test.cmake
file(REMOVE_RECURSE "${WORK_DIR}")
file(WRITE "${WORK_DIR}/src/kernel.cpp" "int kernel() { return 1; }\n")
file(WRITE "${WORK_DIR}/src/jit.cpp" "int jit() { return 2; }\n")
file(WRITE "${WORK_DIR}/list.txt" "${WORK_DIR}/src/kernel.cpp\n${WORK_DIR}/src/jit.cpp\n")

function(identity out llvm)
  execute_process(COMMAND ${CMAKE_COMMAND} -DLIST=${WORK_DIR}/list.txt -DROOT=${WORK_DIR}
    -DLLVM_VERSION=${llvm} -DVERSION=1.2.3 -DOUT=${WORK_DIR}/out.cpp -P ${SCRIPT}
    RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "build_identity.cmake failed: ${err}")
  endif()
  file(READ "${WORK_DIR}/out.cpp" content)
  if(NOT content MATCHES "kBuildIdentity\\[\\] = \"([0-9a-f]+)\"")
    message(FATAL_ERROR "no identity in:\n${content}")
  endif()
  set(${out} "${CMAKE_MATCH_1}" PARENT_SCOPE)
endfunction()

identity(first 15.0.6)
file(TIMESTAMP "${WORK_DIR}/out.cpp" stamp1 "%s")
identity(again 15.0.6)
if(NOT first STREQUAL again)
  message(FATAL_ERROR "the same sources gave two identities: ${first} ${again}")
endif()
file(WRITE "${WORK_DIR}/src/jit.cpp" "int jit() { return 3; }\n")
identity(edited 15.0.6)
if(first STREQUAL edited)
  message(FATAL_ERROR "editing a code-generation source kept the identity ${first}")
endif()
identity(other_llvm 15.0.7)
if(edited STREQUAL other_llvm)
  message(FATAL_ERROR "another LLVM version kept the identity ${edited}")
endif()
message(STATUS "build identity: ok")
