#include "core/rendezvous.h"

#include <climits>
#include <cstdlib>

#include "core/error.h"

namespace threadburn {
namespace {

constexpr const char* kNodelistVar = "SLURM_JOB_NODELIST";
// More hosts than any job has: a malformed range must not expand for ever.
constexpr long long kMaxHosts = 1000000;
constexpr int kMaxWorld = 1 << 20;

// A non-negative decimal integer in [min, max], digits only.
int parse_var(const char* name, const char* text, int min, int max) {
  const std::string t = text;
  const bool digits = !t.empty() && t.size() <= 10 && t.find_first_not_of("0123456789") == std::string::npos;
  const long long v = digits ? std::strtoll(t.c_str(), nullptr, 10) : -1;
  if (!digits || v < min || v > max) {
    throw Error(std::string(name) + ": expected an integer in [" + std::to_string(min) + ", " +
                std::to_string(max) + "], got '" + t + "'");
  }
  return static_cast<int>(v);
}

// The variables of one launcher.
struct Launcher {
  const char* source;
  const char* rank;
  const char* size;
  const char* local;
};
constexpr Launcher kLaunchers[] = {
    {"env", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
};

// rank, world size and local rank of the launcher; false when neither its
// rank nor its size variable is set.
bool read_launcher(const EnvGetter& env, const Launcher& l, Rendezvous* rv) {
  const char* rank = env(l.rank);
  const char* size = env(l.size);
  if (!rank && !size) return false;
  if (!size) throw Error(std::string(l.rank) + " is set but " + l.size + " is not");
  if (!rank) throw Error(std::string(l.size) + " is set but " + l.rank + " is not");
  rv->world_size = parse_var(l.size, size, 1, kMaxWorld);
  rv->rank = parse_var(l.rank, rank, 0, INT_MAX);
  if (rv->rank >= rv->world_size) {
    throw Error(std::string(l.rank) + "=" + rank + " but " + l.size + "=" + size);
  }
  rv->local_rank = rv->rank;
  if (const char* local = env(l.local)) {
    rv->local_rank = parse_var(l.local, local, 0, INT_MAX);
    if (rv->local_rank >= rv->world_size) {
      throw Error(std::string(l.local) + "=" + local + " but " + l.size + "=" + size);
    }
  }
  rv->source = l.source;
  return true;
}

// Splits at the commas outside brackets; expand_host() checks the brackets.
std::vector<std::string> split_top_level(const std::string& text) {
  std::vector<std::string> out;
  std::string cur;
  int depth = 0;
  for (char c : text) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

// "01-04,07" -> {"01", "02", "03", "04", "07"}.
std::vector<std::string> expand_ranges(const std::string& inside, const std::string& whole) {
  auto bad = [&](const std::string& what) {
    return Error(std::string(kNodelistVar) + ": " + what + " in '" + whole + "'");
  };
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t comma = inside.find(',', start);
    const std::string item = inside.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const size_t dash = item.find('-');
    const std::string lo = item.substr(0, dash);
    const std::string hi = dash == std::string::npos ? lo : item.substr(dash + 1);
    auto numeric = [](const std::string& s) {
      return !s.empty() && s.size() <= 9 && s.find_first_not_of("0123456789") == std::string::npos;
    };
    if (!numeric(lo) || !numeric(hi)) throw bad("expected a number or a range N-M, got '" + item + "'");
    const long long a = std::stoll(lo), b = std::stoll(hi);
    if (b < a) throw bad("empty range '" + item + "'");
    if (b - a + 1 > kMaxHosts) throw bad("range '" + item + "' too large");
    for (long long v = a; v <= b; ++v) {
      std::string s = std::to_string(v);
      if (s.size() < lo.size()) s.insert(0, lo.size() - s.size(), '0');  // "01-04": width 2
      out.push_back(s);
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// One host expression, brackets anywhere: "r[1-2]-n[01-02]" -> 4 hosts.
std::vector<std::string> expand_host(const std::string& expr, const std::string& whole) {
  std::vector<std::string> hosts = {""};
  size_t i = 0;
  while (i < expr.size()) {
    const size_t open = expr.find('[', i);
    const std::string literal = expr.substr(i, open == std::string::npos ? std::string::npos : open - i);
    if (literal.find(']') != std::string::npos) {
      throw Error(std::string(kNodelistVar) + ": unbalanced ']' in '" + whole + "'");
    }
    for (auto& h : hosts) h += literal;
    if (open == std::string::npos) break;
    const size_t close = expr.find(']', open);
    if (close == std::string::npos) throw Error(std::string(kNodelistVar) + ": unbalanced '[' in '" + whole + "'");
    const std::vector<std::string> values = expand_ranges(expr.substr(open + 1, close - open - 1), whole);
    std::vector<std::string> next;
    if (static_cast<long long>(hosts.size()) * static_cast<long long>(values.size()) > kMaxHosts) {
      throw Error(std::string(kNodelistVar) + ": too many hosts in '" + whole + "'");
    }
    next.reserve(hosts.size() * values.size());
    for (const auto& h : hosts) {
      for (const auto& v : values) next.push_back(h + v);
    }
    hosts = std::move(next);
    i = close + 1;
  }
  return hosts;
}

}  // namespace

std::vector<std::string> expand_nodelist(const std::string& text) {
  if (text.empty()) throw Error(std::string(kNodelistVar) + ": empty host list");
  std::vector<std::string> out;
  for (const std::string& item : split_top_level(text)) {
    for (auto& h : expand_host(item, text)) {
      if (h.empty()) throw Error(std::string(kNodelistVar) + ": empty host name in '" + text + "'");
      out.push_back(std::move(h));
    }
  }
  return out;
}

Rendezvous rendezvous_from_env(const EnvGetter& env) {
  Rendezvous rv;
  for (const Launcher& l : kLaunchers) {
    if (read_launcher(env, l, &rv)) break;
  }
  // The batch script of `sbatch -n N` has SLURM_PROCID=0 and SLURM_NTASKS=N
  // too, but no step: it would wait for N - 1 peers that never come.
  if (rv.source == "slurm" && rv.world_size > 1 && !env("SLURM_STEP_ID")) {
    throw Error("SLURM_NTASKS=" + std::to_string(rv.world_size) +
                " outside a job step (no SLURM_STEP_ID: the batch script itself): start the ranks with srun");
  }
  if (const char* addr = env("MASTER_ADDR")) {
    if (*addr == '\0') throw Error("MASTER_ADDR is set but empty");
    rv.master_addr = addr;
  } else if (rv.source == "slurm") {
    const char* nodes = env(kNodelistVar);
    if (nodes) {
      rv.master_addr = expand_nodelist(nodes).front();
    } else if (rv.world_size > 1) {
      throw Error(std::string(kNodelistVar) + " is not set (the master's host with SLURM_NTASKS=" +
                  std::to_string(rv.world_size) + "); set MASTER_ADDR instead");
    }
  }
  if (const char* port = env("MASTER_PORT")) rv.master_port = parse_var("MASTER_PORT", port, 1, 65535);
  return rv;
}

Rendezvous rendezvous_from_env() {
  return rendezvous_from_env([](const char* n) { return std::getenv(n); });
}

}  // namespace threadburn
