// mme._core: the pybind11 extension of the Python package. One function, run(request) ->
// response, over the C entry point's request layer (capi/src/embedded.hpp), with the GIL released
// while mme works (an estimate, a plan search), so other Python threads run meanwhile.
#include <string>

#include "embedded.hpp"
#include <pybind11/pybind11.h>

namespace py = pybind11;

PYBIND11_MODULE(_core, m) {
  m.doc() =
      "The native part of the mme package: run(request_json) -> response_json, the request format of the C "
      "entry point (mme_c.h, docs/python.md). Use the functions of the mme package instead.";
  m.attr("api_version") = mme::embedded::kApiVersion;
  m.def(
      "run",
      [](const std::string& request) {
        std::string response;
        {
          const py::gil_scoped_release release;
          response = mme::embedded::run_request(request);
        }
        return response;
      },
      py::arg("request"),
      "Runs one request (a JSON text) and returns the response document (a JSON text). Releases the GIL; "
      "requests run one at a time.");
}
