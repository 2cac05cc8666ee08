# cmake -DMME=<mme> -DSHARE=<stage>/share -DCOMMANDS=<a;b;...> -P mme_shell_docs.cmake
#
# The shell completion scripts and the man pages, written by the built mme from its option
# tables (`mme completion SHELL`, `mme help --man [COMMAND]`) into SHARE in the install layout:
#   bash-completion/completions/mme, zsh/vendor-completions/_mme,
#   fish/vendor_completions.d/mme.fish, man/man1/mme.1 and man/man1/mme-<command>.1.
# Run with the plugin and hardware variables unset, so the --gpu names are the built-in ones.
cmake_minimum_required(VERSION 3.25)

function(mme_write out)
  get_filename_component(dir "${out}" DIRECTORY)
  file(MAKE_DIRECTORY "${dir}")
  execute_process(COMMAND "${MME}" ${ARGN} OUTPUT_FILE "${out}.tmp" ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc STREQUAL "0" OR NOT err STREQUAL "")
    file(REMOVE "${out}.tmp")
    list(JOIN ARGN " " args)
    message(FATAL_ERROR "`mme ${args}` failed (exit ${rc}): ${err}")
  endif()
  file(RENAME "${out}.tmp" "${out}")
endfunction()

foreach(var MME_PLUGIN_PATH MME_HARDWARE_PATH MME_HARDWARE_FILES MME_MODELS_PATH)
  unset(ENV{${var}})
endforeach()
set(ENV{NO_COLOR} 1)
mme_write("${SHARE}/bash-completion/completions/mme" completion bash)
mme_write("${SHARE}/zsh/vendor-completions/_mme" completion zsh)
mme_write("${SHARE}/fish/vendor_completions.d/mme.fish" completion fish)
mme_write("${SHARE}/man/man1/mme.1" help --man)
foreach(command IN LISTS COMMANDS)
  mme_write("${SHARE}/man/man1/mme-${command}.1" help --man ${command})
endforeach()
