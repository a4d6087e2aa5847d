# `mpirun -np 2 fashion_mlp run` against one process (issue 10's "done when"): the example trains STEPS
# steps of a selection (ARGS, e.g. "--variant;smoke") with 2 ranks and alone, same seed, same global
# batch. Checks that rank 0 alone wrote the record (one run folder, status finished at step STEPS,
# manifest, metrics, checkpoints) and that the final checkpoints' tensors (parameters, optimizer
# state) are equal to float tolerance (compare_checkpoints.py).
# With RESUME=k each side is two launches: k steps, then `--resume` of that run to STEPS (under
# mpirun every rank resumes from rank 0's checkpoint). The schedules are made for each launch's own
# horizon, so the 2-rank pair is compared with the same pair in one process.
#   cmake -DLAUNCH="mpirun;-np;2;..." -DEXE=.../fashion_mlp -DARGS="--variant;smoke" -DDIR=... -DSTEPS=8
#         [-DRESUME=4] -DPYTHON=python3 -DCOMPARE=.../compare_checkpoints.py -P example_check.cmake
file(REMOVE_RECURSE ${DIR})

# train(<name> <launcher...>): the run into ${DIR}/<name>, resumed from ${DIR}/<name>-first with RESUME
function(train name)
  set(launch ${ARGN})
  set(resume_args)
  if(RESUME)
    execute_process(COMMAND ${launch} ${EXE} run ${ARGS} --steps ${RESUME} --quiet --run-dir ${DIR}/${name}-first --id first
      RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 300)
    message(STATUS "${name}, the first ${RESUME} steps: '${rc}'\n${out}${err}")
    file(GLOB first LIST_DIRECTORIES true ${DIR}/${name}-first/*)
    if(NOT rc EQUAL 0 OR NOT EXISTS ${first}/checkpoints/index.json)
      message(FATAL_ERROR "${name}: the first run failed with '${rc}' or wrote no checkpoint")
    endif()
    set(resume_args --resume ${first})
  endif()
  execute_process(COMMAND ${launch} ${EXE} run ${ARGS} --steps ${STEPS} --quiet ${resume_args} --run-dir ${DIR}/${name} --id ${name}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 300)
  message(STATUS "${name}: '${rc}'\n${out}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${name}: the run failed with '${rc}'")
  endif()
endfunction()

train(np2 ${LAUNCH})
train(np1)
foreach(n np2 np1)
  file(GLOB runs LIST_DIRECTORIES true ${DIR}/${n}/*)
  list(LENGTH runs count)
  if(NOT count EQUAL 1)
    message(FATAL_ERROR "${DIR}/${n} holds ${count} entries, not one run folder (only rank 0 writes): ${runs}")
  endif()
  set(run_${n} ${runs})
  file(READ ${runs}/status.json status)
  string(JSON state GET "${status}" state)
  string(JSON step GET "${status}" step)
  if(NOT state STREQUAL "finished" OR NOT step EQUAL STEPS)
    message(FATAL_ERROR "${runs}/status.json says ${state} at step ${step}, expected finished at step ${STEPS}:\n${status}")
  endif()
  foreach(f manifest.json metrics.jsonl checkpoints/index.json)
    if(NOT EXISTS ${runs}/${f})
      message(FATAL_ERROR "rank 0 wrote no ${runs}/${f}")
    endif()
  endforeach()
endforeach()
execute_process(COMMAND ${PYTHON} ${COMPARE} ${run_np2} ${run_np1} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message(STATUS "${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the 2-rank run's parameters are not the one-process run's: ${err}")
endif()
