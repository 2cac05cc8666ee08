# mme in the browser (web/, docs/web.md). When emscripten's emcmake is found, web/ is configured
# and built as a project of its own (em++ never sees the host build's flags), its folder
# (index.html, app.js, style.css, mme.js) lands in stage/share/mme/web and is installed under
# share/mme/web. MME_WEB_SITE is that folder (empty without emscripten), for tests/web.
find_program(MME_EMCMAKE emcmake)
option(MME_BUILD_WEB "Build the browser page with emscripten (web/)" ON)
set(MME_WEB_SITE "")
if(MME_BUILD_WEB AND MME_EMCMAKE AND NOT MME_BUILD_FUZZ)
  include(ExternalProject)
  set(web_bin "${CMAKE_BINARY_DIR}/web")
  ExternalProject_Add(mme_web
    SOURCE_DIR "${PROJECT_SOURCE_DIR}/web"
    BINARY_DIR "${web_bin}"
    CONFIGURE_COMMAND ${MME_EMCMAKE} ${CMAKE_COMMAND} -S "${PROJECT_SOURCE_DIR}/web" -B "${web_bin}" -G Ninja
                      -DCMAKE_BUILD_TYPE=Release
    BUILD_COMMAND ${CMAKE_COMMAND} --build "${web_bin}"
    INSTALL_COMMAND ${CMAKE_COMMAND} -E copy_directory "${web_bin}/site" "${MME_STAGE_DIR}/${CMAKE_INSTALL_DATADIR}/mme/web"
    BUILD_ALWAYS ON
    USES_TERMINAL_BUILD ON)
  set(MME_WEB_SITE "${MME_STAGE_DIR}/${CMAKE_INSTALL_DATADIR}/mme/web")
  install(DIRECTORY "${MME_WEB_SITE}/" DESTINATION "${CMAKE_INSTALL_DATADIR}/mme/web" COMPONENT runtime)
  message(STATUS "mme web: emscripten found (${MME_EMCMAKE}), the page is built into ${MME_WEB_SITE}")
else()
  message(STATUS "mme web: emscripten not found (or MME_BUILD_WEB off), the page is not built")
endif()
