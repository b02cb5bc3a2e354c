// Summary statistics as pure functions of a sample vector.
#pragma once

#include <vector>

namespace threadburn {

// Linear interpolation between closest ranks (R's type 7, numpy's default); q in [0,1].
double percentile(std::vector<double> values, double q);
double median(const std::vector<double>& values);
double mean(const std::vector<double>& values);
// Sample standard deviation (n-1); 0 for fewer than two values.
double stddev(const std::vector<double>& values);
// Coefficient of variation, stddev / |mean|; 0 when the mean is 0.
double cv(const std::vector<double>& values);

}  // namespace threadburn
