# Installs nitro into a fresh prefix, then configures and builds an outside project against it
# with find_package(nitro CONFIG REQUIRED), and runs it.
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
function(run)
  execute_process(COMMAND ${ARGV} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed: ${ARGV}\n${out}\n${err}")
  endif()
endfunction()
run(${CMAKE_COMMAND} -S ${NITRO_SOURCE} -B ${WORK}/nitro-build -G Ninja -DCMAKE_CXX_COMPILER=${CXX}
    -DNITRO_BUILD_TESTS=OFF -DNITRO_BUILD_EXAMPLES=OFF -DNITRO_BUILD_BENCH=OFF -DNITRO_CUDA=OFF
    -DCMAKE_INSTALL_PREFIX=${WORK}/prefix)
run(${CMAKE_COMMAND} --install ${WORK}/nitro-build)
run(${CMAKE_COMMAND} -S ${NITRO_SOURCE}/tests/package/consumer -B ${WORK}/consumer-build -G Ninja
    -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_PREFIX_PATH=${WORK}/prefix -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build ${WORK}/consumer-build)
# header-only (consumer) and with the compiled part the package builds from its source (consumer_runtime)
foreach(exe consumer consumer_runtime)
  execute_process(COMMAND ${WORK}/consumer-build/${exe} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "consumer: binding ok")
    message(FATAL_ERROR "${exe} ran badly (rc ${rc}):\n${out}\n${err}")
  endif()
  message(STATUS "${exe}: ${out}")
endforeach()
