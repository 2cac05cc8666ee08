// Compiled (never run) at configure time to read the plugin ABI tag this toolchain gives: the
// string lands in the object file, where CMake's file(STRINGS) finds it (cmake/MmePackage.cmake).
#include <mme/sdk/version.hpp>

extern const char mme_abi_probe[];
const char mme_abi_probe[] =
    "MME_ABI_TAG=" MME_ABI_TAG ",MME_GLIBCXX_USE_CXX11_ABI=" MME_STRINGIFY(_GLIBCXX_USE_CXX11_ABI) ",";
