# The unit tests: GoogleTest files next to the code they test (x_test.cpp beside x.cpp).
#
# flipscope_test(NAME SOURCES... LIBS... [LABELS...] [DEFINITIONS...] [DEPENDS targets...]): the
# tests of these source files, with their own ctest labels. The files of every flipscope_test of
# one source folder are compiled into one object library and linked into one executable, FOLDER_tests (e.g.
# build/src/report/report_tests): 14 links and test listings instead of 73 (the links: 8 CPU
# seconds instead of 36; docs/building.md, "Cold build time").
# Each test case is still its own ctest test, named Suite.Name, carrying the labels of its file:
# the discovery lists the executable's tests with `--gtest_filter=file:PATH` (tests/support/
# test_main.cpp), once per NAME. Run one file's tests by hand with
#   build/src/report/report_tests --gtest_filter=file:report_test.cpp
# With FLIPSCOPE_TESTS off the targets are still defined (folders may add to them) but never built.
if(FLIPSCOPE_TESTS)
  add_library(fs_test_main STATIC ${PROJECT_SOURCE_DIR}/tests/support/test_main.cpp)
  target_link_libraries(fs_test_main PUBLIC GTest::gtest)
endif()

# Every folder's test files compile as one object library, FOLDER_test_objects, in unity batches of
# FLIPSCOPE_UNITY_BATCH files: a batch parses gtest, json and fmt once, and instantiates their
# templates once, instead of once per file (docs/building.md, "Cold build time"). A file with its
# own compile options (stats_test.cpp) is compiled alone, as CMake does for any such file. The
# files of one folder share their anonymous namespaces inside a batch, so a helper's name must be
# unique in its folder. FLIPSCOPE_UNITY=OFF compiles each file alone (an edit then rebuilds one
# file, not its batch).
option(FLIPSCOPE_UNITY "Compile each folder's test files in unity batches" ON)
set(FLIPSCOPE_UNITY_BATCH 6 CACHE STRING "Test files per unity batch")

function(flipscope_test name)
  cmake_parse_arguments(T "" "" "SOURCES;LIBS;LABELS;DEFINITIONS;DEPENDS" ${ARGN})
  # NAME carries what its files need (libraries, definitions, tests/support) to the folder's objects.
  add_library(${name} INTERFACE)
  target_link_libraries(${name} INTERFACE ${T_LIBS})
  target_compile_definitions(${name} INTERFACE ${T_DEFINITIONS})
  get_filename_component(folder "${CMAKE_CURRENT_SOURCE_DIR}" NAME)
  set(objects ${folder}_test_objects)
  if(NOT TARGET ${objects})
    add_library(${objects} OBJECT)
    if(NOT FLIPSCOPE_TESTS)
      set_target_properties(${objects} PROPERTIES EXCLUDE_FROM_ALL ON)
    endif()
    set_target_properties(${objects} PROPERTIES UNITY_BUILD ${FLIPSCOPE_UNITY}
                          UNITY_BUILD_BATCH_SIZE ${FLIPSCOPE_UNITY_BATCH})
    # A test's own code is checks and set-up, not the measured numerics (those are the libraries',
    # built at -O2): -O1 compiles it in about half the time. The ISO dialect keeps floating-point
    # contraction off at every level, so a value a test computes is the same.
    target_compile_options(${objects} PRIVATE $<$<CONFIG:RelWithDebInfo>:-O1>)
    target_compile_definitions(${objects} PRIVATE
      FLIPSCOPE_SOURCE_DIR="${PROJECT_SOURCE_DIR}" FLIPSCOPE_BINARY_DIR="${PROJECT_BINARY_DIR}"
      FLIPSCOPE_CACHE_DIR="${FLIPSCOPE_CACHE}" FLIPSCOPE_PYTHON="${FLIPSCOPE_PYTHON}")
    target_link_libraries(${objects} PUBLIC GTest::gtest)
  endif()
  target_sources(${objects} PRIVATE ${T_SOURCES})
  target_link_libraries(${objects} PUBLIC ${name})
  if(T_DEPENDS)
    add_dependencies(${objects} ${T_DEPENDS})
  endif()
  if(NOT FLIPSCOPE_TESTS)
    return()
  endif()

  set(exe ${folder}_tests)
  if(NOT TARGET ${exe})
    add_executable(${exe})
    target_link_libraries(${exe} PRIVATE fs_test_main ${objects})
  endif()

  # The files as paths from the project's root: the test main matches them against the end of
  # each test's __FILE__ (absolute, or relative where ccache rewrote the path).
  set(files)
  foreach(src ${T_SOURCES})
    get_filename_component(abs "${src}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    file(RELATIVE_PATH rel "${PROJECT_SOURCE_DIR}" "${abs}")
    list(APPEND files "${rel}")
  endforeach()
  list(JOIN files "," files)
  gtest_discover_tests(${exe} TEST_FILTER "file:${files}" DISCOVERY_TIMEOUT 60
                       PROPERTIES LABELS "${T_LABELS}")
endfunction()

# flipscope_test_support(TESTS...): these tests include helpers of tests/support ("support/x.h"),
# kept out of the stage folders: a helper includes the stage it tests, so it is no library code.
function(flipscope_test_support)
  foreach(t ${ARGN})
    target_include_directories(${t} INTERFACE ${PROJECT_SOURCE_DIR}/tests)
  endforeach()
endfunction()
