# cmake -DMME_BUILD_DIR=... -DMME_SOURCE_DIR=... -DMME_PROJECT_VERSION=... -DWORK_DIR=... -P install_test.cmake
#
# 1. cmake --install the build tree into WORK_DIR/prefix and check the layout;
# 2. move the prefix to WORK_DIR/moved (nothing may point back at the old place);
# 3. build examples/acme_hardware, examples/acme_model_family and a wrong-API-version plugin
#    against the moved prefix with only -DCMAKE_PREFIX_PATH;
# 4. run the moved `mme` with --plugin-dir on them and check what it says.
cmake_minimum_required(VERSION 3.25)
include("${CMAKE_CURRENT_LIST_DIR}/common.cmake")

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(first "${WORK_DIR}/prefix")
set(prefix "${WORK_DIR}/moved")

# 1. Install.
mme_run_ok(install COMMAND "${CMAKE_COMMAND}" --install "${MME_BUILD_DIR}" --prefix "${first}")
string(REGEX MATCH "^[0-9]+\\.[0-9]+" so_version "${MME_PROJECT_VERSION}")
# The framework libraries (framework/CMakeLists.txt): each with its soname link and its dev link.
set(libraries sdk engine inputs planner validate report commands)
set(library_files "")
foreach(lib IN LISTS libraries)
  list(APPEND library_files "${first}/lib/libmme_${lib}.so.${MME_PROJECT_VERSION}" "${first}/lib/libmme_${lib}.so.${so_version}"
       "${first}/lib/libmme_${lib}.so")
endforeach()
mme_expect_exists(
  "${first}/bin/mme"
  ${library_files}
  "${first}/lib/mme/plugins/mme_hw_nvidia_hopper.so" "${first}/lib/mme/plugins/mme_json_profiles.so"
  "${first}/lib/mme/plugins/mme_adapter_generic_hf.so" "${first}/lib/mme/plugins/mme_layer_gqa.so"
  "${first}/share/mme/models/Qwen--Qwen3-8B/config.json"
  "${first}/share/mme/schema/estimate.schema.json" "${first}/share/mme/schema/plan.schema.json"
  "${first}/share/mme/schema/spec-file.schema.json" "${first}/share/mme/schema/setup.schema.json"
  "${first}/share/mme/schema/hardware-profile.schema.json"
  "${first}/include/mme/sdk/plugin.hpp" "${first}/include/mme/sdk/registrar.hpp" "${first}/include/mme/sdk/version.hpp"
  "${first}/include/mme/engine/registry.hpp" "${first}/include/mme/report/render_estimate.hpp"
  "${first}/lib/cmake/mme/mmeConfig.cmake" "${first}/lib/cmake/mme/mmeConfigVersion.cmake"
  "${first}/lib/cmake/mme/mmeTargets.cmake" "${first}/lib/cmake/mme/mmePluginHelpers.cmake"
  "${first}/share/doc/megatron-memory-estimator/README.md"
  "${first}/share/doc/megatron-memory-estimator/plugin-authoring.md"
  "${first}/share/doc/megatron-memory-estimator/examples/acme_hardware/CMakeLists.txt"
  # Shell completion and man pages (cli/CMakeLists.txt), where bash-completion, zsh, fish and man look.
  "${first}/share/bash-completion/completions/mme" "${first}/share/zsh/vendor-completions/_mme"
  "${first}/share/fish/vendor_completions.d/mme.fish" "${first}/share/man/man1/mme.1")
# A man page for every command `mme help` lists, and the installed pages are what the
# installed mme writes.
mme_run_ok(help COMMAND "${first}/bin/mme" help)
string(REGEX MATCH "\nCommands:\n([^\n]+\n)+" listing "${help_out}")
string(REGEX MATCHALL "\n  [a-z]+" listed "${listing}")
list(LENGTH listed n_listed)
if(n_listed LESS 10)
  mme_fail("mme help lists only ${n_listed} commands:\n${help_out}")
endif()
foreach(entry IN LISTS listed)
  string(STRIP "${entry}" command)
  mme_expect_exists("${first}/share/man/man1/mme-${command}.1")
endforeach()
mme_run_ok(page COMMAND "${first}/bin/mme" help --man estimate)
file(READ "${first}/share/man/man1/mme-estimate.1" installed_page)
mme_expect_equal("${installed_page}" "${page_out}" "the installed mme-estimate.1")
mme_run_ok(script COMMAND "${first}/bin/mme" completion bash)
file(READ "${first}/share/bash-completion/completions/mme" installed_script)
mme_expect_equal("${installed_script}" "${script_out}" "the installed bash completion")
# man -l (or groff) formats an installed page.
find_program(MAN man)
find_program(GROFF groff)
if(MAN)
  set(ENV{MANWIDTH} 80)
  mme_run_ok(formatted COMMAND "${MAN}" -l "${first}/share/man/man1/mme-estimate.1")
elseif(GROFF)
  mme_run_ok(formatted COMMAND "${GROFF}" -k -man -Tutf8 "${first}/share/man/man1/mme-estimate.1")
else()
  message(STATUS "neither man nor groff is installed: the man page is not formatted")
  set(formatted_out "")
endif()
if(MAN OR GROFF)
  mme_expect_contains("${formatted_out}" "SYNOPSIS" "the formatted mme-estimate.1")
  mme_expect_contains("${formatted_out}" "recompute" "the formatted mme-estimate.1")
endif()
file(GLOB static_archives "${first}/lib/*.a" "${first}/lib/mme/plugins/*.a")
if(static_archives)
  mme_fail("static archives were installed: ${static_archives}")
endif()

# Nothing installed may name the build tree or the install prefix: RUNPATHs are $ORIGIN-based,
# the CMake package computes its prefix from its own location.
find_program(READELF readelf REQUIRED)
file(GLOB plugins "${first}/lib/mme/plugins/*.so")
file(GLOB libs "${first}/lib/libmme_*.so.${MME_PROJECT_VERSION}")
foreach(binary "${first}/bin/mme" ${libs} ${plugins})
  mme_run_ok(elf COMMAND "${READELF}" -d "${binary}")
  mme_expect_not_contains("${elf_out}" "${MME_BUILD_DIR}" "dynamic section of ${binary}")
  mme_expect_not_contains("${elf_out}" "${first}" "dynamic section of ${binary}")
endforeach()
mme_run_ok(elf COMMAND "${READELF}" -d "${first}/bin/mme")
mme_expect_contains("${elf_out}" "[$ORIGIN/../lib]" "RUNPATH of bin/mme")
mme_run_ok(elf COMMAND "${READELF}" -d "${first}/lib/mme/plugins/mme_json_profiles.so")
mme_expect_contains("${elf_out}" "[$ORIGIN/../..]" "RUNPATH of a plugin")
mme_expect_contains("${elf_out}" "libmme_sdk.so" "NEEDED of a plugin (the SDK)")
mme_expect_not_contains("${elf_out}" "libmme_engine.so" "NEEDED of a plugin (the SDK only)")
mme_run_ok(elf COMMAND "${READELF}" -d "${first}/lib/libmme_engine.so.${MME_PROJECT_VERSION}")
mme_expect_contains("${elf_out}" "[$ORIGIN]" "RUNPATH of a framework library (it finds the others beside it)")
file(GLOB cmake_files "${first}/lib/cmake/mme/*.cmake")
foreach(f IN LISTS cmake_files)
  file(READ "${f}" text)
  mme_expect_not_contains("${text}" "${first}" "${f}")
  mme_expect_not_contains("${text}" "${MME_BUILD_DIR}" "${f}")
  mme_expect_not_contains("${text}" "${MME_SOURCE_DIR}" "${f}")
endforeach()

# 2. Move the prefix: from here on the original path does not exist.
file(RENAME "${first}" "${prefix}")
set(mme "${prefix}/bin/mme")

mme_run_ok(version COMMAND "${mme}" version)
mme_expect_contains("${version_out}" "${MME_PROJECT_VERSION}" "mme version")
mme_run_ok(models COMMAND "${mme}" models --json)
mme_expect_contains("${models_out}" "\"Qwen/Qwen3-8B\"" "the bundled models of the moved prefix")
mme_expect_contains("${models_out}" "${prefix}/share/mme/models/" "the bundled models of the moved prefix")
mme_run_ok(builtin COMMAND "${mme}" estimate Qwen/Qwen3-8B --json)
mme_expect_contains("${builtin_out}" "\"schema_version\": 1" "estimate of a bundled model")
# The published schemas (docs/cli.md, "Contracts"): every one the build staged is installed, each
# names its own $id, and `mme init` of the moved tree points editors at the moved spec-file schema.
file(GLOB staged_schemas RELATIVE "${MME_BUILD_DIR}/stage/share/mme/schema" "${MME_BUILD_DIR}/stage/share/mme/schema/*.json")
file(GLOB installed_schemas RELATIVE "${prefix}/share/mme/schema" "${prefix}/share/mme/schema/*.json")
list(SORT staged_schemas)
list(SORT installed_schemas)
mme_expect_equal("${installed_schemas}" "${staged_schemas}" "the installed schemas")
foreach(name IN LISTS installed_schemas)
  file(READ "${prefix}/share/mme/schema/${name}" text)
  string(JSON id GET "${text}" "$id")
  mme_expect_equal("${id}" "https://megatron-memory-estimator.invalid/schema/v1/${name}" "the $id of ${name}")
endforeach()
mme_run_ok(init COMMAND "${mme}" init)
mme_expect_contains("${init_out}" "# yaml-language-server: $schema=file://${prefix}/share/mme/schema/spec-file.schema.json\n"
                    "the schema line of mme init in the moved prefix")

# The family is unknown until its plugin is built: no adapter reads config.json.
set(config "${MME_SOURCE_DIR}/examples/acme_model_family/config.json")
mme_run(unknown COMMAND "${mme}" estimate "${config}" --json)
if(unknown_rc STREQUAL "0")
  mme_fail("mme estimate on the acme_lm config succeeded without the acme_model_family plugin:\n${unknown_out}")
endif()
mme_expect_contains("${unknown_err}" "acme_lm" "the error without the acme_model_family plugin")

# 2b. pkg-config finds the moved SDK from mme.pc's own folder; a program built with its flags
# links libmme_sdk and reports the version and plugin API of the installed headers.
find_program(PKG_CONFIG pkg-config REQUIRED)
find_program(CXX NAMES g++ c++ REQUIRED)
set(ENV{PKG_CONFIG_PATH} "${prefix}/lib/pkgconfig")
mme_run_ok(pc COMMAND "${PKG_CONFIG}" --cflags --libs mme)
mme_expect_contains("${pc_out}" "-I${prefix}/lib/pkgconfig/../../include" "pkg-config --cflags of the moved prefix")
mme_expect_contains("${pc_out}" "-lmme_sdk" "pkg-config --libs (the plugin SDK)")
mme_run_ok(pcapi COMMAND "${PKG_CONFIG}" --variable=plugin_api_version mme)
string(STRIP "${pcapi_out}" pc_api)
mme_read_api_version(header_api "${prefix}/include")
mme_expect_equal("${pc_api}" "${header_api}" "mme.pc's plugin_api_version")
file(WRITE "${WORK_DIR}/pc_user.cpp" "#include <iostream>\n#include <mme/sdk/version.hpp>\n"
     "int main() { std::cout << mme::library_version() << ' ' << mme::kPluginApiVersion << '\\n'; }\n")
string(STRIP "${pc_out}" pc_flags)
separate_arguments(pc_flags UNIX_COMMAND "${pc_flags}")
separate_arguments(build_link_flags UNIX_COMMAND "${MME_EXE_LINKER_FLAGS}")
mme_run_ok(pccc COMMAND "${CXX}" -std=c++20 "${WORK_DIR}/pc_user.cpp" ${pc_flags} ${build_link_flags}
           -o "${WORK_DIR}/pc_user")
set(ENV{LD_LIBRARY_PATH} "${prefix}/lib")
mme_run_ok(pcrun COMMAND "${WORK_DIR}/pc_user")
mme_expect_contains("${pcrun_out}" "${MME_PROJECT_VERSION} ${header_api}" "a pkg-config build against the moved SDK")
unset(ENV{LD_LIBRARY_PATH})

# 3. Build the examples against the moved prefix, with only CMAKE_PREFIX_PATH.
function(build_against_prefix name source)
  set(build "${WORK_DIR}/build-${name}")
  mme_run_ok(configure COMMAND "${CMAKE_COMMAND}" -S "${source}" -B "${build}" "-DCMAKE_PREFIX_PATH=${prefix}")
  mme_run_ok(build COMMAND "${CMAKE_COMMAND}" --build "${build}")
  set(${name}_plugins "${build}/plugins" PARENT_SCOPE)
endfunction()
build_against_prefix(acme_hardware "${MME_SOURCE_DIR}/examples/acme_hardware")
build_against_prefix(acme_model_family "${MME_SOURCE_DIR}/examples/acme_model_family")
build_against_prefix(wrong_api "${CMAKE_CURRENT_LIST_DIR}/wrong_api")
mme_expect_exists("${acme_hardware_plugins}/acme_hardware.so" "${acme_model_family_plugins}/acme_model_family.so"
                  "${wrong_api_plugins}/wrong_api.so")
foreach(p "${acme_hardware_plugins}/acme_hardware.so" "${acme_model_family_plugins}/acme_model_family.so")
  mme_run_ok(dyn COMMAND "${READELF}" --dyn-syms --wide "${p}")
  # Hidden visibility: of the plugin's own code only the entry is exported (libstdc++'s
  # template instantiations keep namespace std's default visibility, as in any library).
  string(REGEX MATCHALL "[^\n]* (GLOBAL|WEAK) +DEFAULT +[0-9]+ [^\n]*" defined "${dyn_out}")
  mme_expect_contains("${defined}" " mme_plugin_info" "the exported symbols of ${p}")
  foreach(line IN LISTS defined)
    if(line MATCHES "(acme|3mme)")
      mme_fail("${p} exports more than its entry: ${line}")
    endif()
  endforeach()
  mme_expect_not_contains("${dyn_out}" "UNIQUE" "${p} (STB_GNU_UNIQUE symbols keep a library from unloading)")
endforeach()

# 4. The moved mme with the plugins.
set(dirs --plugin-dir "${acme_hardware_plugins}" --plugin-dir "${acme_model_family_plugins}")
mme_run_ok(plugins COMMAND "${mme}" plugins --json ${dirs})
string(JSON rejected LENGTH "${plugins_out}" rejected)
mme_expect_equal("${rejected}" "0" "rejected plugins")
mme_json_find(p "${plugins_out}" plugins name acme_hardware)
mme_expect_contains("${p}" "${acme_hardware_plugins}/acme_hardware.so" "where acme_hardware was loaded from")
mme_json_find(p "${plugins_out}" plugins name acme_model_family)
mme_expect_contains("${p}" "\"acme_lm\"" "the adapters of acme_model_family")
mme_json_find(p "${plugins_out}" plugins name hw_nvidia_hopper)
mme_expect_contains("${p}" "${prefix}/lib/mme/plugins/mme_hw_nvidia_hopper.so" "built-in plugins from the moved prefix")

mme_run_ok(hw COMMAND "${mme}" hardware --json ${dirs})
mme_json_find(x1 "${hw_out}" hardware name ACME-X1-96GB)
if(NOT x1)
  mme_fail("mme hardware does not list ACME-X1-96GB:\n${hw_out}")
endif()
string(JSON v GET "${x1}" plugin)
mme_expect_equal("${v}" "acme_hardware" "the plugin of ACME-X1-96GB")
string(JSON v GET "${x1}" memory_bytes)
mme_expect_equal("${v}" "103079215104" "memory of ACME-X1-96GB (98304 MiB)")
mme_json_find(x2 "${hw_out}" hardware name ACME-X2-192GB)
string(JSON v GET "${x2}" architecture)
mme_expect_equal("${v}" "blackwell" "architecture of ACME-X2-192GB")
string(JSON v GET "${x2}" compute_capability)
mme_expect_equal("${v}" "10.0" "compute capability of ACME-X2-192GB")
mme_json_find(h100 "${hw_out}" hardware name H100-SXM-80GB)
if(NOT h100)
  mme_fail("the built-in profiles are missing next to the plugin's:\n${hw_out}")
endif()

# End to end: the acme_lm config through the out-of-tree adapter, the built-in layer models
# and engine, fit verdicts on the out-of-tree GPUs and on a JSON profile.
file(WRITE "${WORK_DIR}/lab.json" [=[{"name": "Lab-GPU-24GB", "memory_gib": 24, "aliases": ["lab"]}]=])
mme_run_ok(est COMMAND "${mme}" estimate "${config}" --json ${dirs} --hardware-file "${WORK_DIR}/lab.json"
                       --tp 2 --pp 2 --ep 2 --num-gpus 8)
string(JSON v GET "${est_out}" model adapter)
mme_expect_equal("${v}" "acme_lm" "the adapter of the estimate")
string(JSON v GET "${est_out}" model model_type)
mme_expect_equal("${v}" "acme_lm" "the model_type of the estimate")
string(JSON v GET "${est_out}" model num_layers)
mme_expect_equal("${v}" "16" "layers")
# Hand count in examples/acme_model_family/README.md.
string(JSON v GET "${est_out}" model total_params)
mme_expect_equal("${v}" "1329793024" "total parameters of the acme_lm sample")
string(JSON v GET "${est_out}" model active_params)
mme_expect_equal("${v}" "914556928" "active parameters of the acme_lm sample")
string(JSON v LENGTH "${est_out}" stages)
mme_expect_equal("${v}" "2" "pipeline stages")
string(JSON peak GET "${est_out}" peak total_bytes)
if(NOT peak GREATER 0)
  mme_fail("peak memory is not positive: ${peak}")
endif()
foreach(gpu ACME-X1-96GB ACME-X2-192GB Lab-GPU-24GB H100-SXM-80GB)
  mme_json_find(fit "${est_out}" fits hardware "${gpu}")
  if(NOT fit)
    mme_fail("no fit verdict for ${gpu}:\n${est_out}")
  endif()
endforeach()
mme_json_find(fit "${est_out}" fits hardware ACME-X1-96GB)
string(JSON v GET "${fit}" fits)
mme_expect_equal("${v}" "ON" "the acme_lm sample fits ACME-X1-96GB")

mme_run_ok(one COMMAND "${mme}" estimate "${config}" ${dirs} --gpu x1 --tp 2 --pp 2 --ep 2 --num-gpus 8)
mme_expect_contains("${one_out}" "ACME-X1-96GB" "text estimate judged on --gpu x1")
mme_run_ok(params COMMAND "${mme}" params "${config}" --json --plugin-dir "${acme_model_family_plugins}")
mme_expect_contains("${params_out}" "\"total_params\": 1329793024" "mme params on the acme_lm sample")

# A plugin built for another plugin API version is refused with a clear message; the others load.
mme_read_api_version(api "${prefix}/include")
math(EXPR other "${api} + 1")
mme_run_ok(wrong COMMAND "${mme}" plugins --json --plugin-dir "${wrong_api_plugins}")
mme_json_find(r "${wrong_out}" rejected path "${wrong_api_plugins}/wrong_api.so")
if(NOT r)
  mme_fail("the wrong-API plugin was not rejected:\n${wrong_out}")
endif()
string(JSON reason GET "${r}" reason)
mme_expect_equal("${reason}" "built for plugin API version ${other}, this mme speaks version ${api}"
                 "why the wrong-API plugin was rejected")
mme_expect_contains("${wrong_err}" "wrong_api.so rejected: built for plugin API version ${other}" "the warning")
mme_json_find(p "${wrong_out}" plugins name hw_nvidia_hopper)
if(NOT p)
  mme_fail("the built-in plugins did not load next to a rejected one:\n${wrong_out}")
endif()

message(STATUS "install, relocation and out-of-tree plugins: ok")
