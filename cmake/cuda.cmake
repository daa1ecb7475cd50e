# The exact engine's CUDA pass (FLIPSCOPE_EXACT_CUDA): nvcc from the cache (scripts/fetch-cuda.sh)
# unless CMAKE_CUDA_COMPILER names another. Sets FLIPSCOPE_EXACT_CUDA_BUILT. The sanitizer and
# fuzzing builds leave it out (nvcc takes neither instrumentation).
set(FLIPSCOPE_EXACT_CUDA_BUILT OFF)
if(FLIPSCOPE_EXACT_CUDA STREQUAL "OFF" OR FLIPSCOPE_SANITIZE OR FLIPSCOPE_FUZZ)
  return()
endif()
if(NOT CMAKE_CUDA_COMPILER)
  execute_process(COMMAND "${PROJECT_SOURCE_DIR}/scripts/fetch-cuda.sh" OUTPUT_VARIABLE _cuda_dir
    OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _rc)
  if(_rc EQUAL 0 AND EXISTS "${_cuda_dir}/bin/nvcc")
    set(CMAKE_CUDA_COMPILER "${_cuda_dir}/bin/nvcc")
  endif()
endif()
if(NOT CMAKE_CUDA_COMPILER)
  if(FLIPSCOPE_EXACT_CUDA STREQUAL "ON")
    message(FATAL_ERROR "FLIPSCOPE_EXACT_CUDA=ON but no nvcc: run scripts/fetch-cuda.sh or set CMAKE_CUDA_COMPILER")
  endif()
  message(STATUS "exact engine: CPU only (no nvcc)")
  return()
endif()
# Machine code for the cards with FP64 matrix units (A100: 8.0, H100/H200: 9.0) and PTX of 9.0 for
# later ones (their driver compiles it). No GPU is needed to build: the runtime is linked
# statically, and cuBLAS and the driver are loaded when a device is opened.
if(NOT CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES "80-real;90-real;90-virtual")
endif()
set(CMAKE_CUDA_HOST_COMPILER "${CMAKE_CXX_COMPILER}")
enable_language(CUDA)
# C++17 for the kernels' file (CMake 3.25 knows no C++20 dialect for nvcc; the file needs none).
set(CMAKE_CUDA_STANDARD 17)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
# The system's own include folder stays implicit for nvcc too: named with -isystem it hides the C
# library's headers from the C++ library's #include_next.
list(APPEND CMAKE_CUDA_IMPLICIT_INCLUDE_DIRECTORIES /usr/include)
set(FLIPSCOPE_EXACT_CUDA_BUILT ON)
message(STATUS "exact engine: CUDA pass with ${CMAKE_CUDA_COMPILER} for ${CMAKE_CUDA_ARCHITECTURES}")
