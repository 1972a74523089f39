# Seconds each long test took in a cold CI run on two cores. CTest starts the costliest first
# (a fresh clone has no timing history), so no long test is left to run alone at the end.
include_guard(GLOBAL)
set(FLASHSERVE_TEST_COSTS
  e2e.structured_outputs=143 e2e.router=85 e2e.ledger_reconcile_pg=80 e2e.ledger_reconcile=77
  engine.v41_reference_test=39 engine.state_test=36 engine.consistency_test=36
  vision.pillow_parity=35 e2e.real_clients=35 engine.v41_test=30 e2e.images=26
  e2e.tenants_pg=26 engine.speculative_test=25 e2e.tenants=24 serve.speculation_test=21
  e2e.metering=21 e2e.metering_pg=20 e2e.encode=19 serve.engine_loop_test=18
  cli.developer_commands=17 engine.paths_test=15 e2e.frameworks=14 e2e.disaggregation=13
  e2e.hostile_clients=13 e2e.openai_sdk=13 kvstore.kv_store_fault_test=13
  kvstore.kv_store_fault_test_direct_io=13 model.weights_test=12 e2e.kv_restart=10
  e2e.load_streams=62 e2e.fleet_faults=45)

# flashserve_test_cost(test): sets the test's COST from the table above, when it is there.
function(flashserve_test_cost test)
  foreach(entry ${FLASHSERVE_TEST_COSTS})
    if(entry MATCHES "^${test}=([0-9]+)$")
      set_tests_properties(${test} PROPERTIES COST ${CMAKE_MATCH_1})
    endif()
  endforeach()
endfunction()
