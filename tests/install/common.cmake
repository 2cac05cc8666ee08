# Helpers of the install tests (cmake -P scripts): running commands, checking, reading JSON.

# mme_run(<prefix> COMMAND <cmd...> [WORKING_DIRECTORY <dir>]): runs the command and sets
# <prefix>_rc, <prefix>_out and <prefix>_err.
function(mme_run prefix)
  cmake_parse_arguments(R "" "WORKING_DIRECTORY" "COMMAND" ${ARGN})
  if(NOT R_WORKING_DIRECTORY)
    set(R_WORKING_DIRECTORY "${WORK_DIR}")
  endif()
  execute_process(COMMAND ${R_COMMAND} WORKING_DIRECTORY "${R_WORKING_DIRECTORY}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(${prefix}_rc "${rc}" PARENT_SCOPE)
  set(${prefix}_out "${out}" PARENT_SCOPE)
  set(${prefix}_err "${err}" PARENT_SCOPE)
endfunction()

# mme_run_ok(<prefix> COMMAND ...): as mme_run, failing the test unless the command exits 0.
function(mme_run_ok prefix)
  mme_run(r ${ARGN})
  if(NOT r_rc STREQUAL "0")
    list(JOIN ARGN " " cmd)
    message(FATAL_ERROR "FAILED (exit ${r_rc}): ${cmd}\n--- stdout ---\n${r_out}\n--- stderr ---\n${r_err}")
  endif()
  set(${prefix}_out "${r_out}" PARENT_SCOPE)
  set(${prefix}_err "${r_err}" PARENT_SCOPE)
endfunction()

function(mme_fail)
  list(JOIN ARGN "" what)
  message(FATAL_ERROR "FAILED: ${what}")
endfunction()

function(mme_expect_exists)
  foreach(path IN LISTS ARGN)
    if(NOT EXISTS "${path}")
      mme_fail("${path} does not exist")
    endif()
  endforeach()
endfunction()

function(mme_expect_contains text needle what)
  string(FIND "${text}" "${needle}" at)
  if(at EQUAL -1)
    mme_fail("${what}: '${needle}' not found in:\n${text}")
  endif()
endfunction()

function(mme_expect_not_contains text needle what)
  string(FIND "${text}" "${needle}" at)
  if(NOT at EQUAL -1)
    mme_fail("${what}: '${needle}' found in:\n${text}")
  endif()
endfunction()

function(mme_expect_equal actual expected what)
  if(NOT "${actual}" STREQUAL "${expected}")
    mme_fail("${what}: expected '${expected}', got '${actual}'")
  endif()
endfunction()

# mme_json_find(<out> <json> <array-key> <field> <value>): the element of the top-level array
# <array-key> whose <field> is <value> (as JSON text), or "" if there is none.
function(mme_json_find out json array field value)
  string(JSON n LENGTH "${json}" ${array})
  set(found "")
  if(n GREATER 0)
    math(EXPR last "${n} - 1")
    foreach(i RANGE ${last})
      string(JSON v ERROR_VARIABLE missing GET "${json}" ${array} ${i} ${field})
      if(v STREQUAL "${value}")
        string(JSON found GET "${json}" ${array} ${i})
        break()
      endif()
    endforeach()
  endif()
  set(${out} "${found}" PARENT_SCOPE)
endfunction()

# The plugin API version of the headers in <include dir>.
function(mme_read_api_version out include_dir)
  file(STRINGS "${include_dir}/mme/sdk/version.hpp" line REGEX "^#define MME_PLUGIN_API_VERSION [0-9]+")
  string(REGEX REPLACE "^#define MME_PLUGIN_API_VERSION ([0-9]+).*" "\\1" v "${line}")
  set(${out} "${v}" PARENT_SCOPE)
endfunction()
