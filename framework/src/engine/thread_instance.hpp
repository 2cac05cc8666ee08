// The engine's per-thread scratch (the planner makes millions of estimates on each thread).
#pragma once

namespace mme {

// This thread's instance of T, made on first use. Reached through a function that is never
// inlined: in a shared library GCC recomputes a thread_local's address, a __tls_get_addr call,
// at every use, even through a reference bound to it; a caller that holds the reference this
// returns pays one call.
template <class T>
[[gnu::noinline]] T& thread_instance() {
  thread_local T instance;
  return instance;
}

}  // namespace mme
