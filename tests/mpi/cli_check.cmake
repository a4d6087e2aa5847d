# The command line under mpirun -np 2: the job's commands (eval, sweep) take every rank and print
# once, what one process prints; the file commands (variants, check) run on rank 0 alone; --help is
# printed once; sweep --jobs is E-DIST-012 on every rank.
#   cmake -DLAUNCH="mpirun;-np;2;..." -DEXE=.../fashion_mlp -DDIR=... -P cli_check.cmake
file(REMOVE_RECURSE ${DIR})
file(MAKE_DIRECTORY ${DIR})

function(launch out_var rc_var)
  execute_process(COMMAND ${ARGN} WORKING_DIRECTORY ${DIR} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 300)
  set(${out_var} "${out}" PARENT_SCOPE)
  set(${rc_var} "${rc}" PARENT_SCOPE)
  set(last_err "${err}" PARENT_SCOPE)
endfunction()

# one run to evaluate (one process)
launch(out rc ${EXE} run --variant smoke --quiet --run-dir ${DIR}/runs --id first)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the one-process run failed with '${rc}':\n${out}${last_err}")
endif()

# the same stdout from 2 ranks as from one process
foreach(cmd "eval;latest;--run-dir;${DIR}/runs" "variants" "check;--variant;smoke" "run;--help")
  launch(one rc1 ${EXE} ${cmd})
  launch(two rc2 ${LAUNCH} ${EXE} ${cmd})
  if(NOT rc1 EQUAL 0 OR NOT rc2 EQUAL 0)
    message(FATAL_ERROR "`${cmd}`: one process '${rc1}', 2 ranks '${rc2}':\n${two}${last_err}")
  endif()
  if(NOT one STREQUAL two)
    message(FATAL_ERROR "`${cmd}` under mpirun -np 2 printed\n${two}\n--- where one process printed ---\n${one}")
  endif()
  string(LENGTH "${one}" n)
  if(n LESS 20)
    message(FATAL_ERROR "`${cmd}` printed almost nothing: '${one}'")
  endif()
  message(STATUS "`${cmd}`: 2 ranks print what one process prints (${n} characters)")
endforeach()

# sweep --jobs under mpirun: E-DIST-012, nothing run
launch(out rc ${LAUNCH} ${EXE} sweep widths --variant smoke --jobs 2 --run-dir ${DIR}/sweep)
if(rc EQUAL 0 OR NOT last_err MATCHES "E-DIST-012: `sweep --jobs 2` under mpirun")
  message(FATAL_ERROR "sweep --jobs 2 under mpirun: '${rc}', expected E-DIST-012:\n${out}${last_err}")
endif()
if(EXISTS ${DIR}/sweep)
  message(FATAL_ERROR "sweep --jobs 2 under mpirun ran something: ${DIR}/sweep exists")
endif()
message(STATUS "sweep --jobs 2 under mpirun: E-DIST-012")
