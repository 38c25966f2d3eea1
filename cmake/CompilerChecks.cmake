# Compiler defects that would change results, probed at configure time with the project's flags.
#
# GCC 12.2 (Debian 12's g++) miscompiles constant vectors for AVX-512 targets: its SLP vectorizer
# builds std::vector<int>{2, 0, 2, 0, 2, 0, 0, 0} as a broadcast of the 64-bit pair {2, 0}, giving
# {2, 0, 2, 0, 2, 0, 2, 0} (seen with -march=native on an Intel Xeon (Sapphire Rapids) VM and with
# -march=skylake-avx512; AVX2 targets such as znver3 are not affected). Where the probe shows it,
# the project and the kernels it generates are compiled with -fno-tree-slp-vectorize
# (WACO_NO_SLP), which the probe shows to be correct.
include(CheckCXXSourceRuns)
set(_waco_probe [=[
#include <vector>
__attribute__((noinline)) int check(const std::vector<int>& v) { return v[6] == 0 && v[7] == 0 ? 0 : 1; }
int main() { const std::vector<int> v = {2, 0, 2, 0, 2, 0, 0, 0}; return check(v); }
]=])
set(WACO_NO_SLP OFF)
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  set(_waco_saved_flags "${CMAKE_REQUIRED_FLAGS}")
  set(CMAKE_REQUIRED_FLAGS "-O3")
  if(WACO_NATIVE)
    string(APPEND CMAKE_REQUIRED_FLAGS " -march=native")
  endif()
  check_cxx_source_runs("${_waco_probe}" WACO_SLP_CONSTANTS_CORRECT)
  if(NOT WACO_SLP_CONSTANTS_CORRECT)
    set(CMAKE_REQUIRED_FLAGS "${CMAKE_REQUIRED_FLAGS} -fno-tree-slp-vectorize")
    check_cxx_source_runs("${_waco_probe}" WACO_SLP_WORKAROUND_CORRECT)
    if(NOT WACO_SLP_WORKAROUND_CORRECT)
      message(FATAL_ERROR "waco: ${CMAKE_CXX_COMPILER} miscompiles a constant vector even with "
                          "-fno-tree-slp-vectorize; configure with -DWACO_NATIVE=OFF or another compiler")
    endif()
    set(WACO_NO_SLP ON)
    message(WARNING "waco: ${CMAKE_CXX_COMPILER} ${CMAKE_CXX_COMPILER_VERSION} miscompiles constant "
                    "vectors with these flags (SLP vectorizer, AVX-512): compiling the project and "
                    "its generated kernels with -fno-tree-slp-vectorize")
  endif()
  set(CMAKE_REQUIRED_FLAGS "${_waco_saved_flags}")
endif()
