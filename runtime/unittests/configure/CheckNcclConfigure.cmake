# How the runtime's configuration finds NCCL, checked by configuring the
# runtime project twice (cmake -P, from CTest):
#  1. a pip wheel's layout (nvidia/nccl/{include,lib}, libnccl.so.2 only) at
#     FSDPRT_NCCL_ROOT is the NCCL that gets used;
#  2. NCCL requested but nowhere to be found is a configure error naming
#     FSDPRT_NCCL_ROOT, never a silently NCCL-less runtime.
# Inputs: SOURCE_DIR (runtime/), WORK_DIR, NCCL_HEADER, NCCL_LIBRARY (the
# real files, which the fake wheel links to).
file(REMOVE_RECURSE "${WORK_DIR}")
set(wheel "${WORK_DIR}/site-packages/nvidia/nccl")
file(MAKE_DIRECTORY "${wheel}/include" "${wheel}/lib")
file(COPY "${NCCL_HEADER}" DESTINATION "${wheel}/include")
file(CREATE_LINK "${NCCL_LIBRARY}" "${wheel}/lib/libnccl.so.2" SYMBOLIC)
# Neither backend's dependencies matter here: configure a runtime with the
# CPU backend only plus NCCL.
set(common -DFSDPRT_WITH_CUDA=OFF -DFSDPRT_WITH_GLOO=OFF
           -DFSDPRT_BUILD_TESTS=OFF -DFSDPRT_BUILD_BENCH=OFF -G Ninja)

execute_process(
  COMMAND ${CMAKE_COMMAND} -S "${SOURCE_DIR}" -B "${WORK_DIR}/wheel"
          ${common} -DFSDPRT_WITH_NCCL=ON -DFSDPRT_NCCL_ROOT=${wheel}
  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "configuring with the wheel layout failed:\n${out}${err}")
endif()
file(STRINGS "${WORK_DIR}/wheel/CMakeCache.txt" found
     REGEX "^FSDPRT_NCCL_LIBRARY:FILEPATH=")
if(NOT found STREQUAL "FSDPRT_NCCL_LIBRARY:FILEPATH=${wheel}/lib/libnccl.so.2")
  message(FATAL_ERROR "expected the wheel's libnccl.so.2, found '${found}'")
endif()

# Every find rerooted under a directory that does not exist: nothing found.
execute_process(
  COMMAND ${CMAKE_COMMAND} -S "${SOURCE_DIR}" -B "${WORK_DIR}/missing"
          ${common} -DFSDPRT_WITH_CPU_BACKEND=OFF -DFSDPRT_WITH_NCCL=ON
          -DFSDPRT_NLOHMANN_JSON_INCLUDE_DIR=${NLOHMANN_DIR}
          -DCMAKE_FIND_ROOT_PATH=${WORK_DIR}/nothing
          -DCMAKE_FIND_ROOT_PATH_MODE_LIBRARY=ONLY
          -DCMAKE_FIND_ROOT_PATH_MODE_INCLUDE=ONLY
          -DCMAKE_FIND_ROOT_PATH_MODE_PACKAGE=ONLY
  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(status EQUAL 0)
  message(FATAL_ERROR "configuring without NCCL succeeded:\n${out}")
endif()
string(REPLACE "\n  " " " err "${err}")
if(NOT err MATCHES "NCCL not found.*Set FSDPRT_NCCL_ROOT")
  message(FATAL_ERROR "expected 'NCCL not found ... Set FSDPRT_NCCL_ROOT', got:\n${err}")
endif()
file(REMOVE_RECURSE "${WORK_DIR}")
message(STATUS "NCCL: the wheel layout is found and a missing NCCL is an error")
