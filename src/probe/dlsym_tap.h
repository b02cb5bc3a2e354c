// The preloaded libraries' dlsym (dlsym_tap.cc): the CUDA driver's entry
// points come back wrapped (src/cuda/driver_calls.h) while wrapping is on.
#pragma once

namespace threadburn::probe::dlsym_tap {

// Whether this build defines dlsym at all (x86-64 only).
bool installed();
// Wrap the driver's entry points from now on (off: every lookup answers as
// glibc's). The probe turns it on when it measures, the phase mark always.
void set_wrapping(bool on);
bool wrapping();

}  // namespace threadburn::probe::dlsym_tap
