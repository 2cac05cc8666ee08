// Shared by the libFuzzer targets of fuzz/: the in-tree plugins registered from their static
// archives (no dlopen), and the oracle every target applies.
//
// The oracle: bad input must come back as an mme::Error (a usage, config, layout, plugin or
// not-found error with its exit code), never as another exception (the CLI's exit code 1,
// "internal error"), a crash, a hang, a leak or undefined behaviour. AddressSanitizer,
// UndefinedBehaviorSanitizer and libFuzzer's own limits (time, memory) catch the latter.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include <mme/commands/context.hpp>
#include <mme/engine/estimator.hpp>
#include <mme/engine/registry.hpp>
#include <mme/sdk/error.hpp>

namespace mme::fuzz {

// Every in-tree plugin: config adapters, layer-memory models and hardware profiles
// (json_profiles included: it reads MME_HARDWARE_FILES / MME_HARDWARE_PATH when registered).
void register_all_plugins(Registry& registry);
// The same as the command layer's built-in plugins (mme/commands/context.hpp).
std::vector<commands::BuiltinPlugin> all_plugins();
// A registry built once with register_all_plugins.
const Registry& registry();

// A finding: prints what and where, then aborts so that libFuzzer saves the input.
[[noreturn]] void finding(const char* target, const std::string& what);

// The oracle on an estimate: `with` (components and layer breakdown on) and `without`
// (components off) must agree on the stages, the peak and every total; no byte or parameter
// count is negative; each stage's parts add up to its static and total bytes.
void check_estimates_agree(const char* target, const Estimate& with, const Estimate& without);

// Runs `f` on one input. Returns true when it completed, false when it threw an mme::Error
// (bad input correctly refused); anything else thrown is a finding.
template <class F>
bool run_checked(const char* target, F&& f) {
  try {
    f();
    return true;
  } catch (const Error&) {
    return false;
  } catch (const std::bad_alloc&) {
    finding(target, "std::bad_alloc: an allocation the input should not have caused");
  } catch (const std::exception& e) {
    finding(target, std::string("an exception that is not an mme::Error (the CLI's 'internal error'): ") + e.what());
  } catch (...) {
    finding(target, "a non-standard exception");
  }
}

}  // namespace mme::fuzz
