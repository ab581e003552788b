# Runs the test binary's multi-process case twice, in two processes, on one
# fresh persistent cache directory: the first compiles, the second must
# compile nothing and compute the same results.
file(REMOVE_RECURSE ${DIR})
foreach(run 1 2)
  execute_process(
    COMMAND ${CMAKE_COMMAND} -E env PRIMCACHE_PERSISTENT_CACHE_DIR=${DIR}
      ${TEST} "[.multi_process]" --use-colour no
    OUTPUT_VARIABLE out_${run} RESULT_VARIABLE rc_${run})
  if(NOT rc_${run} EQUAL 0)
    message(FATAL_ERROR "run ${run} of ${TEST} failed (${rc_${run}}):\n${out_${run}}")
  endif()
  if(NOT out_${run} MATCHES "compiled ([0-9]+) digest ([0-9a-f]+) hits ([0-9]+)")
    message(FATAL_ERROR "run ${run} printed no summary:\n${out_${run}}")
  endif()
  set(compiled_${run} ${CMAKE_MATCH_1})
  set(digest_${run} ${CMAKE_MATCH_2})
  set(hits_${run} ${CMAKE_MATCH_3})
endforeach()
file(REMOVE_RECURSE ${DIR})
if(compiled_1 EQUAL 0)
  message(FATAL_ERROR "the first process compiled nothing: the directory was not empty?")
endif()
if(NOT compiled_2 EQUAL 0)
  message(FATAL_ERROR "the second process compiled ${compiled_2} objects (first: ${compiled_1})")
endif()
if(hits_2 EQUAL 0)
  message(FATAL_ERROR "the second process had no persistent cache hits")
endif()
if(NOT digest_1 STREQUAL digest_2)
  message(FATAL_ERROR "the results differ between processes: ${digest_1} vs ${digest_2}")
endif()
message(STATUS "first process compiled ${compiled_1} objects, the second 0 (${hits_2} hits); same results")
