// The probe's thread interposers (thread_tap.cc): the classes of thread that
// only their creation or their own naming tells apart (core/thread_class.h).
//  - cuda: a thread whose creator, the code that called pthread_create (the
//    object holding its return address, by dladdr), is the CUDA driver
//    (libcuda.so*); its start routine is wrapped to mark it as it starts.
//  - pin: a thread that names itself PyTorch's pin-memory thread name
//    (pthread_setname_np(pthread_self(), ...) as c10's setThreadName does,
//    or prctl(PR_SET_NAME)), marked as it does so.
// pthread_create and pthread_setname_np are exported under both of glibc's
// symbol versions, prctl under its one (exports.map), so that a program's or
// a library's versioned reference binds to the probe first; everything is
// forwarded to glibc's definition unchanged (attributes, return values,
// errno): the probe only adds a mark.
#pragma once

#include <cstring>
#include <string_view>

#include "cuda/driver_file.h"

namespace threadburn::probe::thread_tap {

// The name PyTorch's DataLoader gives its pin-memory thread (pt_data_pin,
// torch/utils/data/_utils/pin_memory.py through c10::setThreadName).
inline constexpr const char* kPinThreadName = "pt_data_pin";

// Whether the interposers mark threads: until the probe's constructor
// decides, they do (a library's constructor may start threads before the
// probe's runs); after it, only when the probe is measuring
// (THREADBURN_PROBE_DIR set): otherwise they only forward.
void set_active(bool on);

// The rules, pure: a creator's file name (dladdr's dli_fname) is the CUDA
// driver's by gpu::is_cuda_driver (src/cuda/driver_file.h); a name is the
// pin-memory thread's when the 15 characters the kernel keeps of it
// (TASK_COMM_LEN 16) are kPinThreadName.
using gpu::is_cuda_driver;
inline bool is_pin_thread_name(const char* name) {
  return name && std::string_view(name, strnlen(name, 15)) == kPinThreadName;
}
// PyTorch's autograd engine starts a thread per device type and index
// (torch::autograd::Engine::thread_init), which names itself
// "pt_autograd_<index>" (c10::setThreadName) as it enters, before it runs any
// backward pass: the thread that launches a CUDA backward's kernels while the
// main thread sleeps on the engine.
inline constexpr const char* kAutogradThreadPrefix = "pt_autograd_";
inline bool is_autograd_thread_name(const char* name) {
  if (!name) return false;
  const std::string_view n(name, strnlen(name, 15)), p(kAutogradThreadPrefix);
  return n.size() > p.size() && n.substr(0, p.size()) == p &&
         n.find_first_not_of("0123456789", p.size()) == std::string_view::npos;
}

}  // namespace threadburn::probe::thread_tap
