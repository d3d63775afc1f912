# SPDX-License-Identifier: Apache-2.0
# cmake -DNM=nm -DLIB=libnccl-net-mesh.so -P check_exports.cmake
# Fails unless `nm -D --defined-only` lists ncclNetPlugin_v6 ... _v12 and ncclTunerPlugin_v3 ...
# _v5 (NCCL loads the tuner from the net plugin's library), ncclGinPlugin_v11 ... _v13 and
# ncclRmaPlugin_v14, _v15 (NCCL looks for GIN/RMA in the net plugin's library too) as data objects.
execute_process(COMMAND ${NM} -D --defined-only ${LIB} OUTPUT_VARIABLE symbols RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${NM} -D ${LIB} failed (${rc})")
endif()
set(missing "")
foreach(v RANGE 6 12)
  if(NOT symbols MATCHES "[0-9a-f]+ [DdBb] ncclNetPlugin_v${v}\n")
    list(APPEND missing ncclNetPlugin_v${v})
  endif()
endforeach()
foreach(v RANGE 3 5)
  if(NOT symbols MATCHES "[0-9a-f]+ [DdBb] ncclTunerPlugin_v${v}\n")
    list(APPEND missing ncclTunerPlugin_v${v})
  endif()
endforeach()
foreach(sym ncclGinPlugin_v11 ncclGinPlugin_v12 ncclGinPlugin_v13 ncclRmaPlugin_v14
        ncclRmaPlugin_v15)
  if(NOT symbols MATCHES "[0-9a-f]+ [DdBb] ${sym}\n")
    list(APPEND missing ${sym})
  endif()
endforeach()
if(missing)
  message(FATAL_ERROR "${LIB} does not export as data: ${missing}\n${symbols}")
endif()
message(STATUS "nm -D ${LIB}: ncclNetPlugin_v6 ... _v12, ncclTunerPlugin_v3 ... _v5, "
               "ncclGinPlugin_v11 ... _v13, ncclRmaPlugin_v14, _v15 exported")
