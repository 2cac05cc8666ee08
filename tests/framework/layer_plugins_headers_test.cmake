# cmake -DCXX=... -DINCLUDE_DIR=... -DPLUGINS_DIR=... -P layer_plugins_headers_test.cmake
#
# A layer-memory plugin's sources (plugins/layers/<kind>/*.cpp) pull in no nlohmann/json.hpp: a
# block model reads a ModelSpec, never a JSON document, and the size bounds it checks are
# mme/sdk/limits.hpp's (issue 31). The preprocessor's -M lists every header a source opens, with
# its path (only preprocessing: the check costs a fraction of a compile).
cmake_minimum_required(VERSION 3.25)
file(GLOB sources "${PLUGINS_DIR}/*/*.cpp")
if(NOT sources)
  message(FATAL_ERROR "FAILED: no source under ${PLUGINS_DIR}; the check reads nothing")
endif()
foreach(source IN LISTS sources)
  get_filename_component(folder "${source}" DIRECTORY)
  execute_process(COMMAND "${CXX}" -std=c++20 -M -I "${INCLUDE_DIR}" -I "${folder}" "${source}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE headers ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "FAILED: ${source} does not preprocess on its own:\n${err}")
  endif()
  string(REGEX MATCHALL "/mme/sdk/[a-z_]+\\.hpp" own "${headers}")
  if(NOT own)
    message(FATAL_ERROR "FAILED: -M listed no mme header for ${source}; the check reads nothing:\n${headers}")
  endif()
  string(REGEX MATCHALL "[^ \n]*/nlohmann/json\\.hpp" full_json "${headers}")
  if(full_json)
    message(FATAL_ERROR "FAILED: ${source} pulls in ${full_json}")
  endif()
endforeach()
list(LENGTH sources count)
message(STATUS "${count} layer plugin sources, none pulls in nlohmann/json.hpp")
