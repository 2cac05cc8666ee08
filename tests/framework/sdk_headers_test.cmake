# cmake -DCXX=... -DINCLUDE_DIR=... -DWORK_DIR=... -P sdk_headers_test.cmake
#
# What the plugin entry header costs a plugin (issue 15): <mme/sdk/plugin.hpp> may pull in no
# Boost, nlohmann/json.hpp, spdlog, fmt or yaml-cpp header, and at most 8 of mme's own headers.
# The compiler's -H lists every header it opens, with its path.
cmake_minimum_required(VERSION 3.25)
file(MAKE_DIRECTORY "${WORK_DIR}")
file(WRITE "${WORK_DIR}/entry_only.cpp" "#include <mme/sdk/plugin.hpp>\n")
execute_process(COMMAND "${CXX}" -std=c++20 -H -fsyntax-only -I "${INCLUDE_DIR}" "${WORK_DIR}/entry_only.cpp"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE headers)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "FAILED: <mme/sdk/plugin.hpp> does not compile on its own:\n${headers}")
endif()
string(REGEX MATCHALL "[^\n]*/(boost|spdlog|fmt|yaml-cpp)/[^\n]*" forbidden "${headers}")
string(REGEX MATCHALL "[^\n]*/nlohmann/json\\.hpp[^\n]*" full_json "${headers}")
if(forbidden OR full_json)
  message(FATAL_ERROR "FAILED: <mme/sdk/plugin.hpp> pulls in ${forbidden} ${full_json}")
endif()
string(REGEX MATCHALL "[^\n]*/mme/[a-z_/]+\\.hpp" own "${headers}")
list(LENGTH own count)
if(count GREATER 8)
  message(FATAL_ERROR "FAILED: <mme/sdk/plugin.hpp> pulls in ${count} of mme's own headers (at most 8):\n${own}")
endif()
if(count EQUAL 0)
  message(FATAL_ERROR "FAILED: -H listed no mme header at all; the check reads nothing:\n${headers}")
endif()
message(STATUS "<mme/sdk/plugin.hpp>: ${count} of mme's headers, no Boost, json.hpp, spdlog, fmt or yaml-cpp")
