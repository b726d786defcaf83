// The bench's one statistics helper (src/bench/stats.h) on known answers: mean and sample
// deviation, the median (mean of the middle two of an even count) against the nearest-rank
// percentile (the lower middle one), p0/p100 as min/max, empty series, and that the median
// leaves its input alone while the percentile sorts it.
// LM_TEST_LABELS: unit
#include "lm_test.h"

#include <stdbool.h>

#include "bench/stats.h"

static bool near(double a, double b) { return fabs(a - b) <= 1e-12 * (fabs(b) > 1 ? fabs(b) : 1); }

int main(void) {
    // mean and sample standard deviation
    double mean, sd;
    const double v5[5] = {2, 4, 4, 4, 6};
    lm_bench_mean_sd(v5, 5, &mean, &sd);
    CHECKF(near(mean, 4) && near(sd, sqrt(2.0)), "mean %g sd %g", mean, sd);
    lm_bench_mean_sd(v5, 1, &mean, &sd);
    CHECK(mean == 2 && sd == 0);
    lm_bench_mean_sd(v5, 0, &mean, &sd);
    CHECK(isnan(mean) && sd == 0);

    // median: middle value, or the mean of the two middle values; input untouched
    const double odd[5] = {9, 1, 5, 3, 7};
    double even[4] = {10, 2, 8, 4};
    CHECK(lm_bench_median(odd, 5) == 5);
    CHECK(lm_bench_median(even, 4) == 6);
    CHECK(even[0] == 10 && even[1] == 2 && even[2] == 8 && even[3] == 4);
    CHECK(isnan(lm_bench_median(odd, 0)));

    // nearest-rank percentiles: the smallest value with at least p% at or below it
    CHECK(lm_bench_percentile(even, 4, 50) == 4); // the lower middle value, not 6
    CHECK(even[0] == 2 && even[1] == 4 && even[2] == 8 && even[3] == 10); // sorted in place
    CHECK(lm_bench_percentile(even, 4, 75) == 8);
    CHECK(lm_bench_percentile(even, 4, 76) == 10);
    CHECK(lm_bench_percentile(even, 4, 100) == 10);
    CHECK(lm_bench_percentile(even, 4, 0) == 2);
    double hundred[100];
    for (int i = 0; i < 100; i++) hundred[i] = 100 - i; // 100 .. 1
    CHECK(lm_bench_percentile(hundred, 100, 99) == 99);
    CHECK(lm_bench_percentile(hundred, 100, 95) == 95);
    CHECK(lm_bench_percentile(hundred, 100, 50) == 50);
    double one[1] = {3.5};
    CHECK(lm_bench_percentile(one, 1, 99) == 3.5 && lm_bench_percentile(one, 1, 1) == 3.5);
    CHECK(isnan(lm_bench_percentile(one, 0, 50)));

    // range
    double lo, hi;
    lm_bench_min_max(odd, 5, &lo, &hi);
    CHECK(lo == 1 && hi == 9);
    lm_bench_min_max(odd, 0, &lo, &hi);
    CHECK(isnan(lo) && isnan(hi));
    return lm_test_finish();
}
