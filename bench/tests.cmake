# Each benchmark program under four environment points with a tiny budget
# (ctest -L bench). The LLVM KMP_BLOCKTIME=50, 2-thread point also checks the
# known answer: each of the T-1 = 1 workers spins 50 ms after the step, so
# residual_cpu_ms after a 300 ms gap must be 50 ms +- 5 %. The check reads the
# median over the steps: LLVM spins b ms of wall time, so a step in which another
# process preempted the worker burns less CPU than b, and that is not the runtime.
set(_tb_check ${THREADBURN_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/check_bench.py)
set(_tb_args_optimizer_step_bench --optimizer=sgd,adadelta --params=1000000 --gap_ms=0,300 --steps=7 --warmup=1)
set(_tb_args_train_step_bench --model=mnist_adadelta,cifar_sgd --batch=32 --workers=0,2 --preload=0,1
    --gap_ms=0,300 --steps=3 --warmup=1 --synthetic_n=512)

set(_tb_args_runtime_bench --n=32768,1048576 --gap_ms=0,10,100 --steps=5 --warmup=1)

set(_tb_points gomp_default gomp_passive)
set(_tb_env_gomp_default "OMP_NUM_THREADS=2")
set(_tb_env_gomp_passive "OMP_NUM_THREADS=2;OMP_WAIT_POLICY=passive")
if(THREADBURN_LIBOMP)
  list(APPEND _tb_points llvm_blocktime0 llvm_blocktime50)
  set(_tb_env_llvm_blocktime0 "OMP_NUM_THREADS=2;LD_PRELOAD=${THREADBURN_LIBOMP};KMP_BLOCKTIME=0")
  set(_tb_env_llvm_blocktime50 "OMP_NUM_THREADS=2;LD_PRELOAD=${THREADBURN_LIBOMP};KMP_BLOCKTIME=50")
endif()

foreach(prog optimizer_step_bench train_step_bench runtime_bench)
  foreach(point ${_tb_points})
    set(_expect)
    if(point STREQUAL "llvm_blocktime50" AND NOT prog STREQUAL "runtime_bench")
      if(prog STREQUAL "optimizer_step_bench")
        set(_expect --expect "gap_ms:300:residual_cpu_ms_median:50:0.05")
      else()
        # No loader threads: nothing but the OpenMP worker can burn in the gap.
        set(_expect --expect "workers:0/gap_ms:300:residual_cpu_ms_median:50:0.05")
      endif()
    endif()
    if(point STREQUAL "llvm_blocktime0" AND prog STREQUAL "optimizer_step_bench")
      set(_expect --expect "gap_ms:300:tail_ms_median:0:+-1.0")
    endif()
    add_test(NAME bench.${prog}.${point}
      COMMAND ${_tb_check} ${_expect} -- $<TARGET_FILE:${prog}> ${_tb_args_${prog}})
    set_tests_properties(bench.${prog}.${point} PROPERTIES LABELS bench TIMEOUT 240
      ENVIRONMENT "${_tb_env_${point}}" RUN_SERIAL TRUE)
  endforeach()
  if(prog STREQUAL "runtime_bench")
    continue()  # CPU only
  endif()
  # A CUDA point: without a GPU every benchmark must report "skipped: no CUDA device".
  add_test(NAME bench.${prog}.cuda_or_skip
    COMMAND ${_tb_check} -- $<TARGET_FILE:${prog}> ${_tb_args_${prog}} --device=cuda --steps=1 --warmup=0)
  set_tests_properties(bench.${prog}.cuda_or_skip PROPERTIES LABELS bench TIMEOUT 240)
endforeach()

# The loader and oneDNN knobs (issue: loader contention, oneDNN on/off).
add_test(NAME bench.train_step_bench.loader_mkldnn
  COMMAND ${_tb_check} -- $<TARGET_FILE:train_step_bench> --model=cifar_sgd --batch=32 --workers=2
          --loader=torch,tbb --mkldnn=0,1 --gap_ms=0,100 --steps=3 --warmup=1 --synthetic_n=512)
set_tests_properties(bench.train_step_bench.loader_mkldnn PROPERTIES LABELS bench TIMEOUT 240
  ENVIRONMENT "OMP_NUM_THREADS=2" RUN_SERIAL TRUE)

# The sweep end to end on the real programs (processes, LLVM, runtime_bench, TBB loader, CUDA skip).
add_test(NAME bench.sweep.smoke
  COMMAND ${THREADBURN_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/check_sweep.py ${PROJECT_BINARY_DIR})
set_tests_properties(bench.sweep.smoke PROPERTIES LABELS bench TIMEOUT 300 RUN_SERIAL TRUE)

# Bad input ends in one line naming the flag and exit 2 (label unit: fast).
add_test(NAME cli.bad_input COMMAND ${THREADBURN_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/test_cli.py)
set_tests_properties(cli.bad_input PROPERTIES LABELS unit
  ENVIRONMENT "TB_TRAIN_BENCH=$<TARGET_FILE:train_step_bench>;TB_OPTIMIZER_BENCH=$<TARGET_FILE:optimizer_step_bench>")
