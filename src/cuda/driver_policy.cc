#include "cuda/driver_policy.h"

#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "cuda/driver_file.h"

namespace threadburn::cuda {
namespace {

// CUresult values of cuda.h that get a line of their own.
constexpr int kSuccess = 0;
constexpr int kNoDevice = 100;  // CUDA_ERROR_NO_DEVICE: cuInit on a machine without a GPU
constexpr const char* kDriver = "libcuda.so.1";

// Notes as one line, a text said of several devices once ("devices 0, 1: ...").
template <typename Note>
std::string join(const std::vector<Note>& notes, size_t from = 0) {
  std::vector<std::pair<std::string, std::string>> groups;  // text, its devices
  for (size_t i = from; i < notes.size(); ++i) {
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == notes[i].text; });
    if (it == groups.end()) it = groups.insert(groups.end(), {notes[i].text, ""});
    if (notes[i].device >= 0) it->second += (it->second.empty() ? "" : ", ") + std::to_string(notes[i].device);
  }
  std::string out;
  for (const auto& [text, devices] : groups) {
    const char* which = devices.find(',') == std::string::npos ? "device " : "devices ";
    out += (out.empty() ? "" : "; ") + (devices.empty() ? "" : which + devices + ": ") + text;
  }
  return out;
}

// The variable's text in one line (it lands in a context cell).
std::string one_line(std::string text) {
  for (char& c : text) {
    if (static_cast<unsigned char>(c) < 0x20) c = '?';
  }
  return text;
}

}  // namespace

bool policy_flags(const std::string& name, unsigned* flags) {
  static const std::pair<const char*, unsigned> kPolicies[] = {
      {"auto", 0x00}, {"spin", 0x01}, {"yield", 0x02}, {"blocking_sync", 0x04}};  // CU_CTX_SCHED_*
  for (const auto& [word, bits] : kPolicies) {
    if (name == word) {
      *flags = bits;
      return true;
    }
  }
  return false;
}

const char* policy_name(unsigned flags) {
  switch (flags & kSchedMask) {
    case 0x00: return "auto";
    case 0x01: return "spin";
    case 0x02: return "yield";
    case 0x04: return "blocking_sync";
    default: return "unknown";
  }
}

bool driver_loaded() {
  const auto is_driver = [](dl_phdr_info* info, size_t, void*) -> int {
    return gpu::is_cuda_driver(info->dlpi_name) ? 1 : 0;
  };
  return dl_iterate_phdr(is_driver, nullptr) != 0;
}

std::vector<std::pair<std::string, std::string>> context_of(const PolicyReport& r) {
  return {{"cuda_sync_requested", r.requested},
          {"cuda_sync_in_force", r.in_force},
          {"cuda_used", r.cuda_used ? "1" : "0"},
          {"cuda_devices", r.devices},
          {"cuda_sync_note", r.note}};
}

void apply_from_environment(DriverPolicy* policy, bool say) {
  const std::string line = policy->apply(std::getenv(kSyncVariable));
  if (say && !line.empty()) std::fprintf(stderr, "threadburn cuda_sync: %s\n", line.c_str());
}

// The entry points, by the names the driver exports (cuda.h #defines
// cuDevicePrimaryCtxSetFlags as its _v2; older drivers have only the first).
bool DriverPolicy::resolve(void* handle) {
  const auto sym = [handle](const char* name) { return dlsym(handle, name); };
  api_.init = reinterpret_cast<int (*)(unsigned)>(sym("cuInit"));
  api_.device_count = reinterpret_cast<int (*)(int*)>(sym("cuDeviceGetCount"));
  api_.device_get = reinterpret_cast<int (*)(int*, int)>(sym("cuDeviceGet"));
  api_.get_state = reinterpret_cast<int (*)(int, unsigned*, int*)>(sym("cuDevicePrimaryCtxGetState"));
  void* set = sym("cuDevicePrimaryCtxSetFlags_v2");
  api_.set_flags = reinterpret_cast<int (*)(int, unsigned)>(set ? set : sym("cuDevicePrimaryCtxSetFlags"));
  api_.error_name = reinterpret_cast<int (*)(int, const char**)>(sym("cuGetErrorName"));
  api_.pci_bus_id = reinterpret_cast<int (*)(char*, int, int)>(sym("cuDeviceGetPCIBusId"));
  const char* missing = !api_.init ? "cuInit" : !api_.device_count ? "cuDeviceGetCount"
                      : !api_.device_get ? "cuDeviceGet" : !api_.get_state ? "cuDevicePrimaryCtxGetState"
                      : !api_.set_flags ? "cuDevicePrimaryCtxSetFlags" : nullptr;
  if (missing) read_error_ = std::string(kDriver) + " lacks " + missing;
  return missing == nullptr;
}

std::string DriverPolicy::call_failed(const char* call, int rc) const {
  const char* name = nullptr;
  if (!api_.error_name || api_.error_name(rc, &name) != kSuccess || !name) name = "CUresult";
  return std::string(call) + " failed: " + name + " (" + std::to_string(rc) + ")";
}

std::string DriverPolicy::apply(const char* value) {
  std::lock_guard<std::mutex> lock(mu_);
  requested_ = one_line(value && *value ? value : "auto");
  const size_t first = notes_.size();
  const auto line = [&] { return join(notes_, first); };
  if (!policy_flags(requested_, &want_)) {
    notes_.push_back(
        {-1, std::string(kSyncVariable) + "=" + requested_ + ": expected " + kPolicyWords + "; nothing applied"});
    return line();
  }
  if (want_ == 0) return "";  // auto: the driver's own default, no call at all
  asked_ = true;
  const bool was_loaded = driver_loaded();
  void* handle = dlopen(kDriver, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    notes_.push_back({-1, std::string("no CUDA driver (") + (why ? why : kDriver) + "): nothing applied"});
    return line();
  }
  handle_ = handle;
  loaded_by_us_ = !was_loaded;
  if (!resolve(handle)) {
    notes_.push_back({-1, read_error_ + ": nothing applied"});
    return line();
  }
  int rc = api_.init(0), n = 0;
  if (rc != kSuccess && rc != kNoDevice) {
    notes_.push_back({-1, call_failed("cuInit", rc) + ": nothing applied"});
    return line();
  }
  if (rc == kSuccess && (rc = api_.device_count(&n)) != kSuccess) {
    notes_.push_back({-1, call_failed("cuDeviceGetCount", rc) + ": nothing applied"});
    return line();
  }
  if (n == 0) {  // the real driver's cuInit says CUDA_ERROR_NO_DEVICE; a count of 0 means the same
    count_ = 0;
    notes_.push_back({-1, "no CUDA device"});
    return line();
  }
  count_ = n;
  for (int i = 0; i < n; ++i) {
    DeviceState d;
    d.device = i;
    int dev = 0, active = 0;
    unsigned flags = 0;
    if ((rc = api_.device_get(&dev, i)) != kSuccess) {
      notes_.push_back({i, call_failed("cuDeviceGet", rc)});
    } else if ((rc = api_.get_state(dev, &flags, &active)) != kSuccess) {
      notes_.push_back({i, call_failed("cuDevicePrimaryCtxGetState", rc)});
    } else if (active) {
      // Its flags are the context's now; threadburn does not overwrite a policy the program chose.
      d.active_before = d.seen_active = true;
      d.flags_at_exit = policy_name(flags);
      notes_.push_back({i, "context already active before threadburn could set it (the program or a "
                       "library created it first); the policy in force is the program's: " + d.flags_at_exit});
    } else {
      d.active_before = false;
      d.set_rc = api_.set_flags(dev, (flags & ~kSchedMask) | want_);  // the context's other flags kept
      if (*d.set_rc != kSuccess) notes_.push_back({i, call_failed("cuDevicePrimaryCtxSetFlags", *d.set_rc)});
    }
    devices_.push_back(d);
  }
  return line();
}

void DriverPolicy::observe() {
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_) return;
  if (!handle_) {
    if (!driver_loaded()) return;
    void* handle = dlopen(kDriver, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);  // never loads it
    if (!handle) return;
    handle_ = handle;
    resolve(handle);
  }
  if (api_.set_flags) read_devices();  // resolved
}

void DriverPolicy::read_devices() {
  int n = 0;
  int rc = api_.device_count(&n);
  if (rc != kSuccess) {  // e.g. not initialised (yet): the program has not called cuInit
    read_error_ = call_failed("cuDeviceGetCount", rc);
    return;
  }
  count_ = n;
  read_error_.clear();
  for (int i = 0; i < n; ++i) {
    if (static_cast<int>(devices_.size()) <= i) devices_.push_back(DeviceState{i, {}, {}, "n/a", false, ""});
    DeviceState& d = devices_[static_cast<size_t>(i)];
    int dev = 0, active = 0;
    unsigned flags = 0;
    if (api_.device_get(&dev, i) != kSuccess || api_.get_state(dev, &flags, &active) != kSuccess) continue;
    // A context released after use (a CUDA runtime's exit handler) is destroyed,
    // and the driver then reads its flags back as 0 (auto: seen on an H200,
    // driver 580): the policy in force is the last one read while it was active.
    if (active || !d.seen_active) d.flags_at_exit = policy_name(flags);
    d.seen_active = d.seen_active || active != 0;
    // Which GPU it is, for NVML (the probe's GPUs of the process): once, while active.
    if (active && d.pci_bus_id.empty() && api_.pci_bus_id) {
      char id[64] = {};
      if (api_.pci_bus_id(id, static_cast<int>(sizeof id), dev) == kSuccess) d.pci_bus_id = id;
    }
  }
}

bool DriverPolicy::uses_cuda() const {
  bool active = false;
  for (const auto& d : devices_) active = active || d.seen_active;
  return handle_ && (!loaded_by_us_ || active);
}

bool DriverPolicy::program_uses_cuda() {
  std::lock_guard<std::mutex> lock(mu_);
  return uses_cuda();
}

PolicyReport DriverPolicy::finish() {
  observe();
  std::lock_guard<std::mutex> lock(mu_);
  finished_ = true;
  PolicyReport r;
  r.requested = requested_;
  r.per_device = devices_;
  r.devices = count_ >= 0 ? std::to_string(count_) : "n/a";
  bool any_active = false, any_set = false;
  for (const auto& d : devices_) {
    any_active = any_active || d.seen_active;
    any_set = any_set || d.set_rc == kSuccess;
  }
  r.cuda_used = uses_cuda();
  // In force: what the devices the program used report. With none seen
  // active (contexts released before a read-back saw them), every device's.
  std::vector<std::string> names;
  for (const auto& d : devices_) {
    if (d.flags_at_exit != "n/a" && (d.seen_active || (!any_active && r.cuda_used))) names.push_back(d.flags_at_exit);
  }
  r.in_force = names.empty() ? "n/a" : names.front();
  for (const auto& name : names) {
    if (name != names.front()) r.in_force = "mixed";
  }
  std::vector<Note> notes = notes_;
  for (const auto& d : devices_) {
    if (d.set_rc == kSuccess && d.seen_active && d.flags_at_exit != requested_) {
      notes.push_back({d.device, requested_ + " was set, " + d.flags_at_exit +
                      " is in force (the program set its own flags after)"});
    }
  }
  if (any_set && !any_active) notes.push_back({-1, "the policy was set but the program used no CUDA device"});
  if (r.cuda_used && count_ < 0 && !read_error_.empty()) notes.push_back({-1, read_error_});
  r.note = notes.empty() ? "none" : join(notes);
  return r;
}

}  // namespace threadburn::cuda
