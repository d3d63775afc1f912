# SPDX-License-Identifier: Apache-2.0
# Documentation and the Debian packages, included from the top-level CMakeLists.txt after the
# sub-projects (so the tools' targets exist).
#
# The install tree (cmake --install, component "plugin" and "tools"):
#   <mandir>/man1/nccl-mesh-bench.1.gz, nccl-mesh-doctor.1.gz   for the tools that are built
#   <mandir>/man8/nccl-mesh-relayd.8.gz                          (the relay service)
#   <docdir>/README.md, LICENSE, deploy.md, relay.md, gin.md, examples/  (share/doc/nccl-mesh)
# The Debian packages (cpack -G DEB --config build/CPackConfig.cmake, or `cpack` inside build):
#   libnccl-net-mesh_<version>_<arch>.deb   component "lib": the plugin and its RCCL name in
#       /usr/lib/<triplet> (cmake/install.cmake), ldconfig trigger, README, deploy guide and
#       examples (the sysctl.d file, the torchrun check) in /usr/share/doc/libnccl-net-mesh
#   nccl-mesh-tools_<version>_<arch>.deb    component "tools": /usr/bin/nccl-mesh-*,
#       /usr/sbin/nccl-mesh-relayd and its systemd unit, their manual pages; depends on the
#       library of the same version (the bench dlopens it)
# Both carry the machine-readable copyright and the changelog (packaging/debian/). The split
# follows Debian's policy for shared libraries (a library package named after its SONAME, in
# the multiarch folder) and lets a GPU node take the plugin without the tools' fmt dependency.
# Manual pages: written by hand in docs/man (the man_pages_cover_help test in tests/install
# checks them against --help), version and layout filled in, gzip-compressed as Debian wants
# (gzip -n: no time stamp, so the same sources give the same bytes).
find_program(MESH_GZIP gzip)
if(NOT MESH_GZIP)
  message(STATUS "gzip not found: manual pages are installed uncompressed")
endif()
set(MESH_MAN_FILES)
set(MESH_MAN8_FILES)
foreach(_mesh_tool nccl-mesh-bench nccl-mesh-doctor nccl-mesh-relayd)
  if(NOT TARGET ${_mesh_tool})
    continue()
  endif()
  set(_mesh_section 1)
  if(_mesh_tool STREQUAL nccl-mesh-relayd)
    set(_mesh_section 8)  # a system service
  endif()
  set(_mesh_page ${PROJECT_BINARY_DIR}/man/${_mesh_tool}.${_mesh_section})
  configure_file(${PROJECT_SOURCE_DIR}/docs/man/${_mesh_tool}.${_mesh_section}.in ${_mesh_page}
                 @ONLY)
  if(MESH_GZIP)
    add_custom_command(OUTPUT ${_mesh_page}.gz
                       COMMAND ${MESH_GZIP} -9 -n -f -k ${_mesh_page}
                       DEPENDS ${_mesh_page}
                       COMMENT "Compressing manual page ${_mesh_tool}.${_mesh_section}"
                       VERBATIM)
    set(_mesh_page ${_mesh_page}.gz)
  endif()
  if(_mesh_section EQUAL 8)
    list(APPEND MESH_MAN8_FILES ${_mesh_page})
  else()
    list(APPEND MESH_MAN_FILES ${_mesh_page})
  endif()
endforeach()
if(MESH_MAN_FILES OR MESH_MAN8_FILES)
  add_custom_target(mesh-man-pages ALL DEPENDS ${MESH_MAN_FILES} ${MESH_MAN8_FILES})
endif()
if(MESH_MAN_FILES)
  install(FILES ${MESH_MAN_FILES} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT tools)
endif()
if(MESH_MAN8_FILES)
  install(FILES ${MESH_MAN8_FILES} DESTINATION ${CMAKE_INSTALL_MANDIR}/man8 COMPONENT tools)
endif()

# Documentation: what a user of the install tree or of the library package reads.
# deploy.md points to relay.md (the relay service and its threat model) and gin.md (GIN/RMA).
set(MESH_DOC_FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/docs/deploy.md
                   ${PROJECT_SOURCE_DIR}/docs/relay.md ${PROJECT_SOURCE_DIR}/docs/gin.md)
set(MESH_EXAMPLE_FILES ${PROJECT_SOURCE_DIR}/examples/sysctl.d/60-nccl-mesh.conf
                       ${PROJECT_SOURCE_DIR}/examples/torchrun_mesh_check.py)
install(FILES ${MESH_DOC_FILES} ${PROJECT_SOURCE_DIR}/LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR}
        COMPONENT plugin)
install(FILES ${MESH_EXAMPLE_FILES} DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples COMPONENT plugin)

# The packages' own files (EXCLUDE_FROM_ALL: cpack only): Debian's /usr/share/doc/<package>
# with copyright and changelog.gz in each, the library's docs and examples, its lintian
# overrides (each argued in the file).
set(_mesh_changelog ${PROJECT_BINARY_DIR}/packaging/changelog.gz)
file(STRINGS ${PROJECT_SOURCE_DIR}/packaging/debian/changelog _mesh_changelog_head LIMIT_COUNT 1)
if(NOT _mesh_changelog_head MATCHES "^nccl-mesh \\(${PROJECT_VERSION}\\) ")
  message(FATAL_ERROR "packaging/debian/changelog starts with '${_mesh_changelog_head}': add an "
                      "entry for version ${PROJECT_VERSION} (the packages' version) on top")
endif()
if(MESH_GZIP)
  add_custom_command(OUTPUT ${_mesh_changelog}
                     COMMAND ${CMAKE_COMMAND} -E make_directory ${PROJECT_BINARY_DIR}/packaging
                     COMMAND ${MESH_GZIP} -9 -n -c ${PROJECT_SOURCE_DIR}/packaging/debian/changelog
                             > ${_mesh_changelog}
                     DEPENDS ${PROJECT_SOURCE_DIR}/packaging/debian/changelog
                     COMMENT "Compressing the Debian changelog")
  add_custom_target(mesh-changelog ALL DEPENDS ${_mesh_changelog})
else()
  set(_mesh_changelog ${PROJECT_SOURCE_DIR}/packaging/debian/changelog)
endif()
set(MESH_DEB_LIB_PACKAGE libnccl-net-mesh)
set(MESH_DEB_TOOLS_PACKAGE nccl-mesh-tools)
set(_mesh_lib_doc ${CMAKE_INSTALL_DATAROOTDIR}/doc/${MESH_DEB_LIB_PACKAGE})
set(_mesh_tools_doc ${CMAKE_INSTALL_DATAROOTDIR}/doc/${MESH_DEB_TOOLS_PACKAGE})
install(FILES ${PROJECT_SOURCE_DIR}/packaging/debian/copyright ${_mesh_changelog} ${MESH_DOC_FILES}
        DESTINATION ${_mesh_lib_doc} COMPONENT lib EXCLUDE_FROM_ALL)
install(FILES ${MESH_EXAMPLE_FILES} DESTINATION ${_mesh_lib_doc}/examples COMPONENT lib
        EXCLUDE_FROM_ALL)
install(FILES ${PROJECT_SOURCE_DIR}/packaging/debian/libnccl-net-mesh/lintian-overrides
        DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/lintian/overrides RENAME ${MESH_DEB_LIB_PACKAGE}
        COMPONENT lib EXCLUDE_FROM_ALL)
install(FILES ${PROJECT_SOURCE_DIR}/packaging/debian/copyright ${_mesh_changelog}
        DESTINATION ${_mesh_tools_doc} COMPONENT tools EXCLUDE_FROM_ALL)

# The Debian packages.
set(MESH_PACKAGE_MAINTAINER "nccl-mesh maintainers <maintainers@users.noreply.a-seed-30e8e57d.example>"
    CACHE STRING "Maintainer field of the Debian packages (Name <email>)")
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME nccl-mesh)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "nccl-mesh")
set(CPACK_PACKAGE_CONTACT "${MESH_PACKAGE_MAINTAINER}")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL lib tools)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${MESH_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# Depends: computed from the ELF files by dpkg-shlibdeps (Debian: dpkg-dev, and file): libc6,
# libstdc++6, libgcc-s1, and libfmt9 for the bench.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# Descriptions: CPack indents each line by one space (Debian's continuation lines); "." is an
# empty line; at most 80 columns.
set(_mesh_about
    "nccl-mesh is an NCCL (and RCCL) network plugin for GPU clusters wired without
a switch: every pair of nodes is cabled directly and every cable is its own IP
subnet. For each peer it picks the local interface on the peer's subnet,
stripes over several cables to the same peer, relays through neighbours where
two hosts share no cable, and moves data over RDMA (RoCE v2 or InfiniBand
verbs, libibverbs loaded at run time) or multi-stream TCP.
.")
# The library. libibverbs is dlopen'ed, not linked: without it the plugin runs TCP only, hence
# only a recommendation. The ldconfig trigger refreshes ld.so's cache for the new SONAME; the
# postinst and postrm are empty so that CPack adds no explicit ldconfig call besides it.
set(CPACK_DEBIAN_LIB_PACKAGE_NAME ${MESH_DEB_LIB_PACKAGE})
set(CPACK_DEBIAN_LIB_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_LIB_PACKAGE_RECOMMENDS libibverbs1)
set(CPACK_DEBIAN_LIB_PACKAGE_SUGGESTS ${MESH_DEB_TOOLS_PACKAGE})
set(CPACK_DEBIAN_LIB_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/packaging/debian/libnccl-net-mesh/triggers
    ${PROJECT_SOURCE_DIR}/packaging/debian/libnccl-net-mesh/postinst
    ${PROJECT_SOURCE_DIR}/packaging/debian/libnccl-net-mesh/postrm)
set(CPACK_COMPONENT_LIB_DESCRIPTION "NCCL and RCCL network plugin for switchless GPU meshes
${_mesh_about}
This package contains the plugin, libnccl-net-mesh.so (NCCL_NET_PLUGIN=mesh),
librccl-net-mesh.so for RCCL, the deployment guide and examples.")
# The tools: the bench dlopens the plugin of the same version.
set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME ${MESH_DEB_TOOLS_PACKAGE})
set(CPACK_DEBIAN_TOOLS_PACKAGE_SECTION net)
set(CPACK_DEBIAN_TOOLS_PACKAGE_DEPENDS "${MESH_DEB_LIB_PACKAGE} (= ${PROJECT_VERSION})")
set(CPACK_DEBIAN_TOOLS_PACKAGE_SUGGESTS gnuplot-nox)
set(CPACK_COMPONENT_TOOLS_DESCRIPTION "diagnostics and benchmark for the nccl-mesh NCCL plugin
${_mesh_about}
This package contains nccl-mesh-doctor, which checks a host of the mesh
(cables, addresses, RDMA, kernel settings) before NCCL runs on it,
nccl-mesh-bench, which measures links and collectives through the plugin
without a GPU, and nccl-mesh-relayd, the relay agent as a host service
(systemd unit nccl-mesh-relayd.service, not enabled).")
find_program(MESH_DPKG_SHLIBDEPS dpkg-shlibdeps)
find_program(MESH_FILE_COMMAND file)
if(NOT MESH_DPKG_SHLIBDEPS OR NOT MESH_FILE_COMMAND)
  message(STATUS "dpkg-shlibdeps or file not found: the .deb (cpack -G DEB) needs them "
                 "(Debian: dpkg-dev file)")
endif()
include(CPack)
unset(_mesh_tool)
unset(_mesh_page)
unset(_mesh_about)
unset(_mesh_changelog)
unset(_mesh_changelog_head)
unset(_mesh_lib_doc)
unset(_mesh_tools_doc)
