# Runs the cache blob id printer twice, in two processes, and requires the
# same ids (one per primitive kind) from both.
foreach(run 1 2)
  execute_process(COMMAND ${CPU_TEST} "[blob_id]" --use-colour no
    OUTPUT_VARIABLE out_${run} RESULT_VARIABLE rc_${run})
  if(NOT rc_${run} EQUAL 0)
    message(FATAL_ERROR "run ${run} of ${CPU_TEST} failed (${rc_${run}}):\n${out_${run}}")
  endif()
  string(REGEX MATCHALL "blob_id [^\n]*" ids_${run} "${out_${run}}")
endforeach()
list(LENGTH ids_1 n)
if(n LESS 4)
  message(FATAL_ERROR "expected 4 blob ids, got ${n}:\n${out_1}")
endif()
if(NOT ids_1 STREQUAL ids_2)
  message(FATAL_ERROR "the blob ids differ between processes:\n${ids_1}\n${ids_2}")
endif()
message(STATUS "the same ${n} blob ids in two processes")
