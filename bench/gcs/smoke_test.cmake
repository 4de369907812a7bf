# Runs bench_gcs_load with tiny sizes and checks that it exits 0 and that its
# JSON holds every figure. Timings are not checked.
#   cmake -DBENCH=<bench_gcs_load> -DJSON=<out.json> -P smoke_test.cmake
file(REMOVE ${JSON})
execute_process(
  COMMAND ${BENCH} --nodes=8 --baseline-nodes=2 --actors=16 --pgs=4 --raylets=2 --baseline-raylets=1
          --status-runs=2 --cpu-seconds=0.5 --settle-seconds=0.2 --json=${JSON}
  RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "bench_gcs_load exited with ${result}")
endif()
file(READ ${JSON} figures)
foreach(metric register_all_s gcs_rss_per_node gcs_cpu_steady fill_actors_s fill_pgs_s actors_per_s
               gcs_cpu_ms_per_actor status_p50_ms
               status_p99_ms raylets_alive_s raylets_status_p50_ms)
  foreach(field value unit baseline)
    string(JSON ignored ERROR_VARIABLE missing GET "${figures}" ${metric} ${field})
    if(missing)
      message(FATAL_ERROR "${JSON} lacks ${metric}.${field}: ${missing}")
    endif()
  endforeach()
endforeach()
