# Debian packages (installed by scripts/setup.sh).
find_package(Threads REQUIRED)
find_package(fmt REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(CLI11 REQUIRED)
find_package(GTest REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
pkg_check_modules(TOMLPP REQUIRED IMPORTED_TARGET tomlplusplus)
find_package(OpenSSL REQUIRED COMPONENTS Crypto)  # SHA-256 of models and workloads
if(FLIPSCOPE_BENCH)
  find_package(benchmark REQUIRED)
endif()
