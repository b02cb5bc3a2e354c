// Precompiled header for every torch translation unit: torch/torch.h costs
// ~20 s per TU on this 2-core machine; compiled once, it is shared (REUSE_FROM).
#pragma once
#include <torch/torch.h>
