# llama.cpp: built once per (source tree, variant) by scripts/build-llama.sh into the cache and
# imported here, so that a fresh build directory does not rebuild it. By default the source is the
# tree vendored in the pinned llama-cpp-python sdist; FLIPSCOPE_LLAMA_DIR points at your own.
set(_variant cpu)
if(FLIPSCOPE_CUDA)
  set(_variant cuda)
endif()
# The llama-cpp-python release whose tree this is ("" for a checkout of your own); recorded in
# every manifest beside the tree's commit (flipscope history builds one worker per release).
set(FLIPSCOPE_LLAMA_RELEASE "" CACHE STRING "The llama-cpp-python release FLIPSCOPE_LLAMA_DIR was extracted from (recorded in manifests)")
if(FLIPSCOPE_LLAMA_DIR)
  set(_llama_src "${FLIPSCOPE_LLAMA_DIR}")
  set(_llama_release "${FLIPSCOPE_LLAMA_RELEASE}")
else()
  file(STRINGS "${PROJECT_SOURCE_DIR}/scripts/common.sh" _pin REGEX "^LLAMA_CPP_PYTHON_VERSION=")
  string(REGEX REPLACE "^LLAMA_CPP_PYTHON_VERSION=\"([^\"]*)\".*" "\\1" _llama_release "${_pin}")
  execute_process(COMMAND "${PROJECT_SOURCE_DIR}/scripts/fetch-llama.sh"
    OUTPUT_VARIABLE _llama_src OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "fetching llama.cpp failed (scripts/fetch-llama.sh)")
  endif()
endif()
# llama.cpp's tools (llama-server, llama-perplexity, llama-quantize) are for the tests and
# `flipscope run --verify-recipe`; the CLI links only the libraries. `make demo` configures with the
# tools off: a quarter of llama.cpp's compile time (llama-server brings its multimodal library and
# HTTP server). A later configure with them on adds them to the same build.
option(FLIPSCOPE_LLAMA_TOOLS "Build llama.cpp's tools (llama-server, llama-perplexity, llama-quantize) beside its libraries" ON)
# (Unset, build-llama.sh builds what its caller's environment asks: a history worker's build asks
# for the libraries alone.)
set(_llama_targets)
if(NOT FLIPSCOPE_LLAMA_TOOLS)
  set(_llama_targets "FLIPSCOPE_LLAMA_TARGETS=libs")
endif()
# The CPU code path of the build (docs/building.md): native minus AMX unless asked otherwise.
execute_process(COMMAND ${CMAKE_COMMAND} -E env "FLIPSCOPE_LLAMA_CPU=${FLIPSCOPE_LLAMA_CPU}"
    "FLIPSCOPE_LLAMA_AMX=${FLIPSCOPE_LLAMA_AMX}" ${_llama_targets}
    "${PROJECT_SOURCE_DIR}/scripts/build-llama.sh" "${_llama_src}" ${_variant}
  OUTPUT_VARIABLE LLAMA_BUILD_DIR OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "building llama.cpp failed (scripts/build-llama.sh ${_llama_src} ${_variant})")
endif()
set(LLAMA_SOURCE_DIR "${_llama_src}" CACHE INTERNAL "")
set(LLAMA_BUILD_DIR "${LLAMA_BUILD_DIR}" CACHE INTERNAL "")
set(LLAMA_BIN_DIR "${LLAMA_BUILD_DIR}/bin" CACHE INTERNAL "")
file(READ "${LLAMA_BUILD_DIR}/.flipscope-options" _llama_opts)
string(STRIP "${_llama_opts}" _llama_opts)
set(LLAMA_BUILD_OPTIONS "${_variant} ${_llama_opts}" CACHE INTERNAL "")
file(READ "${LLAMA_BUILD_DIR}/.flipscope-commit" _llama_commit)
string(STRIP "${_llama_commit}" _llama_commit)
set(LLAMA_COMMIT "${_llama_commit}" CACHE INTERNAL "")
set(LLAMA_RELEASE "${_llama_release}" CACHE INTERNAL "")
message(STATUS "llama.cpp: ${_llama_src} (release '${LLAMA_RELEASE}', commit ${LLAMA_COMMIT}) built in ${LLAMA_BUILD_DIR} (${LLAMA_BUILD_OPTIONS})")

function(_flipscope_import name lib)
  add_library(${name} SHARED IMPORTED GLOBAL)
  set_target_properties(${name} PROPERTIES IMPORTED_LOCATION "${lib}")
endfunction()
_flipscope_import(llama_ggml_base "${LLAMA_BIN_DIR}/libggml-base.so")
_flipscope_import(llama_ggml "${LLAMA_BIN_DIR}/libggml.so")
_flipscope_import(llama_lib "${LLAMA_BIN_DIR}/libllama.so")
_flipscope_import(llama_common_lib "${LLAMA_BIN_DIR}/libllama-common.so")
add_library(llama_common_base STATIC IMPORTED GLOBAL)
set_target_properties(llama_common_base PROPERTIES IMPORTED_LOCATION "${LLAMA_BUILD_DIR}/common/libllama-common-base.a")

add_library(flipscope_llama INTERFACE)
target_include_directories(flipscope_llama SYSTEM INTERFACE
  "${_llama_src}/include" "${_llama_src}/ggml/include")
target_link_libraries(flipscope_llama INTERFACE llama_lib llama_ggml llama_ggml_base Threads::Threads)
# llama.cpp's common library (Jinja chat templates); only the workload renderer uses it.
add_library(flipscope_llama_common INTERFACE)
target_include_directories(flipscope_llama_common SYSTEM INTERFACE "${_llama_src}/common")
target_link_libraries(flipscope_llama_common INTERFACE flipscope_llama llama_common_lib llama_common_base)
set(CMAKE_BUILD_RPATH "${LLAMA_BIN_DIR}")
set(CMAKE_INSTALL_RPATH "${LLAMA_BIN_DIR}")
