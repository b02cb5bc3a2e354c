// The probe's dlsym: every lookup in a library (a handle dlopen returned)
// goes to glibc's dlsym and its answer through cuda::on_lookup, which hands
// back the wrappers of the CUDA driver's waits, launches and
// cuGetProcAddress (src/cuda/driver_calls.h); a CUDA runtime finds the
// driver's entry points no other way (it dlopens libcuda.so.1 and looks them
// up). Linked only into the preloaded libraries (the probe, the phase mark),
// never into a program.
//
// dlsym(RTLD_NEXT, ...) and dlsym(RTLD_DEFAULT, ...) answer relative to the
// object that calls them (glibc reads the return address): forwarded from C,
// they would answer for the probe instead, and an interposer that asks for
// the next definition of its own symbol would get itself back. So the entry
// is a few instructions of assembly that jump to glibc's dlsym with the
// caller's return address untouched (a tail jump) for those two handles, and
// call the C part only for a library's handle, where the caller does not
// matter. x86-64 only: elsewhere the probe defines no dlsym and says that it
// sees no waits (driver_calls_note).
//
// Symbol versions, as thread_tap.cc's: glibc 2.34 moved dlsym from libdl
// into libc under GLIBC_2.34, keeping GLIBC_2.2.5 for older binaries (the
// CUDA runtime's reference is dlsym@GLIBC_2.2.5); the probe defines both
// (exports.map) and forwards to glibc's own.
#include "probe/dlsym_tap.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

#include "cuda/driver_calls.h"

#if defined(__x86_64__)

extern "C" {
// glibc's dlsym, resolved at the first call (a library's constructor may
// look something up before the probe's runs).
__attribute__((visibility("hidden"))) void* threadburn_real_dlsym = nullptr;

__attribute__((visibility("hidden"))) void threadburn_resolve_dlsym() {
  void* f = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
  if (!f) f = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
  if (!f) {
    std::fprintf(stderr, "threadburn probe: no C library defines dlsym after the probe\n");
    std::abort();
  }
  __atomic_store_n(&threadburn_real_dlsym, f, __ATOMIC_RELEASE);
}

__attribute__((visibility("hidden"))) void* threadburn_dlsym_in_library(void* handle, const char* name) {
  auto* real = reinterpret_cast<void* (*)(void*, const char*)>(__atomic_load_n(&threadburn_real_dlsym, __ATOMIC_ACQUIRE));
  void* found = real(handle, name);
  return threadburn::probe::dlsym_tap::wrapping() ? threadburn::cuda::on_lookup(name, found) : found;
}
}

// rdi: handle, rsi: name. RTLD_DEFAULT is 0, RTLD_NEXT is -1 (dlfcn.h).
__asm__(
    ".text\n"
    ".globl threadburn_dlsym_new\n"
    ".type threadburn_dlsym_new, @function\n"
    ".globl threadburn_dlsym_old\n"
    ".type threadburn_dlsym_old, @function\n"
    "threadburn_dlsym_new:\n"
    "threadburn_dlsym_old:\n"
    "  movq threadburn_real_dlsym(%rip), %rax\n"
    "  testq %rax, %rax\n"
    "  jz 2f\n"
    "  testq %rdi, %rdi\n"
    "  jz 1f\n"
    "  cmpq $-1, %rdi\n"
    "  je 1f\n"
    "  jmp threadburn_dlsym_in_library\n"
    "1:\n"
    "  jmp *%rax\n"
    "2:\n"  // not resolved yet: keep the arguments, resolve, start again (the stack 16-aligned at the call)
    "  pushq %rdi\n"
    "  pushq %rsi\n"
    "  subq $8, %rsp\n"
    "  call threadburn_resolve_dlsym\n"
    "  addq $8, %rsp\n"
    "  popq %rsi\n"
    "  popq %rdi\n"
    "  jmp threadburn_dlsym_new\n"
    ".size threadburn_dlsym_new, .-threadburn_dlsym_new\n"
    ".size threadburn_dlsym_old, .-threadburn_dlsym_old\n"
    ".symver threadburn_dlsym_new, dlsym@@GLIBC_2.34\n"
    ".symver threadburn_dlsym_old, dlsym@GLIBC_2.2.5\n");

namespace threadburn::probe::dlsym_tap {
bool installed() { return true; }
}  // namespace threadburn::probe::dlsym_tap

#else

namespace threadburn::probe::dlsym_tap {
bool installed() { return false; }
}  // namespace threadburn::probe::dlsym_tap

#endif

namespace threadburn::probe::dlsym_tap {
namespace {
bool g_wrapping = false;
}
void set_wrapping(bool on) { __atomic_store_n(&g_wrapping, on, __ATOMIC_RELEASE); }
bool wrapping() { return __atomic_load_n(&g_wrapping, __ATOMIC_ACQUIRE); }
}  // namespace threadburn::probe::dlsym_tap
