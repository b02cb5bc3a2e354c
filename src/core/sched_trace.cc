#include "core/sched_trace.h"

#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <map>

#include "core/clock.h"

namespace threadburn {
namespace {

// The tracepoints, in the order of their SchedKinds (kWakeup, kWakeupNew, kMigrate).
const char* const kEvents[] = {"sched/sched_wakeup", "sched/sched_wakeup_new", "sched/sched_migrate_task"};
constexpr int kEventCount = sizeof kEvents / sizeof kEvents[0];
constexpr SchedKind kFirstTracepointKind = SchedKind::kWakeup;
// sample_id (sample_id_all) and the samples' fixed part with TID | TIME | CPU:
// {u32 pid, tid}, {u64 time}, {u32 cpu, res} (linux/perf_event.h).
constexpr uint64_t kSampleType = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU;
constexpr size_t kSampleIdSize = 24;

struct SampleId {
  uint32_t pid = 0, tid = 0, cpu = 0;
  uint64_t time = 0;
};

SampleId sample_id(const uint8_t* p) {
  SampleId id;
  std::memcpy(&id.pid, p, 4);
  std::memcpy(&id.tid, p + 4, 4);
  std::memcpy(&id.time, p + 8, 8);
  std::memcpy(&id.cpu, p + 16, 4);
  return id;
}

// "0-1,4" -> {0, 1, 4}
std::vector<int> online_cpus() {
  std::ifstream in("/sys/devices/system/cpu/online");
  std::string text;
  std::vector<int> out;
  if (!std::getline(in, text)) {
    const long n = sysconf(_SC_NPROCESSORS_CONF);
    for (int c = 0; c < n; ++c) out.push_back(c);
    return out;
  }
  size_t at = 0;
  while (at < text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string part = text.substr(at, comma - at);
    const int lo = std::atoi(part.c_str());
    const size_t dash = part.find('-');
    const int hi = dash == std::string::npos ? lo : std::atoi(part.c_str() + dash + 1);
    for (int c = lo; c <= hi; ++c) out.push_back(c);
    at = comma + 1;
  }
  return out;
}

std::string paranoid_level() {
  std::ifstream in("/proc/sys/kernel/perf_event_paranoid");
  std::string v;
  return std::getline(in, v) ? v : "?";
}

long perf_event_open(perf_event_attr* attr, int cpu) {
  return ::syscall(SYS_perf_event_open, attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
}

void copy_comm(char (&dst)[16], const std::string& s) {
  std::memset(dst, 0, sizeof dst);
  std::memcpy(dst, s.data(), std::min(s.size(), sizeof dst - 1));
}

}  // namespace

// Each event's format and the fields each kind reads.
struct SchedTracer::Decoder {
  TraceFormat formats[kEventCount];
  std::map<int, int> kind_of_id;  // tracepoint id -> index in kEvents
  const TraceField* type = nullptr;
  struct Fields {
    const TraceField *a = nullptr, *b = nullptr, *comm = nullptr;
  } fields[kEventCount];

  Availability init(const std::string& dir) {
    const char* names[kEventCount][3] = {
        {"pid", "target_cpu", "comm"},
        {"pid", "target_cpu", "comm"},
        {"pid", "dest_cpu", "comm"},
    };
    for (int k = 0; k < kEventCount; ++k) {
      if (Availability a = read_trace_format(dir, kEvents[k], &formats[k]); !a.ok) return a;
      kind_of_id[formats[k].id] = k;
      const TraceField** slots[3] = {&fields[k].a, &fields[k].b, &fields[k].comm};
      for (int i = 0; i < 3; ++i) {
        *slots[i] = formats[k].field(names[k][i]);
        if (!*slots[i]) return Availability::no(std::string(kEvents[k]) + ": no field " + names[k][i] + " in its format");
      }
    }
    type = formats[0].field("common_type");
    if (!type) return Availability::no(std::string(kEvents[0]) + ": no field common_type in its format");
    return Availability::yes();
  }
};

Availability SchedTracer::open(std::unique_ptr<SchedTracer>* out, const Options& options) {
  std::unique_ptr<SchedTracer> t(new SchedTracer);
  if (Availability a = find_tracefs(&t->tracefs_, &t->mounted_); !a.ok) return a;
  t->decoder_ = std::make_unique<Decoder>();
  if (Availability a = t->decoder_->init(t->tracefs_); !a.ok) return a;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  for (int cpu : online_cpus()) {
    Ring ring;
    ring.cpu = cpu;
    // Event -1: perf's own records (switches, fork, exit, comm) on a dummy
    // event that owns the ring; then the tracepoints, written into it.
    for (int k = -1; k < kEventCount; ++k) {
      perf_event_attr attr{};
      attr.size = sizeof attr;
      if (k < 0) {
        attr.type = PERF_TYPE_SOFTWARE;
        attr.config = PERF_COUNT_SW_DUMMY;
        attr.context_switch = 1;
        attr.task = 1;
        attr.comm = 1;
        attr.comm_exec = 1;
      } else {
        attr.type = PERF_TYPE_TRACEPOINT;
        attr.config = static_cast<uint64_t>(t->decoder_->formats[k].id);
        attr.sample_period = 1;
        attr.sample_type = kSampleType | PERF_SAMPLE_RAW;
      }
      if (k < 0) attr.sample_type = kSampleType;
      attr.sample_id_all = 1;
      attr.disabled = 1;
      attr.use_clockid = 1;
      attr.clockid = CLOCK_MONOTONIC;  // the monitor's own clock: no conversion
      const char* what = k < 0 ? "context switches" : kEvents[k];
      const long fd = perf_event_open(&attr, cpu);
      if (fd < 0) {
        const int e = errno;
        for (int f : ring.fds) ::close(f);
        if (ring.base) ::munmap(ring.base, ring.length);
        if (e == EACCES || e == EPERM) {
          return Availability::no(std::string("perf_event_open(") + what + "): " + std::strerror(e) +
                                  " (kernel.perf_event_paranoid=" + paranoid_level() +
                                  "; system-wide scheduler events need root, CAP_PERFMON or paranoid -1)");
        }
        return Availability::no(std::string("perf_event_open(") + what + ", cpu " + std::to_string(cpu) +
                                "): " + std::strerror(e));
      }
      ring.fds.push_back(static_cast<int>(fd));
      if (k < 0) {
        ring.length = page * static_cast<size_t>(1 + options.ring_pages);
        void* base = ::mmap(nullptr, ring.length, PROT_READ | PROT_WRITE, MAP_SHARED, static_cast<int>(fd), 0);
        if (base == MAP_FAILED) {
          const int e = errno;
          for (int f : ring.fds) ::close(f);
          return Availability::no(std::string("mmap of the perf ring buffer: ") + std::strerror(e));
        }
        ring.base = static_cast<uint8_t*>(base);
      } else if (::ioctl(static_cast<int>(fd), PERF_EVENT_IOC_SET_OUTPUT, ring.fds[0]) != 0) {
        const int e = errno;
        ::munmap(ring.base, ring.length);
        for (int f : ring.fds) ::close(f);
        return Availability::no(std::string("PERF_EVENT_IOC_SET_OUTPUT: ") + std::strerror(e));
      }
    }
    t->rings_.push_back(std::move(ring));
  }
  if (t->rings_.empty()) return Availability::no("perf_event_open: no online CPU could be traced");
  for (Ring& r : t->rings_) {
    for (int fd : r.fds) ::ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
  }
  t->start_ns_ = wall_ns();
  *out = std::move(t);
  return Availability::yes();
}

SchedTracer::~SchedTracer() {
  for (Ring& r : rings_) {
    if (r.base) ::munmap(r.base, r.length);
    for (int fd : r.fds) ::close(fd);
  }
}

void SchedTracer::stop() {
  for (Ring& r : rings_) {
    for (int fd : r.fds) ::ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
  }
}

std::string SchedTracer::description() const {
  std::string out = "context switches, fork, exit, comm";
  for (int k = 0; k < kEventCount; ++k) out += ", " + std::string(kEvents[k] + 6);
  return out + " on " + std::to_string(rings_.size()) + " CPUs (tracefs " + tracefs_ + ")";
}

void SchedTracer::drain(Ring* ring) {
  auto* meta = reinterpret_cast<perf_event_mmap_page*>(ring->base);
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const uint64_t size = meta->data_size ? meta->data_size : ring->length - page;
  const uint8_t* data = ring->base + (meta->data_offset ? meta->data_offset : page);
  const uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
  uint64_t tail = meta->data_tail;
  while (tail < head) {
    perf_event_header hdr;
    for (size_t i = 0; i < sizeof hdr; ++i) reinterpret_cast<uint8_t*>(&hdr)[i] = data[(tail + i) % size];
    if (hdr.size < sizeof hdr) break;  // never, unless the ring is corrupt
    scratch_.resize(hdr.size);
    const uint64_t at = tail % size;
    const uint64_t first = std::min<uint64_t>(hdr.size, size - at);
    std::memcpy(scratch_.data(), data + at, first);
    std::memcpy(scratch_.data() + first, data, hdr.size - first);
    if (hdr.type == PERF_RECORD_LOST && hdr.size >= sizeof hdr + 16) {
      uint64_t n;
      std::memcpy(&n, scratch_.data() + sizeof hdr + 8, 8);
      lost_ += static_cast<int64_t>(n);
    } else {
      decode(scratch_.data(), hdr.size);
    }
    tail += hdr.size;
  }
  __atomic_store_n(&meta->data_tail, tail, __ATOMIC_RELEASE);
}

// perf's own records: the body, then sample_id at the end.
void SchedTracer::decode(const uint8_t* rec, size_t size) {
  perf_event_header hdr;
  std::memcpy(&hdr, rec, sizeof hdr);
  if (hdr.type == PERF_RECORD_SAMPLE) return decode_sample(rec, size);
  if (size < sizeof hdr + kSampleIdSize) return;
  const SampleId id = sample_id(rec + size - kSampleIdSize);
  const uint8_t* body = rec + sizeof hdr;
  const size_t body_size = size - sizeof hdr - kSampleIdSize;
  SchedEvent e;
  e.t_ns = static_cast<int64_t>(id.time);
  e.cpu = static_cast<int32_t>(id.cpu);
  uint32_t f[4] = {};
  std::memcpy(f, body, std::min<size_t>(body_size, sizeof f));
  switch (hdr.type) {
    case PERF_RECORD_SWITCH_CPU_WIDE:  // {u32 next_prev_pid, next_prev_tid}
      if (body_size < 8) return;
      e.kind = (hdr.misc & PERF_RECORD_MISC_SWITCH_OUT) ? SchedKind::kSwitchOut : SchedKind::kSwitchIn;
      e.pid = static_cast<pid_t>(id.pid);
      e.tid = static_cast<pid_t>(id.tid);
      e.b = static_cast<pid_t>(f[0]);
      e.a = static_cast<pid_t>(f[1]);
      e.runnable = (hdr.misc & PERF_RECORD_MISC_SWITCH_OUT_PREEMPT) != 0;
      break;
    case PERF_RECORD_FORK:  // {u32 pid, ppid, tid, ptid; u64 time}
    case PERF_RECORD_EXIT:
      if (body_size < 16) return;
      e.kind = hdr.type == PERF_RECORD_FORK ? SchedKind::kFork : SchedKind::kExit;
      e.pid = static_cast<pid_t>(f[0]);
      e.b = static_cast<pid_t>(f[1]);
      e.tid = static_cast<pid_t>(f[2]);
      e.a = static_cast<pid_t>(f[3]);
      break;
    case PERF_RECORD_COMM:  // {u32 pid, tid; char comm[]}
      if (body_size < 8) return;
      e.kind = SchedKind::kComm;
      e.pid = static_cast<pid_t>(f[0]);
      e.tid = static_cast<pid_t>(f[1]);
      copy_comm(e.comm, std::string(reinterpret_cast<const char*>(body + 8), strnlen(reinterpret_cast<const char*>(body + 8), body_size - 8)));
      e.runnable = (hdr.misc & PERF_RECORD_MISC_COMM_EXEC) != 0;
      break;
    default:
      return;
  }
  if (e.t_ns < start_ns_) return;
  ++records_;
  pending_.push_back(e);
}

// A tracepoint's sample: header, the fixed part, {u32 size, raw[size]}.
void SchedTracer::decode_sample(const uint8_t* rec, size_t size) {
  const size_t fixed = sizeof(perf_event_header) + kSampleIdSize + 4;
  if (size < fixed) return;
  const SampleId id = sample_id(rec + sizeof(perf_event_header));
  uint32_t raw_size;
  std::memcpy(&raw_size, rec + sizeof(perf_event_header) + kSampleIdSize, 4);
  const uint8_t* raw = rec + fixed;
  if (fixed + raw_size > size) return;
  const Decoder& d = *decoder_;
  const auto it = d.kind_of_id.find(static_cast<int>(trace_int(*d.type, raw, raw_size)));
  if (it == d.kind_of_id.end()) return;
  const int k = it->second;
  const Decoder::Fields& f = d.fields[k];
  SchedEvent e;
  e.t_ns = static_cast<int64_t>(id.time);
  e.cpu = static_cast<int32_t>(id.cpu);
  e.kind = static_cast<SchedKind>(static_cast<int>(kFirstTracepointKind) + k);
  e.pid = static_cast<pid_t>(id.pid);
  e.tid = static_cast<pid_t>(id.tid);
  e.a = static_cast<pid_t>(trace_int(*f.a, raw, raw_size));
  e.b = static_cast<pid_t>(trace_int(*f.b, raw, raw_size));
  copy_comm(e.comm, trace_str(*f.comm, raw, raw_size));
  if (e.t_ns < start_ns_) return;
  ++records_;
  pending_.push_back(e);
}

void SchedTracer::read(std::vector<SchedEvent>* out, int64_t before_ns) {
  const size_t old = pending_.size();
  for (Ring& r : rings_) drain(&r);
  // Each ring is in time order; merge them (ties keep ring order).
  std::stable_sort(pending_.begin() + static_cast<std::ptrdiff_t>(old), pending_.end(),
                   [](const SchedEvent& x, const SchedEvent& y) { return x.t_ns < y.t_ns; });
  std::inplace_merge(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(old), pending_.end(),
                     [](const SchedEvent& x, const SchedEvent& y) { return x.t_ns < y.t_ns; });
  const auto cut = std::lower_bound(pending_.begin(), pending_.end(), before_ns,
                                    [](const SchedEvent& e, int64_t t) { return e.t_ns < t; });
  out->insert(out->end(), pending_.begin(), cut);
  pending_.erase(pending_.begin(), cut);
}

}  // namespace threadburn
