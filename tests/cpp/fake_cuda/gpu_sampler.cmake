# Stand-ins for the probe's GPU tests (tests/bench/check_gpu.py), no GPU needed:
#   build/tests/fake_cuda/libnvidia-ml.so.1      NVML serving samples from a file (fake_nvml.c)
#   build/tests/fake_cuda_min/libcuda.so.1       a minimal CUDA driver that starts threads from its
#                                                own code, referencing glibc's old versions (fake_libcuda_min.c)
#   build/tests/fake_cuda_min234/libcuda.so.1    the same referencing the default versions
#   build/tests/cpp/gpu_user                     the known-answer program (gpu_user.c)
# Included from tests/cpp/CMakeLists.txt; the SONAMEs are the real libraries'.
set(_fake_dir ${CMAKE_CURRENT_SOURCE_DIR}/fake_cuda)
add_library(fake_nvml SHARED ${_fake_dir}/fake_nvml.c)
set_target_properties(fake_nvml PROPERTIES OUTPUT_NAME nvidia-ml SOVERSION 1 NO_SONAME OFF
  LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/tests/fake_cuda)
foreach(_variant min min234)
  add_library(fake_libcuda_${_variant} SHARED ${_fake_dir}/fake_libcuda_min.c)
  set_target_properties(fake_libcuda_${_variant} PROPERTIES OUTPUT_NAME cuda SOVERSION 1
    LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/tests/fake_cuda_${_variant})
  target_link_libraries(fake_libcuda_${_variant} PRIVATE Threads::Threads)
endforeach()
target_compile_definitions(fake_libcuda_min234 PRIVATE FAKE_CUDA_NEW_GLIBC=1)
add_executable(gpu_user ${_fake_dir}/gpu_user.c)
target_link_libraries(gpu_user PRIVATE Threads::Threads ${CMAKE_DL_LIBS})
add_custom_target(gpu_fakes DEPENDS fake_nvml fake_libcuda_min fake_libcuda_min234 gpu_user)
