# SPDX-License-Identifier: Apache-2.0
# Every plugin log line starts with "NET/Mesh : " (src/util/log.cc adds it): a message that
# starts with the prefix again prints "NET/Mesh : NET/Mesh: ..." (issue 29). Fails on any string
# literal in src/ (outside the logger and the tools, which parse the prefix) that begins with it.
file(GLOB_RECURSE sources ${SRC}/*.cc ${SRC}/*.h)
set(bad "")
foreach(f ${sources})
  if(f MATCHES "/src/util/log\\.(cc|h)$" OR f MATCHES "/src/tools/")
    continue()
  endif()
  file(STRINGS ${f} lines REGEX "\"NET/Mesh")
  foreach(l ${lines})
    string(STRIP "${l}" l)
    string(REPLACE ";" "," l "${l}")
    list(APPEND bad "${f}: ${l}")
  endforeach()
endforeach()
if(bad)
  string(REPLACE ";" "\n" bad "${bad}")
  message(FATAL_ERROR "log messages that repeat the NET/Mesh prefix:\n${bad}")
endif()
message(STATUS "no log message repeats the NET/Mesh prefix")
