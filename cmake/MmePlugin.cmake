# mme_add_plugin(<name> SOURCES <files...> [ENTRY <file>] [LIBRARIES <libs...>]
#                [TESTS <files...>] [TEST_LIBRARIES <libs...>])
#
# Builds one plugin twice from the same sources:
#   mme_plugin_<name>  a static archive (position independent) that unit tests link directly;
#   mme_<name>         the loadable module the `mme` executable finds in lib/mme/plugins.
# ENTRY is the file holding MME_PLUGIN(...) (the exported entry); it goes into the module only,
# so the static archive can be linked next to other plugins without clashing entry symbols.
# TESTS are the plugin's own GoogleTest sources, kept in its folder (usually tests/): they become
# the test program plugin_<name>_tests, linked with the static archive, mme's test support and
# TEST_LIBRARIES (mme_add_plugin_tests below). So a new model family or GPU is one folder, tests
# included.
# The module is built the way DESIGN.md asks: hidden visibility, no undefined symbols, and no
# STB_GNU_UNIQUE symbols (which would silently keep the library from ever unloading).
# (-fno-gnu-unique is GCC's: clang, which the fuzz preset uses, emits no STB_GNU_UNIQUE symbols.)
# mme_add_plugin_tests(<name> SOURCES <files...> [LIBRARIES <libs...>])
#
# A plugin folder's own GoogleTest sources (usually tests/), registered from the folder's own
# CMakeLists.txt: they become the test program plugin_<name>_tests, linked with LIBRARIES (what
# they test) and mme's test support, and run by CTest like every other test (tests/CMakeLists.txt
# builds them once the test support exists). mme_add_plugin(... TESTS ...) calls it; a helper
# library of plugins that is no plugin itself (plugins/adapters/hf_common) calls it directly.
function(mme_add_plugin_tests name)
  cmake_parse_arguments(T "" "" "SOURCES;LIBRARIES" ${ARGN})
  set(tests "")
  foreach(t IN LISTS T_SOURCES)
    list(APPEND tests "${CMAKE_CURRENT_SOURCE_DIR}/${t}")
  endforeach()
  set_property(GLOBAL APPEND PROPERTY MME_PLUGIN_TEST_NAMES ${name})
  set_property(GLOBAL PROPERTY MME_PLUGIN_TESTS_${name} ${tests})
  set_property(GLOBAL PROPERTY MME_PLUGIN_TEST_LIBRARIES_${name} ${T_LIBRARIES})
endfunction()

function(mme_add_plugin name)
  cmake_parse_arguments(P "" "ENTRY" "SOURCES;LIBRARIES;TESTS;TEST_LIBRARIES" ${ARGN})
  if(NOT P_SOURCES)
    message(FATAL_ERROR "mme_add_plugin(${name}): SOURCES is required")
  endif()
  set(static_target mme_plugin_${name})
  add_library(${static_target} STATIC ${P_SOURCES})
  set_target_properties(${static_target} PROPERTIES
    POSITION_INDEPENDENT_CODE ON
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  target_compile_options(${static_target} PRIVATE $<$<CXX_COMPILER_ID:GNU>:-fno-gnu-unique>)
  # A plugin links the SDK (mme::sdk) and what it names in LIBRARIES: a host library only where
  # the plugin is the adapter of a host-side format (spec files, Megatron-LM flags).
  target_link_libraries(${static_target} PUBLIC mme::sdk ${P_LIBRARIES} PRIVATE fmt::fmt mme_warnings)
  target_include_directories(${static_target} PUBLIC "${CMAKE_CURRENT_SOURCE_DIR}")

  if(P_TESTS)
    mme_add_plugin_tests(${name} SOURCES ${P_TESTS} LIBRARIES ${static_target} ${P_TEST_LIBRARIES})
  endif()

  # Every built-in plugin, for programs that link the plugins instead of loading them (the C
  # entry point and the Python module, capi/CMakeLists.txt): the global property
  # MME_BUILTIN_PLUGIN_NAMES lists the plugins with an ENTRY, MME_BUILTIN_PLUGIN_ENTRY_<name> is
  # that file (its MME_PLUGIN(...) names the registration function and the version).
  if(P_ENTRY)
    set_property(GLOBAL APPEND PROPERTY MME_BUILTIN_PLUGIN_NAMES ${name})
    set_property(GLOBAL PROPERTY MME_BUILTIN_PLUGIN_ENTRY_${name} "${CMAKE_CURRENT_SOURCE_DIR}/${P_ENTRY}")
  endif()

  # The fuzz build links the static archives into its targets and needs no loadable module.
  if(P_ENTRY AND NOT MME_BUILD_FUZZ)
    set(module_target mme_${name})
    add_library(${module_target} MODULE ${P_ENTRY})
    set_target_properties(${module_target} PROPERTIES
      PREFIX ""
      OUTPUT_NAME "mme_${name}"
      CXX_VISIBILITY_PRESET hidden
      VISIBILITY_INLINES_HIDDEN ON
      LIBRARY_OUTPUT_DIRECTORY "${MME_PLUGIN_OUTPUT_DIR}"
      BUILD_WITH_INSTALL_RPATH ON
      INSTALL_RPATH "$ORIGIN/../..")
    target_compile_options(${module_target} PRIVATE $<$<CXX_COMPILER_ID:GNU>:-fno-gnu-unique>)
    target_link_options(${module_target} PRIVATE -Wl,--no-undefined)
    target_link_libraries(${module_target} PRIVATE ${static_target} mme_warnings)
    install(TARGETS ${module_target} LIBRARY DESTINATION "${MME_PLUGIN_INSTALL_DIR}" COMPONENT runtime)
    set(MME_BUILTIN_PLUGINS ${MME_BUILTIN_PLUGINS} ${module_target} CACHE INTERNAL "")
  endif()
endfunction()
