# mme_add_plugin(<name> SOURCES <files...> [LIBRARIES <libs...>] [OUTPUT_DIRECTORY <dir>])
#
# For plugins built outside the mme source tree against the installed SDK (find_package(mme)).
# Builds <name>.so, a loadable module `mme --plugin-dir DIR` loads, from SOURCES, one of which
# holds MME_PLUGIN(...). It applies what the host needs from a plugin:
#   - C++20, linked to mme::sdk (the plugin SDK: libmme_sdk, its headers and nlohmann_json);
#   - hidden visibility, so the entry is the only exported symbol;
#   - -fno-gnu-unique, so the library can be unloaded;
#   - -Wl,--no-undefined, so a missing symbol fails the link, not the load;
#   - the standard-library ABI mme was built with (_GLIBCXX_USE_CXX11_ABI), checked once per
#     build tree: if this compiler would give another MME_ABI_TAG, configuring fails here
#     instead of the host rejecting the plugin at load time.
# The module lands in OUTPUT_DIRECTORY (default ${CMAKE_BINARY_DIR}/plugins). To install it
# where the installed `mme` finds it without --plugin-dir:
#   install(TARGETS <name> LIBRARY DESTINATION ${MME_PLUGIN_INSTALL_DIR})
include_guard(GLOBAL)

# Compiles (never runs) a probe against mme::sdk with this project's compiler and reads the
# MME_ABI_TAG it gives out of the object file; fails the configuration if it is not the one
# the installed mme was built with. Once per build tree.
function(_mme_check_abi_tag)
  if(MME_ABI_TAG_CHECKED STREQUAL "${MME_ABI_TAG}" OR NOT MME_ABI_TAG)
    return()
  endif()
  set(dir "${CMAKE_BINARY_DIR}/CMakeFiles/mme_abi_check")
  file(WRITE "${dir}/abi_probe.cpp"
       "#include <mme/sdk/version.hpp>\n"
       "extern const char mme_abi_probe[];\n"
       "const char mme_abi_probe[] = \"MME_ABI_TAG=\" MME_ABI_TAG \",\";\n")
  set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)
  set(defs "")
  if(MME_GLIBCXX_USE_CXX11_ABI MATCHES "^[01]$")
    set(defs "-D_GLIBCXX_USE_CXX11_ABI=${MME_GLIBCXX_USE_CXX11_ABI}")
  endif()
  try_compile(ok "${dir}/build" SOURCES "${dir}/abi_probe.cpp"
              LINK_LIBRARIES mme::sdk
              COMPILE_DEFINITIONS ${defs}
              CXX_STANDARD 20 CXX_STANDARD_REQUIRED ON
              OUTPUT_VARIABLE out
              COPY_FILE "${dir}/probe.a")
  if(NOT ok)
    message(FATAL_ERROR "mme_add_plugin: cannot compile against the mme SDK with this compiler "
                        "(${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION}):\n${out}")
  endif()
  file(STRINGS "${dir}/probe.a" probe REGEX "MME_ABI_TAG=[^,]*," LIMIT_COUNT 1)
  string(REGEX REPLACE ".*MME_ABI_TAG=([^,]*),.*" "\\1" tag "${probe}")
  if(NOT tag STREQUAL MME_ABI_TAG)
    message(FATAL_ERROR
      "mme_add_plugin: this compiler (${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION}) builds plugins with "
      "the C++ ABI '${tag}', but the installed mme was built with '${MME_ABI_TAG}': mme would reject them at load "
      "time. Use the compiler, standard library and nlohmann_json version mme was built with.")
  endif()
  set(MME_ABI_TAG_CHECKED "${MME_ABI_TAG}" CACHE INTERNAL "the mme ABI tag this build tree's compiler matches")
endfunction()

function(mme_add_plugin name)
  cmake_parse_arguments(P "" "OUTPUT_DIRECTORY" "SOURCES;LIBRARIES" ${ARGN})
  if(NOT P_SOURCES)
    message(FATAL_ERROR "mme_add_plugin(${name}): SOURCES is required (one of them holds MME_PLUGIN(...))")
  endif()
  if(P_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "mme_add_plugin(${name}): unknown arguments ${P_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT P_OUTPUT_DIRECTORY)
    set(P_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}/plugins")
  endif()
  _mme_check_abi_tag()
  add_library(${name} MODULE ${P_SOURCES})
  set_target_properties(${name} PROPERTIES
    PREFIX ""
    CXX_STANDARD 20
    CXX_STANDARD_REQUIRED ON
    CXX_EXTENSIONS OFF
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    LIBRARY_OUTPUT_DIRECTORY "${P_OUTPUT_DIRECTORY}")
  target_compile_options(${name} PRIVATE -fno-gnu-unique)
  if(MME_GLIBCXX_USE_CXX11_ABI MATCHES "^[01]$")
    target_compile_definitions(${name} PRIVATE _GLIBCXX_USE_CXX11_ABI=${MME_GLIBCXX_USE_CXX11_ABI})
  endif()
  target_link_options(${name} PRIVATE -Wl,--no-undefined)
  target_link_libraries(${name} PRIVATE mme::sdk ${P_LIBRARIES})
endfunction()
