# SPDX-License-Identifier: Apache-2.0
# Documentation and the Debian package, included from the top-level CMakeLists.txt after the
# sub-projects (so the tools' targets exist):
#   <mandir>/man1/nccl-mesh-bench.1.gz, nccl-mesh-doctor.1.gz   for the tools that are built
#   <docdir>/README.md                                          (share/doc/nccl-mesh)
# and CPack's DEB generator for all of it plus the plugin (cmake/install.cmake):
#   cpack -G DEB --config build/CPackConfig.cmake     (or `cpack` inside build)
# writes nccl-mesh_<version>_<arch>.deb with the layout of this tree's install rules under /usr.

# Manual pages: written by hand in docs/man (the man_pages_cover_help test in tests/install
# checks them against --help), version and layout filled in, gzip-compressed as Debian wants
# (gzip -n: no time stamp, so the same sources give the same bytes).
find_program(MESH_GZIP gzip)
if(NOT MESH_GZIP)
  message(STATUS "gzip not found: manual pages are installed uncompressed")
endif()
set(MESH_MAN_FILES)
foreach(_mesh_tool nccl-mesh-bench nccl-mesh-doctor)
  if(NOT TARGET ${_mesh_tool})
    continue()
  endif()
  set(_mesh_page ${PROJECT_BINARY_DIR}/man/${_mesh_tool}.1)
  configure_file(${PROJECT_SOURCE_DIR}/docs/man/${_mesh_tool}.1.in ${_mesh_page} @ONLY)
  if(MESH_GZIP)
    add_custom_command(OUTPUT ${_mesh_page}.gz
                       COMMAND ${MESH_GZIP} -9 -n -f -k ${_mesh_page}
                       DEPENDS ${_mesh_page}
                       COMMENT "Compressing manual page ${_mesh_tool}.1"
                       VERBATIM)
    list(APPEND MESH_MAN_FILES ${_mesh_page}.gz)
  else()
    list(APPEND MESH_MAN_FILES ${_mesh_page})
  endif()
endforeach()
if(MESH_MAN_FILES)
  add_custom_target(mesh-man-pages ALL DEPENDS ${MESH_MAN_FILES})
  install(FILES ${MESH_MAN_FILES} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
endif()
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})

# The Debian package.
set(MESH_PACKAGE_MAINTAINER "nccl-mesh maintainers <maintainers@users.noreply.a-seed-30e8e57d.example>"
    CACHE STRING "Maintainer field of the Debian package (Name <email>)")
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME nccl-mesh)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "nccl-mesh")
set(CPACK_PACKAGE_CONTACT "${MESH_PACKAGE_MAINTAINER}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "NCCL and RCCL network plugin for switchless GPU meshes")
set(CPACK_PACKAGE_DESCRIPTION
    "nccl-mesh is an NCCL (and RCCL) network plugin for GPU clusters wired without a switch:
every pair of nodes is cabled directly and every cable is its own IP subnet. For each peer it
picks the local interface on the peer's subnet, stripes over several cables to the same peer,
and moves data over RDMA (RoCE v2 or InfiniBand verbs, libibverbs loaded at run time) or
multi-stream TCP.
.
This package contains the plugin (libnccl-net-mesh.so, and librccl-net-mesh.so for RCCL),
nccl-mesh-doctor, which checks a host of the mesh before NCCL runs on it, and nccl-mesh-bench,
which measures links and collectives through the plugin without a GPU.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${MESH_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# Depends: computed from the ELF files by dpkg-shlibdeps (Debian: dpkg-dev, and file), e.g. libc6,
# libstdc++6, libgcc-s1 and libfmt9 for the bench. libibverbs is dlopen'ed, not linked: without
# it the plugin runs TCP only, hence only a recommendation. gnuplot draws the bench's --plot.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS libibverbs1)
set(CPACK_DEBIAN_PACKAGE_SUGGESTS gnuplot-nox)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
find_program(MESH_DPKG_SHLIBDEPS dpkg-shlibdeps)
find_program(MESH_FILE_COMMAND file)
if(NOT MESH_DPKG_SHLIBDEPS OR NOT MESH_FILE_COMMAND)
  message(STATUS "dpkg-shlibdeps or file not found: the .deb (cpack -G DEB) needs them "
                 "(Debian: dpkg-dev file)")
endif()
include(CPack)
unset(_mesh_tool)
unset(_mesh_page)
