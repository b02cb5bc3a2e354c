#include "workload/ddp.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <set>

// Debian's libtorch is built with gloo; its header declares ProcessGroupGloo
// only under this macro (torch's own build defines it).
#ifndef USE_C10D_GLOO
#define USE_C10D_GLOO 1
#endif
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "core/error.h"
#include "core/procfs.h"
#include "core/thread_class.h"

namespace threadburn {

struct DdpGroup::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg;
};

namespace {

using WorkList = std::vector<c10::intrusive_ptr<c10d::Work>>;

// c10d's and gloo's messages, first line only (c10::Error appends a backtrace).
std::string first_line(const std::exception& e) {
  const auto* c10e = dynamic_cast<const c10::Error*>(&e);
  std::string s = c10e ? c10e->what_without_backtrace() : e.what();
  s = s.substr(0, s.find('\n'));
  while (!s.empty() && (s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s.empty() ? "unknown error" : s;
}

bool is_loopback(const std::string& host) {
  return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1";
}

// The local address this host reaches `host` from (a UDP connect sends nothing).
std::string local_address_toward(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0 || !res) {
    throw Error("MASTER_ADDR: cannot resolve '" + host + "'");
  }
  std::string out;
  const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  if (fd >= 0 && ::connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
    sockaddr_in local{};
    socklen_t len = sizeof(local);
    char buf[INET_ADDRSTRLEN] = {};
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0 &&
        ::inet_ntop(AF_INET, &local.sin_addr, buf, sizeof(buf))) {
      out = buf;
    }
  }
  if (fd >= 0) ::close(fd);
  ::freeaddrinfo(res);
  if (out.empty()) throw Error("MASTER_ADDR: no route from this host to '" + host + "'");
  return out;
}

std::set<pid_t> task_ids() {
  std::set<pid_t> out;
  for (const auto& t : read_threads(0)) out.insert(t.tid);
  return out;
}

}  // namespace

DdpGroup::DdpGroup(const Rendezvous& rv, std::chrono::milliseconds timeout)
    : rank_(rv.rank), world_size_(rv.world_size), timeout_(timeout), impl_(std::make_unique<Impl>()) {
  // c10d logs its socket errors through glog as well as throwing them: the
  // exception becomes the program's one error line, so only FATAL is logged
  // unless TORCH_CPP_LOG_LEVEL asks for more.
  if (!std::getenv("TORCH_CPP_LOG_LEVEL")) FLAGS_minloglevel = google::GLOG_FATAL;
  const std::string who = "rank " + std::to_string(rank_) + " of " + std::to_string(world_size_);
  const std::string master = rv.master_addr + ":" + std::to_string(rv.master_port);
  const std::set<pid_t> before = task_ids();
  // The store: rank 0 serves it and waits until every rank has connected.
  try {
    if (world_size_ == 1) {
      impl_->store = c10::make_intrusive<c10d::HashStore>();
    } else {
      c10d::TCPStoreOptions so;
      so.port = static_cast<std::uint16_t>(rv.master_port);
      so.isServer = rank_ == 0;
      // TCPStore's own wait for the workers gives up silently after the
      // timeout: wait_for_ranks() waits instead, and names who is missing.
      so.waitWorkers = false;
      so.timeout = timeout;
      impl_->store = c10::make_intrusive<c10d::TCPStore>(rv.master_addr, so);
    }
  } catch (const std::exception& e) {
    throw Error(who + ": " + (rank_ == 0 ? "serving" : "joining") + " the TCPStore at " + master + " (" +
                rv.source + " rendezvous) failed: " + first_line(e));
  }
  wait_for_ranks(who, master);
  // gloo's device, then the process group (a full mesh of TCP pairs).
  try {
    auto opts = c10d::ProcessGroupGloo::Options::create(timeout);
    const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
    if (ifname && *ifname) {
      opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
      device_address_ = std::string("interface ") + ifname;
    } else {
      device_address_ = world_size_ == 1 || is_loopback(rv.master_addr)
                            ? "127.0.0.1"
                            : local_address_toward(rv.master_addr, rv.master_port);
      opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(device_address_));
    }
    impl_->pg = c10::make_intrusive<c10d::ProcessGroupGloo>(impl_->store, rank_, world_size_, opts);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(who + ": creating the gloo process group failed: " + first_line(e));
  }
  barrier();  // the first all-reduce: gloo's threads have all started by its end
  // By creation window: whatever appeared since `before` is c10d's / gloo's.
  for (pid_t tid : task_ids()) {
    if (!before.count(tid)) {
      mark_thread(tid, ThreadClass::kGloo);
      gloo_threads_.push_back(tid);
    }
  }
}

DdpGroup::~DdpGroup() = default;

void DdpGroup::wait_for_ranks(const std::string& who, const std::string& master) {
  if (world_size_ == 1) return;
  auto key = [](int r) { return "threadburn/arrived/" + std::to_string(r); };
  std::vector<std::string> keys;
  for (int r = 0; r < world_size_; ++r) keys.push_back(key(r));
  try {
    impl_->store->set(key(rank_), {'1'});
    impl_->store->wait(keys, timeout_);
  } catch (const std::exception& e) {
    std::string missing;
    try {
      for (int r = 0; r < world_size_; ++r) {
        if (!impl_->store->check({key(r)})) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      }
    } catch (const std::exception&) {
      missing.clear();
    }
    if (missing.empty()) throw Error(who + ": waiting for the other ranks at " + master + " failed: " + first_line(e));
    throw Error(who + ": rank(s) " + missing + " did not arrive at " + master + " within " +
                std::to_string(timeout_.count() / 1000) + " s (started? same MASTER_ADDR/MASTER_PORT?)");
  }
}

namespace {

void wait_all(WorkList& works, std::chrono::milliseconds timeout, const std::string& who, const char* what) {
  try {
    for (auto& w : works) w->wait(timeout);
  } catch (const std::exception& e) {
    throw Error(who + ": " + what + " failed (timeout " + std::to_string(timeout.count() / 1000) +
                " s; did a rank die or run different benchmarks?): " + first_line(e));
  }
}

std::string who_of(int rank, int world) { return "rank " + std::to_string(rank) + " of " + std::to_string(world); }

}  // namespace

void DdpGroup::barrier() {
  std::vector<at::Tensor> t = {torch::ones({1}, torch::kInt32)};
  WorkList works;
  try {
    works.push_back(impl_->pg->allreduce(t));
  } catch (const std::exception& e) {
    throw Error(who_of(rank_, world_size_) + ": barrier failed: " + first_line(e));
  }
  wait_all(works, timeout_, who_of(rank_, world_size_), "barrier");
  if (t[0].item<int>() != world_size_) {
    throw Error(who_of(rank_, world_size_) + ": barrier counted " + std::to_string(t[0].item<int>()) + " ranks");
  }
}

void DdpGroup::allreduce_sum(std::vector<torch::Tensor>& tensors) {
  WorkList works;
  try {
    for (auto& x : tensors) {
      std::vector<at::Tensor> one = {x};
      works.push_back(impl_->pg->allreduce(one));
    }
  } catch (const std::exception& e) {
    throw Error(who_of(rank_, world_size_) + ": all-reduce failed: " + first_line(e));
  }
  wait_all(works, timeout_, who_of(rank_, world_size_), "all-reduce");
}

void DdpGroup::broadcast(std::vector<torch::Tensor>& tensors, int root) {
  torch::NoGradGuard no_grad;
  WorkList works;
  try {
    for (auto& x : tensors) {
      std::vector<at::Tensor> one = {x};
      c10d::BroadcastOptions o;
      o.rootRank = root;
      works.push_back(impl_->pg->broadcast(one, o));
    }
  } catch (const std::exception& e) {
    throw Error(who_of(rank_, world_size_) + ": broadcast failed: " + first_line(e));
  }
  wait_all(works, timeout_, who_of(rank_, world_size_), "broadcast");
}

void DdpGroup::check_same(const std::string& what, const std::string& text) {
  if (world_size_ == 1) return;
  auto key = [&](const char* kind, int r) { return "threadburn/" + what + "/" + kind + "/" + std::to_string(r); };
  // Both texts from a little before their first difference, 100 characters.
  auto excerpts = [](const std::string& a, const std::string& b) {
    size_t i = 0;
    while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
    const size_t from = i > 30 ? i - 30 : 0;
    auto cut = [&](const std::string& s) {
      const std::string t = s.substr(std::min(from, s.size()), 100);
      return (from > 0 ? "..." : "") + t + (from + 100 < s.size() ? "..." : "");
    };
    return "'" + cut(a) + "' vs '" + cut(b) + "'";
  };
  const std::string who = who_of(rank_, world_size_);
  // Rank 0 compares with every rank, every other rank with rank 0; nobody
  // leaves (rank 0's exit would take the store along) before all compared.
  std::vector<int> others;
  for (int r = 0; r < world_size_; ++r) {
    if (r != rank_ && (rank_ == 0 || r == 0)) others.push_back(r);
  }
  std::string mismatch;
  try {
    impl_->store->set(key("text", rank_), std::vector<uint8_t>(text.begin(), text.end()));
    for (int r : others) {
      const std::vector<uint8_t> v = impl_->store->get(key("text", r));
      const std::string theirs(v.begin(), v.end());
      if (theirs != text && mismatch.empty()) {
        const int odd = rank_ == 0 ? r : rank_;
        mismatch = who + ": rank " + std::to_string(odd) + "'s " + what +
                   " differs from rank 0's (start every rank with the same flags): " +
                   excerpts(rank_ == 0 ? theirs : text, rank_ == 0 ? text : theirs);
      }
    }
    impl_->store->set(key("done", rank_), {'1'});
    std::vector<std::string> done;
    for (int r = 0; r < world_size_; ++r) done.push_back(key("done", r));
    impl_->store->wait(done, timeout_);
  } catch (const std::exception& e) {
    if (mismatch.empty()) {
      throw Error(who + ": comparing the " + what + " with the other ranks failed: " + first_line(e));
    }
  }
  if (!mismatch.empty()) throw Error(mismatch);
}

ImageSet shard_of(const ImageSet& set, int rank, int world_size) {
  if (world_size == 1) return set;
  const torch::Tensor idx = torch::arange(rank, set.size(), world_size, torch::kLong);
  return {set.images.index_select(0, idx), set.labels.index_select(0, idx)};
}

int64_t smallest_shard(int64_t examples, int world_size) { return examples / world_size; }

std::vector<std::vector<size_t>> assign_buckets(const std::vector<int64_t>& numel_bytes, int64_t bucket_bytes) {
  std::vector<std::vector<size_t>> out;
  std::vector<size_t> cur;
  int64_t size = 0;
  int64_t limit = std::min(kDdpFirstBucketBytes, bucket_bytes);
  for (size_t k = numel_bytes.size(); k-- > 0;) {
    cur.push_back(k);
    size += numel_bytes[k];
    if (size >= limit) {
      out.push_back(std::move(cur));
      cur.clear();
      size = 0;
      limit = bucket_bytes;
    }
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

namespace {

PipelineOptions pipeline_of(const DdpOptions& o, int rank) {
  PipelineOptions po;
  po.batch = o.batch;
  po.workers = 0;  // batches on the main thread: the gloo threads are the only helpers
  po.augment = o.augment;
  po.device = o.device;
  po.seed = 1 + static_cast<uint64_t>(rank);
  return po;
}

}  // namespace

const CounterTable& ddp_counters() {
  static const CounterTable table = {
      {"allreduce_ms", "ms",
       "data-parallel steps: gradients into the buckets, every bucket's all-reduce and its wait, the mean back"},
      {"world_size", "1", "data-parallel steps: ranks in the process group"},
      {"rank", "1", "data-parallel steps: this process's rank"},
      {"buckets", "1", "data-parallel steps: gradient buckets, one all-reduce each per step"},
      {"param_checksum", "1",
       "data-parallel steps: 48-bit hash of the parameters after the last step, equal on every rank when in step"},
  };
  return table;
}

DdpWorkload::DdpWorkload(const std::string& model, const ImageSet& shard, DdpGroup& group,
                         const DdpOptions& options)
    : group_(group), train_(model, shard, pipeline_of(options, group.rank())), params_(train_.parameters()) {
  if (options.device.is_cuda()) throw Error("--device: ddp_step_bench runs on the CPU only");
  group_.broadcast(params_, 0);  // every replica starts from rank 0's parameters
  std::vector<int64_t> bytes;
  for (const auto& p : params_) bytes.push_back(p.numel() * static_cast<int64_t>(p.element_size()));
  for (auto& indices : assign_buckets(bytes, options.bucket_mb * 1024 * 1024)) {
    Bucket b;
    int64_t n = 0;
    for (size_t k : indices) {
      b.offsets.push_back(n);
      n += params_[k].numel();
    }
    b.params = std::move(indices);
    b.flat = torch::zeros({n}, params_.front().options().requires_grad(false));
    buckets_.push_back(std::move(b));
  }
  train_.set_gradient_hook("allreduce_ms", [this] { reduce_gradients(); });
}

// What DDP's reducer does, after backward rather than overlapped with it:
// each bucket gets its gradients copied in and its all-reduce launched (as
// DDP launches a bucket once its last gradient is ready), then every bucket
// is waited for and its mean copied back into the gradients.
void DdpWorkload::reduce_gradients() {
  torch::NoGradGuard no_grad;
  const std::string who = who_of(group_.rank(), group_.world_size());
  WorkList works;
  try {
    for (auto& b : buckets_) {
      for (size_t i = 0; i < b.params.size(); ++i) {
        const torch::Tensor& p = params_[b.params[i]];
        torch::Tensor slice = b.flat.narrow(0, b.offsets[i], p.numel());
        if (p.grad().defined()) {
          slice.copy_(p.grad().reshape({-1}));
        } else {
          slice.zero_();
        }
      }
      std::vector<at::Tensor> one = {b.flat};
      works.push_back(group_.impl_->pg->allreduce(one));
    }
  } catch (const std::exception& e) {
    throw Error(who + ": gradient all-reduce failed: " + first_line(e));
  }
  wait_all(works, group_.timeout(), who, "gradient all-reduce");
  const double world = static_cast<double>(group_.world_size());
  for (auto& b : buckets_) {
    b.flat.div_(world);
    for (size_t i = 0; i < b.params.size(); ++i) {
      torch::Tensor& p = params_[b.params[i]];
      torch::Tensor slice = b.flat.narrow(0, b.offsets[i], p.numel());
      if (p.grad().defined()) {
        p.mutable_grad().copy_(slice.view_as(p));
      } else {
        p.mutable_grad() = slice.view_as(p).clone();
      }
    }
  }
}

int64_t DdpWorkload::param_checksum() const {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a
  for (const auto& p : params_) {
    const torch::Tensor c = p.detach().to(torch::kCPU).contiguous();
    const auto* bytes = static_cast<const unsigned char*>(c.data_ptr());
    const size_t n = static_cast<size_t>(c.numel()) * c.element_size();
    for (size_t i = 0; i < n; ++i) {
      h ^= bytes[i];
      h *= 1099511628211ULL;
    }
  }
  return static_cast<int64_t>(h & ((1ULL << 48) - 1));
}

}  // namespace threadburn
