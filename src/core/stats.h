// Summary statistics as pure functions of a sample vector.
#pragma once

#include <cstddef>
#include <vector>

namespace threadburn {

struct Summary {
  size_t n = 0;
  double mean = 0, median = 0, stddev = 0, cv = 0, min = 0, max = 0, p10 = 0, p90 = 0;
};

// Linear interpolation between closest ranks (R's type 7, numpy's default); q in [0,1].
double percentile(std::vector<double> values, double q);
double median(const std::vector<double>& values);
double mean(const std::vector<double>& values);
// Sample standard deviation (n-1); 0 for fewer than two values.
double stddev(const std::vector<double>& values);
Summary summarize(const std::vector<double>& values);

}  // namespace threadburn
