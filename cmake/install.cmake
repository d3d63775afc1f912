# SPDX-License-Identifier: Apache-2.0
# Installed layout of the plugin, included from the top-level CMakeLists.txt right after the
# nccl-net-mesh target:
#   <libdir>/libnccl-net-mesh.so    the name NCCL opens (NCCL_NET_PLUGIN=mesh or the full path)
#   <libdir>/librccl-net-mesh.so    the name RCCL opens: a relative symlink to the file above
#
# Every destination is relative, so the install root is decided when installing, not when
# configuring: `cmake --install build --prefix P`, `DESTDIR=D cmake --install build` and CPack's
# staging all get both names side by side, and nothing is written outside the install root.
# (The symlink is made in the build tree, next to the library, and copied as a symlink by
# install(FILES); install_manifest.txt lists it like any other installed file.)
#
# Components: "plugin" is the install tree's copy (cmake --install). "lib" is the Debian
# package libnccl-net-mesh (cmake/package.cmake): the same two names in the multiarch folder
# lib/<triplet> (Debian's /usr/lib/x86_64-linux-gnu, /usr/lib/aarch64-linux-gnu), where NCCL's
# dlopen("libnccl-net-mesh.so") finds it through ld.so's default search path without
# LD_LIBRARY_PATH. Its rules are EXCLUDE_FROM_ALL, so a plain `cmake --install` writes only the
# tree's copy; cpack installs the "lib" component on its own.
install(TARGETS nccl-net-mesh LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT plugin)
if(CMAKE_LIBRARY_ARCHITECTURE)
  set(MESH_DEB_LIBDIR lib/${CMAKE_LIBRARY_ARCHITECTURE})
else()
  set(MESH_DEB_LIBDIR lib)
endif()
install(TARGETS nccl-net-mesh LIBRARY DESTINATION ${MESH_DEB_LIBDIR} COMPONENT lib
        EXCLUDE_FROM_ALL)

get_target_property(_mesh_out_name nccl-net-mesh OUTPUT_NAME)
if(NOT _mesh_out_name)
  set(_mesh_out_name nccl-net-mesh)
endif()
set(_mesh_plugin_file
    ${CMAKE_SHARED_LIBRARY_PREFIX}${_mesh_out_name}${CMAKE_SHARED_LIBRARY_SUFFIX})
# The library's own build directory when it is a plain path (so RCCL can also use the build
# tree), else a staging folder of this project.
get_target_property(_mesh_lib_dir nccl-net-mesh LIBRARY_OUTPUT_DIRECTORY)
if(NOT _mesh_lib_dir OR _mesh_lib_dir MATCHES "\\$<")
  get_target_property(_mesh_lib_dir nccl-net-mesh BINARY_DIR)
endif()
set(MESH_RCCL_LINK ${_mesh_lib_dir}/librccl-net-mesh.so)
file(MAKE_DIRECTORY ${_mesh_lib_dir})
file(CREATE_LINK ${_mesh_plugin_file} ${MESH_RCCL_LINK} SYMBOLIC)
install(FILES ${MESH_RCCL_LINK} DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT plugin)
install(FILES ${MESH_RCCL_LINK} DESTINATION ${MESH_DEB_LIBDIR} COMPONENT lib EXCLUDE_FROM_ALL)
unset(_mesh_out_name)
unset(_mesh_plugin_file)
unset(_mesh_lib_dir)
