# The unit tests: GoogleTest files next to the code they test (x_test.cpp beside x.cpp).
#
# flipscope_test(NAME SOURCES... LIBS... [LABELS...]): the tests of these source files, with their
# own ctest labels. NAME is an object library of the files (so target_compile_definitions(NAME ...),
# add_dependencies(NAME ...) and flipscope_test_support(NAME) apply to them alone); the files of
# every flipscope_test of one source folder are linked into one executable, FOLDER_tests (e.g.
# build/src/report/report_tests): 14 links and test listings instead of 73 (the links: 8 CPU
# seconds instead of 36; docs/building.md, "Cold build time").
# Each test case is still its own ctest test, named Suite.Name, carrying the labels of its file:
# the discovery lists the executable's tests with `--gtest_filter=file:PATH` (tests/support/
# test_main.cpp), once per NAME. Run one file's tests by hand with
#   build/src/report/report_tests --gtest_filter=file:report_test.cpp
# With FLIPSCOPE_TESTS off the object library is still defined (folders may add to it) but never
# built.
if(FLIPSCOPE_TESTS)
  add_library(fs_test_main STATIC ${PROJECT_SOURCE_DIR}/tests/support/test_main.cpp)
  target_link_libraries(fs_test_main PUBLIC GTest::gtest)
endif()

function(flipscope_test name)
  cmake_parse_arguments(T "" "" "SOURCES;LIBS;LABELS" ${ARGN})
  if(NOT FLIPSCOPE_TESTS)
    add_library(${name} OBJECT EXCLUDE_FROM_ALL ${T_SOURCES})
    return()
  endif()
  add_library(${name} OBJECT ${T_SOURCES})
  # A test's own code is checks and set-up, not the measured numerics (those are the libraries',
  # built at -O2): -O1 compiles it in about half the time. The ISO dialect keeps floating-point
  # contraction off at every level, so a value a test computes is the same.
  target_compile_options(${name} PRIVATE $<$<CONFIG:RelWithDebInfo>:-O1>)
  target_link_libraries(${name} PUBLIC ${T_LIBS} GTest::gtest)
  target_compile_definitions(${name} PRIVATE
    FLIPSCOPE_SOURCE_DIR="${PROJECT_SOURCE_DIR}" FLIPSCOPE_BINARY_DIR="${PROJECT_BINARY_DIR}"
    FLIPSCOPE_CACHE_DIR="${FLIPSCOPE_CACHE}" FLIPSCOPE_PYTHON="${FLIPSCOPE_PYTHON}")

  get_filename_component(folder "${CMAKE_CURRENT_SOURCE_DIR}" NAME)
  set(exe ${folder}_tests)
  if(NOT TARGET ${exe})
    add_executable(${exe})
    target_link_libraries(${exe} PRIVATE fs_test_main)
  endif()
  target_link_libraries(${exe} PRIVATE ${name})

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
    target_include_directories(${t} PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  endforeach()
endfunction()
