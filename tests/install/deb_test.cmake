# cmake -DMME_BUILD_DIR=... -DMME_SOURCE_DIR=... -DMME_PROJECT_VERSION=... -DWORK_DIR=...
#       -DCPACK=... -DDPKG_DEB=... -P deb_test.cmake
#
# `cpack -G DEB` in the build tree gives the runtime and the -dev package with the files and
# dependencies they should have; unpacked anywhere, the runtime package runs and the -dev
# package builds a plugin that it loads.
cmake_minimum_required(VERSION 3.25)
include("${CMAKE_CURRENT_LIST_DIR}/common.cmake")

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
mme_run_ok(cpack COMMAND "${CPACK}" -G DEB -B "${WORK_DIR}/out" --config "${MME_BUILD_DIR}/CPackConfig.cmake")

file(GLOB debs "${WORK_DIR}/out/*.deb")
list(LENGTH debs n)
mme_expect_equal("${n}" "2" "packages made: ${debs}")
set(runtime "")
set(dev "")
foreach(deb IN LISTS debs)
  mme_run_ok(name COMMAND "${DPKG_DEB}" -f "${deb}" Package)
  string(STRIP "${name_out}" name)
  if(name STREQUAL "megatron-memory-estimator")
    set(runtime "${deb}")
  elseif(name STREQUAL "megatron-memory-estimator-dev")
    set(dev "${deb}")
  else()
    mme_fail("unexpected package ${name} (${deb})")
  endif()
  mme_run_ok(version COMMAND "${DPKG_DEB}" -f "${deb}" Version)
  string(STRIP "${version_out}" version)
  mme_expect_equal("${version}" "${MME_PROJECT_VERSION}" "version of ${name}")
endforeach()

# The runtime package: the executable, the framework libraries, the plugins, the models, the docs.
mme_run_ok(list COMMAND "${DPKG_DEB}" -c "${runtime}")
foreach(path ./usr/bin/mme ./usr/lib/libmme_sdk.so.${MME_PROJECT_VERSION} ./usr/lib/libmme_engine.so.${MME_PROJECT_VERSION}
             ./usr/lib/libmme_report.so.${MME_PROJECT_VERSION} ./usr/lib/mme/plugins/mme_hw_nvidia_hopper.so
             ./usr/lib/mme/plugins/mme_json_profiles.so ./usr/lib/mme/plugins/mme_adapter_generic_hf.so
             ./usr/share/mme/models/Qwen--Qwen3-8B/config.json ./usr/share/mme/schema/estimate.schema.json
             ./usr/share/mme/schema/spec-file.schema.json
             ./usr/share/doc/megatron-memory-estimator/README.md
             ./usr/share/bash-completion/completions/mme ./usr/share/zsh/vendor-completions/_mme
             ./usr/share/fish/vendor_completions.d/mme.fish ./usr/share/man/man1/mme.1
             ./usr/share/man/man1/mme-estimate.1 ./usr/share/man/man1/mme-plan.1
             ./usr/share/man/man1/mme-completion.1)
  mme_expect_contains("${list_out}" " ${path}\n" "contents of the runtime package")
endforeach()
foreach(path ./usr/include/ ./usr/lib/cmake/ "./usr/lib/libmme_sdk.so " "./usr/lib/libmme_engine.so ")
  mme_expect_not_contains("${list_out}" "${path}" "contents of the runtime package")
endforeach()
mme_run_ok(depends COMMAND "${DPKG_DEB}" -f "${runtime}" Depends)
foreach(lib libc6 libstdc++6 libfmt libspdlog libboost-program-options)
  mme_expect_contains("${depends_out}" "${lib}" "Depends of the runtime package (dpkg-shlibdeps)")
endforeach()
mme_run_ok(recommends COMMAND "${DPKG_DEB}" -f "${runtime}" Recommends)
mme_expect_contains("${recommends_out}" "libcurl4" "Recommends of the runtime package (downloads)")

# The -dev package: headers, the link-time libmme_*.so, the CMake package, the examples.
mme_run_ok(list COMMAND "${DPKG_DEB}" -c "${dev}")
foreach(path ./usr/include/mme/sdk/plugin.hpp ./usr/include/mme/engine/registry.hpp ./usr/lib/cmake/mme/mmeConfig.cmake
             ./usr/lib/cmake/mme/mmeConfigVersion.cmake ./usr/lib/cmake/mme/mmeTargets.cmake
             ./usr/lib/cmake/mme/mmePluginHelpers.cmake
             ./usr/share/doc/megatron-memory-estimator/examples/acme_model_family/config.json)
  mme_expect_contains("${list_out}" " ${path}\n" "contents of the dev package")
endforeach()
mme_expect_contains("${list_out}" " ./usr/lib/libmme_sdk.so -> libmme_sdk.so." "the libmme_sdk.so link in the dev package")
mme_expect_not_contains("${list_out}" "./usr/bin/mme" "contents of the dev package")
mme_run_ok(depends COMMAND "${DPKG_DEB}" -f "${dev}" Depends)
foreach(dep "megatron-memory-estimator (= ${MME_PROJECT_VERSION})" nlohmann-json3-dev libspdlog-dev libfmt-dev)
  mme_expect_contains("${depends_out}" "${dep}" "Depends of the dev package")
endforeach()

# Unpacked anywhere, the runtime package works: every path it uses is relative.
mme_run_ok(x COMMAND "${DPKG_DEB}" -x "${runtime}" "${WORK_DIR}/root")
mme_run_ok(hw COMMAND "${WORK_DIR}/root/usr/bin/mme" hardware --json)
mme_json_find(h100 "${hw_out}" hardware name H100-SXM-80GB)
if(NOT h100)
  mme_fail("the unpacked package's mme lists no H100:\n${hw_out}")
endif()
mme_run_ok(page COMMAND "${WORK_DIR}/root/usr/bin/mme" help --man plan)
file(READ "${WORK_DIR}/root/usr/share/man/man1/mme-plan.1" packaged_page)
mme_expect_equal("${packaged_page}" "${page_out}" "the packaged mme-plan.1")
mme_run_ok(est COMMAND "${WORK_DIR}/root/usr/bin/mme" estimate Qwen/Qwen3-8B --json)
mme_expect_contains("${est_out}" "\"schema_version\": 1" "estimate with the unpacked package")

# The -dev package unpacked next to it is a working SDK: a plugin builds against it and loads.
mme_run_ok(x COMMAND "${DPKG_DEB}" -x "${dev}" "${WORK_DIR}/root")
mme_run_ok(configure COMMAND "${CMAKE_COMMAND}" -S "${MME_SOURCE_DIR}/examples/acme_hardware"
                             -B "${WORK_DIR}/build-acme_hardware" "-DCMAKE_PREFIX_PATH=${WORK_DIR}/root/usr")
mme_run_ok(build COMMAND "${CMAKE_COMMAND}" --build "${WORK_DIR}/build-acme_hardware")
mme_run_ok(hw COMMAND "${WORK_DIR}/root/usr/bin/mme" hardware --json
                      --plugin-dir "${WORK_DIR}/build-acme_hardware/plugins")
mme_json_find(x1 "${hw_out}" hardware name ACME-X1-96GB)
if(NOT x1)
  mme_fail("a plugin built against the unpacked -dev package did not load:\n${hw_out}\n${hw_err}")
endif()

message(STATUS "cpack -G DEB: ok")
