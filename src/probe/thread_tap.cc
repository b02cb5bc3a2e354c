// The probe's pthread_create / pthread_setname_np / prctl interposers
// (thread_tap.h).
//
// Symbol versions: glibc 2.34 moved libpthread into libc and gave
// pthread_create and pthread_setname_np a new version, GLIBC_2.34, keeping
// the old ones (GLIBC_2.2.5, GLIBC_2.12) for binaries built against older
// glibc (objdump -T libc.so.6). A program built here references
// pthread_create@GLIBC_2.34; a library built on an older system (the CUDA
// driver, PyTorch's wheels) references pthread_create@GLIBC_2.2.5. The
// dynamic linker binds a versioned reference to the first object that
// defines the symbol with that version name, so the probe defines each one
// under every version glibc has (.symver below, the nodes in exports.map)
// and forwards each to glibc's definition of the same version (dlvsym).
#include "probe/thread_tap.h"

#include <dlfcn.h>
#include <pthread.h>

#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>

#include "core/thread_class.h"

namespace threadburn::probe::thread_tap {
namespace {

constexpr int kPrSetName = 15;  // PR_SET_NAME (linux/prctl.h); <sys/prctl.h> would declare prctl itself

enum Mode : int { kUndecided = 0, kOn = 1, kOff = 2 };
std::atomic<int> g_mode{kUndecided};

bool marking() { return g_mode.load(std::memory_order_relaxed) != kOff; }

// glibc's definition of name at version, looked up once. A symbol the C
// library does not define cannot happen (the probe links against it); say so
// and stop rather than fail a program's call in a way it cannot expect.
void* real(std::atomic<void*>& slot, const char* name, const char* version, const char* fallback_version) {
  void* f = slot.load(std::memory_order_acquire);
  if (f) return f;
  f = dlvsym(RTLD_NEXT, name, version);
  if (!f && fallback_version) f = dlvsym(RTLD_NEXT, name, fallback_version);
  if (!f) f = dlsym(RTLD_NEXT, name);
  if (!f) {
    std::fprintf(stderr, "threadburn probe: no C library defines %s after the probe\n", name);
    std::abort();
  }
  slot.store(f, std::memory_order_release);
  return f;
}

// Calls keep the program's errno: the probe's own work (dladdr, malloc, the
// class registry's lock) may change it, and a caller may look at errno after
// a successful call too.
struct KeepErrno {
  int saved = errno;
  ~KeepErrno() { errno = saved; }
};

void mark_self(ThreadClass c) {
  KeepErrno keep;
  mark_current_thread(c);
}

bool created_by_cuda_driver(void* caller) {
  KeepErrno keep;
  Dl_info info{};
  return dladdr(caller, &info) != 0 && is_cuda_driver(info.dli_fname);
}

using Start = void* (*)(void*);
using CreateFn = int (*)(pthread_t*, const pthread_attr_t*, Start, void*);
struct Wrapped {
  Start start;
  void* arg;
};

// The start routine of a thread the CUDA driver creates: marks it, then runs
// the driver's routine; its return value goes to pthread_join unchanged, and
// pthread_exit or cancellation unwind through this frame, which holds nothing.
void* cuda_thread(void* p) {
  const Wrapped w = *static_cast<Wrapped*>(p);
  {
    KeepErrno keep;
    std::free(p);
  }
  mark_self(ThreadClass::kCuda);
  return w.start(w.arg);
}

int create(CreateFn fn, void* caller, pthread_t* thread, const pthread_attr_t* attr, Start start, void* arg) {
  if (!marking() || !created_by_cuda_driver(caller)) return fn(thread, attr, start, arg);
  Wrapped* w = nullptr;
  {
    KeepErrno keep;
    w = static_cast<Wrapped*>(std::malloc(sizeof(Wrapped)));
  }
  if (!w) return fn(thread, attr, start, arg);  // unmarked rather than refused
  *w = {start, arg};
  const int rc = fn(thread, attr, &cuda_thread, w);
  if (rc != 0) {
    KeepErrno keep;
    std::free(w);  // no thread: nobody else frees it
  }
  return rc;
}

using SetnameFn = int (*)(pthread_t, const char*);

int setname(SetnameFn fn, pthread_t thread, const char* name) {
  const int rc = fn(thread, name);
  // Only a thread naming itself: another thread's kernel id is not at hand,
  // and PyTorch's pin-memory and autograd device threads name themselves.
  if (rc == 0 && marking() && pthread_equal(thread, pthread_self())) {
    if (is_pin_thread_name(name)) mark_self(ThreadClass::kPin);
    if (is_autograd_thread_name(name)) mark_self(ThreadClass::kAutograd);
  }
  return rc;
}

std::atomic<void*> g_create_234{nullptr}, g_create_225{nullptr};
std::atomic<void*> g_setname_234{nullptr}, g_setname_212{nullptr}, g_prctl{nullptr};

}  // namespace

void set_active(bool on) { g_mode.store(on ? kOn : kOff, std::memory_order_relaxed); }

}  // namespace threadburn::probe::thread_tap

using namespace threadburn::probe::thread_tap;  // NOLINT: the C entry points below

// The exported definitions, under glibc's names and versions. The return
// address is taken here, in the entry point the caller called.
extern "C" {

__attribute__((visibility("default"))) int threadburn_pthread_create_2_34(pthread_t* t, const pthread_attr_t* a,
                                                                           void* (*start)(void*), void* arg) {
  return create(reinterpret_cast<CreateFn>(real(g_create_234, "pthread_create", "GLIBC_2.34", "GLIBC_2.2.5")),
                __builtin_return_address(0), t, a, start, arg);
}

__attribute__((visibility("default"))) int threadburn_pthread_create_2_2_5(pthread_t* t, const pthread_attr_t* a,
                                                                            void* (*start)(void*), void* arg) {
  return create(reinterpret_cast<CreateFn>(real(g_create_225, "pthread_create", "GLIBC_2.2.5", nullptr)),
                __builtin_return_address(0), t, a, start, arg);
}

__attribute__((visibility("default"))) int threadburn_pthread_setname_np_2_34(pthread_t t, const char* name) {
  return setname(reinterpret_cast<SetnameFn>(real(g_setname_234, "pthread_setname_np", "GLIBC_2.34", "GLIBC_2.12")),
                 t, name);
}

__attribute__((visibility("default"))) int threadburn_pthread_setname_np_2_12(pthread_t t, const char* name) {
  return setname(reinterpret_cast<SetnameFn>(real(g_setname_212, "pthread_setname_np", "GLIBC_2.12", nullptr)), t,
                 name);
}

// prctl is variadic; glibc's own prctl reads four unsigned long arguments
// after the option whatever the option is, and hands them to the system
// call: forwarding the same four is exactly what it does.
__attribute__((visibility("default"))) int threadburn_prctl(int option, ...) {
  va_list ap;
  va_start(ap, option);
  const unsigned long a2 = va_arg(ap, unsigned long), a3 = va_arg(ap, unsigned long);
  const unsigned long a4 = va_arg(ap, unsigned long), a5 = va_arg(ap, unsigned long);
  va_end(ap);
  using PrctlFn = int (*)(int, ...);
  const auto fn = reinterpret_cast<PrctlFn>(real(g_prctl, "prctl", "GLIBC_2.2.5", nullptr));
  const int rc = fn(option, a2, a3, a4, a5);
  if (rc == 0 && option == kPrSetName && marking()) {
    const char* name = reinterpret_cast<const char*>(a2);
    if (is_pin_thread_name(name)) mark_self(threadburn::ThreadClass::kPin);
    if (is_autograd_thread_name(name)) mark_self(threadburn::ThreadClass::kAutograd);
  }
  return rc;
}

}  // extern "C"

__asm__(".symver threadburn_pthread_create_2_34, pthread_create@@GLIBC_2.34");
__asm__(".symver threadburn_pthread_create_2_2_5, pthread_create@GLIBC_2.2.5");
__asm__(".symver threadburn_pthread_setname_np_2_34, pthread_setname_np@@GLIBC_2.34");
__asm__(".symver threadburn_pthread_setname_np_2_12, pthread_setname_np@GLIBC_2.12");
__asm__(".symver threadburn_prctl, prctl@@GLIBC_2.2.5");
