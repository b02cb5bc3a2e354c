// A stand-in for oneDNN, as far as the preload probe asks it (src/runtime/
// runtime.cc, dnnl_cpu_isa): the two entry points it looks up in whichever
// loaded library exports them. The ISA it reports is Granite Rapids', whose
// name (20 bytes once the probe strips "cpu_isa_") is longer than a
// std::string holds inline: the probe must keep it alive until its exit
// report reads it (tests/bench/check_probe.py, case long_isa), on any CPU.
// Preloaded after the probe; the value FAKE_DNNL_ISA, when set, replaces it.
#include <stdlib.h>

#define FAKE_DNNL_ISA_CODE 0x7fff

int dnnl_get_effective_cpu_isa(void) { return FAKE_DNNL_ISA_CODE; }

const char* dnnl_cpu_isa2str(int isa) {
  const char* forced = getenv("FAKE_DNNL_ISA");
  if (isa != FAKE_DNNL_ISA_CODE) return "cpu_isa_unknown";
  return forced && *forced ? forced : "cpu_isa_avx512_core_amx_fp16";
}
