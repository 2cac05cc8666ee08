# Install layout, the CMake package for out-of-tree plugins (find_package(mme)) and the Debian
# packages (cpack -G DEB). Included at the end of the top-level CMakeLists.txt.
#
#   bin/mme                       RUNPATH $ORIGIN/../lib
#   lib/libmme_<library>.so.*     the framework libraries: sdk, engine, inputs, planner, validate,
#                                 report (the .so link-time names in the dev package)
#   lib/mme/plugins/*.so          RUNPATH $ORIGIN/../..
#   share/mme/models/             the bundled configs
#   share/bash-completion/, share/zsh/, share/fish/, share/man/man1/
#                                 shell completion and man pages (cli/CMakeLists.txt)
#   include/mme/<library>/*.hpp  the headers: sdk/ for plugins, the host libraries beside it
#   lib/cmake/mme/                mmeConfig.cmake, mmeConfigVersion.cmake, mmeTargets*.cmake,
#                                 mmePluginHelpers.cmake
#   lib/pkgconfig/mme.pc          the same SDK for pkg-config
#   share/doc/<project>/          README, docs, the out-of-tree examples
#
# Every path the executable uses is relative to its own folder (plugins: ../lib/mme/plugins,
# models: ../share/mme/models, the libraries: RUNPATH), so an installed tree works wherever it is moved.
include(CMakePackageConfigHelpers)

set(MME_CMAKE_INSTALL_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/mme")

# The plugin ABI tag of this toolchain, recorded in mmeConfig.cmake so mme_add_plugin() can
# refuse a compiler whose plugins the installed mme would reject. Compiled, never run.
# (Separators are commas: file(STRINGS) escapes semicolons.) Recomputed when the compiler,
# its flags or nlohmann_json change.
set(probe_key "${CMAKE_CXX_COMPILER}|${CMAKE_CXX_COMPILER_VERSION}|${CMAKE_CXX_FLAGS}|${nlohmann_json_VERSION}")
if(NOT MME_ABI_PROBE_KEY STREQUAL probe_key)
  set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)
  set(probe_dir "${CMAKE_BINARY_DIR}/CMakeFiles/mme_abi_probe")
  try_compile(probe_ok "${probe_dir}" SOURCES "${CMAKE_CURRENT_LIST_DIR}/mme_abi_probe.cpp"
              CMAKE_FLAGS "-DINCLUDE_DIRECTORIES=${PROJECT_SOURCE_DIR}/framework/include"
              LINK_LIBRARIES nlohmann_json::nlohmann_json
              CXX_STANDARD 20 CXX_STANDARD_REQUIRED ON
              OUTPUT_VARIABLE probe_out
              COPY_FILE "${probe_dir}/probe.a")
  unset(CMAKE_TRY_COMPILE_TARGET_TYPE)
  if(NOT probe_ok)
    message(FATAL_ERROR "cannot compile cmake/mme_abi_probe.cpp to read the plugin ABI tag:\n${probe_out}")
  endif()
  file(STRINGS "${probe_dir}/probe.a" probe REGEX "MME_ABI_TAG=[^,]*,MME_GLIBCXX_USE_CXX11_ABI=[^,]*," LIMIT_COUNT 1)
  if(NOT probe MATCHES "MME_ABI_TAG=([^,]*),MME_GLIBCXX_USE_CXX11_ABI=([^,]*),")
    message(FATAL_ERROR "cannot read the plugin ABI tag from ${probe_dir}/probe.a")
  endif()
  set(MME_ABI_TAG "${CMAKE_MATCH_1}" CACHE INTERNAL "the plugin ABI tag of this toolchain")
  set(MME_GLIBCXX_USE_CXX11_ABI "${CMAKE_MATCH_2}" CACHE INTERNAL "_GLIBCXX_USE_CXX11_ABI of this toolchain")
  set(MME_ABI_PROBE_KEY "${probe_key}" CACHE INTERNAL "what MME_ABI_TAG was computed for")
endif()
message(STATUS "mme plugin ABI tag: ${MME_ABI_TAG}")

set(MME_PLUGIN_API_VERSION "")
# Read at configure time: a change of the header must configure again (mme.pc, mmeConfig).
set_property(DIRECTORY "${PROJECT_SOURCE_DIR}" APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
             "${PROJECT_SOURCE_DIR}/framework/include/mme/sdk/version.hpp")
file(STRINGS "${PROJECT_SOURCE_DIR}/framework/include/mme/sdk/version.hpp" api_line
     REGEX "^#define MME_PLUGIN_API_VERSION [0-9]+")
string(REGEX REPLACE "^#define MME_PLUGIN_API_VERSION ([0-9]+).*" "\\1" MME_PLUGIN_API_VERSION "${api_line}")
string(REGEX MATCH "^[0-9]+\\.[0-9]+" MME_NLOHMANN_JSON_VERSION_MAJOR_MINOR "${nlohmann_json_VERSION}")
set(MME_BOOST_VERSION_MAJOR_MINOR "${Boost_MAJOR_VERSION}.${Boost_MINOR_VERSION}")

install(EXPORT mmeTargets NAMESPACE mme:: DESTINATION "${MME_CMAKE_INSTALL_DIR}" COMPONENT dev)
configure_package_config_file("${CMAKE_CURRENT_LIST_DIR}/mmeConfig.cmake.in"
  "${CMAKE_BINARY_DIR}/cmake/mmeConfig.cmake"
  INSTALL_DESTINATION "${MME_CMAKE_INSTALL_DIR}"
  PATH_VARS CMAKE_INSTALL_BINDIR)
# The libraries' sonames carry major.minor, so a plugin needs an SDK of the same minor version.
write_basic_package_version_file("${CMAKE_BINARY_DIR}/cmake/mmeConfigVersion.cmake"
  VERSION "${PROJECT_VERSION}" COMPATIBILITY SameMinorVersion)
install(FILES "${CMAKE_BINARY_DIR}/cmake/mmeConfig.cmake" "${CMAKE_BINARY_DIR}/cmake/mmeConfigVersion.cmake"
              "${CMAKE_CURRENT_LIST_DIR}/mmePluginHelpers.cmake"
        DESTINATION "${MME_CMAKE_INSTALL_DIR}" COMPONENT dev)

# mme.pc for pkg-config users (C++ builds without CMake): the same SDK, its prefix found from the
# file's own folder (${pcfiledir}).
file(RELATIVE_PATH MME_PC_TO_PREFIX "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
string(REGEX REPLACE "/$" "" MME_PC_TO_PREFIX "${MME_PC_TO_PREFIX}")
configure_file("${CMAKE_CURRENT_LIST_DIR}/mme.pc.in" "${CMAKE_BINARY_DIR}/cmake/mme.pc" @ONLY)
install(FILES "${CMAKE_BINARY_DIR}/cmake/mme.pc" DESTINATION "${CMAKE_INSTALL_LIBDIR}/pkgconfig" COMPONENT dev)

install(FILES "${PROJECT_SOURCE_DIR}/README.md" DESTINATION "${CMAKE_INSTALL_DOCDIR}" COMPONENT runtime)
# The docs and the pictures they show (docs/web.md's screenshot).
install(DIRECTORY "${PROJECT_SOURCE_DIR}/docs/" DESTINATION "${CMAKE_INSTALL_DOCDIR}" COMPONENT runtime
        FILES_MATCHING PATTERN "*.md" PATTERN "*.jpg" PATTERN "*.png" PATTERN "*.svg")
install(DIRECTORY "${PROJECT_SOURCE_DIR}/examples/" DESTINATION "${CMAKE_INSTALL_DOCDIR}/examples" COMPONENT dev
        PATTERN "build" EXCLUDE)

# Debian packages: `cpack -G DEB` in the build tree gives
#   megatron-memory-estimator      the mme executable, its libraries, the plugins, the models, docs;
#   megatron-memory-estimator-dev  headers, the libmme_*.so links, the CMake package, the examples.
set(CPACK_PACKAGE_NAME "megatron-memory-estimator")
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGE_VENDOR "megatron-memory-estimator")
set(CPACK_PACKAGE_CONTACT "megatron-memory-estimator maintainers <mme@localhost>")
set(CPACK_PACKAGING_INSTALL_PREFIX "/usr")
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime dev)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION "science")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME "megatron-memory-estimator")
# (CPack puts CPACK_PACKAGE_DESCRIPTION_SUMMARY first: these are the long descriptions.)
set(CPACK_DEBIAN_RUNTIME_DESCRIPTION
    "mme estimates, per pipeline stage, the memory each GPU needs to train a model with Megatron-LM under a parallel layout, and whether it fits the known GPUs. With its plugins and bundled model configs.")
# Shared-library dependencies (libfmt, libspdlog, Boost.ProgramOptions, ...) are
# computed by dpkg-shlibdeps (dpkg-dev) from the binaries.
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SHLIBDEPS ON)
# libcurl is opened with dlopen("libcurl.so.4") only to download from the Hugging Face Hub.
set(CPACK_DEBIAN_RUNTIME_PACKAGE_RECOMMENDS "libcurl4 (>= 7.62)")
# Where dpkg-shlibdeps finds the libmme_* libraries, which the executable and plugins need (relative to the package root).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS "usr/${CMAKE_INSTALL_LIBDIR}")
set(CPACK_DEBIAN_DEV_PACKAGE_NAME "megatron-memory-estimator-dev")
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION "libdevel")
set(CPACK_DEBIAN_DEV_DESCRIPTION
    "The plugin SDK of mme: headers, the libmme_*.so links, the CMake package (find_package(mme), mme_add_plugin) and examples, for building config-adapter, layer-memory and hardware plugins out of tree.")
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
    "megatron-memory-estimator (= ${PROJECT_VERSION}), nlohmann-json3-dev (>= ${MME_NLOHMANN_JSON_VERSION_MAJOR_MINOR}), libboost${MME_BOOST_VERSION_MAJOR_MINOR}-dev | libboost-dev (>= ${MME_BOOST_VERSION_MAJOR_MINOR}), libspdlog-dev, libfmt-dev, cmake (>= 3.25), g++")
include(CPack)
