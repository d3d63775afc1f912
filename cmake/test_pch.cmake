# SPDX-License-Identifier: Apache-2.0
# One precompiled <gtest/gtest.h> per group of test binaries. Parsing it is about 1.4 s of each
# test file's compile (of 2-8 s), there are about a hundred test files, and CI builds them in
# four lanes (release, ASan, TSan, arm64) on two cores. The owner target builds the header once;
# the others reuse it (REUSE_FROM: same compiler flags, which a group made by one foreach has).
# MESH_TEST_PCH=OFF compiles every test file on its own, e.g. to check that each includes what
# it uses.
option(MESH_TEST_PCH "Precompile <gtest/gtest.h> for the test binaries" ON)
function(mesh_gtest_pch owner)
  if(NOT MESH_TEST_PCH)
    return()
  endif()
  target_precompile_headers(${owner} PRIVATE <gtest/gtest.h>)
  foreach(user ${ARGN})
    target_precompile_headers(${user} REUSE_FROM ${owner})
  endforeach()
endfunction()
