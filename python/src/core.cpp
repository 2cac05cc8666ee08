// mme._core: the pybind11 extension of the Python package. One function, run(request) ->
// response, over the embedding hosts' request layer (capi/src/embedded.hpp, over the command layer
// mme/commands/). The environment is read while the GIL is held (no Python thread can change
// os.environ meanwhile), then the GIL is released while mme works: requests from several Python
// threads run at the same time, each with its own context, and no call sets an environment
// variable.
#include <string>

#include "embedded.hpp"
#include <pybind11/pybind11.h>

namespace py = pybind11;

PYBIND11_MODULE(_core, m) {
  m.doc() =
      "The native part of the mme package: run(request_json, models_dir) -> response_json, the request format of "
      "the C entry point (mme_c.h, docs/python.md). Use the functions of the mme package instead.";
  m.attr("api_version") = mme::embedded::kApiVersion;
  m.def(
      "run",
      [](const std::string& request, const std::string& models_dir) {
        mme::embedded::RunDefaults defaults;
        defaults.models_dir = models_dir;
        defaults.environment = mme::commands::Environment::from_process();  // with the GIL held
        std::string response;
        {
          const py::gil_scoped_release release;
          response = mme::embedded::run_request(request, defaults);
        }
        return response;
      },
      py::arg("request"), py::arg("models_dir") = std::string(),
      "Runs one request (a JSON text) and returns the response document (a JSON text). The environment is read "
      "first; then the GIL is released, and requests from several threads run concurrently.");
}
