// The statistics every bench figure is reported with: mean and standard deviation, median,
// nearest-rank percentiles, range. One definition each, so every table reads alike.
#ifndef LM_BENCH_STATS_H
#define LM_BENCH_STATS_H

// Mean of v[0, n) and its sample standard deviation (n - 1 in the denominator; 0 for n = 1).
// n = 0: mean NAN, sd 0.
void lm_bench_mean_sd(const double *v, int n, double *mean, double *sd);
// The middle value of v[0, n), the mean of the two middle ones for an even n (v is not
// changed). NAN for n <= 0 or when the copy cannot be allocated.
double lm_bench_median(const double *v, int n);
// Nearest-rank p-th percentile (p in [0, 100]) of v[0, n): the smallest value with at least
// p% of the values at or below it (p = 50 of an even count is the lower middle value, p = 100
// the maximum). Sorts v in place. NAN for n <= 0.
double lm_bench_percentile(double *v, int n, double p);
// Smallest and largest of v[0, n); both NAN for n <= 0.
void lm_bench_min_max(const double *v, int n, double *min, double *max);

#endif
