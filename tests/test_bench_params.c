// What `lumen bench` checks and derives before it measures (src/bench/bench.h, parallel.h,
// arrival.h, bandwidth.h, prompt.h), without a model: the defaults lm_bench_params_resolve
// fills, each usage error and its message, the positions the runs need, the bandwidth lookup
// by thread count, the prompts of a batched run's requests, the medians of arrival runs, and
// the sampling chain of each mode and its description.
// LM_TEST_LABELS: unit
#include "lm_test.h"

#include "bench/bench.h"
#include "bench/prompt.h"
#include "bench/sampling.h"
#include "lumen_prof.h"

static struct lm_bench_list list1(int v) { return (struct lm_bench_list){.v = {v}, .n = 1}; }

// resolve p; true when it fails with a message containing msg
static bool refused(struct lm_bench_params p, const char *msg) {
    const enum lm_status st = lm_bench_params_resolve(&p);
    if (st == LM_ERR_ARG && strstr(lm_error_msg(), msg)) return true;
    fprintf(stderr, "  resolve: %s: '%s' (wanted '%s')\n", lm_status_name(st), lm_error_msg(), msg);
    return false;
}

static void test_resolve(void) {
    struct lm_bench_params p = lm_bench_params_default();
    CHECK(p.reps == 5 && p.warmup == 1 && p.bw_mib == 512 && p.ttft == 0 && !p.breakdown);
    CHECK(lm_bench_params_resolve(&p) == LM_OK);
    CHECK(p.prompt.n == 1 && p.prompt.v[0] == 512 && p.gen.n == 1 && p.gen.v[0] == 128);
    CHECK(p.threads.n == 1 && p.threads.v[0] >= 1 && p.threads.v[0] <= LM_PROF_MAX_THREADS);
    // given lists stay
    p = lm_bench_params_default();
    p.prompt = (struct lm_bench_list){.v = {16, 0, 32}, .n = 3};
    p.threads = (struct lm_bench_list){.v = {2, 1}, .n = 2};
    CHECK(lm_bench_params_resolve(&p) == LM_OK);
    CHECK(p.prompt.n == 3 && p.prompt.v[1] == 0 && p.threads.n == 2 && p.threads.v[0] == 2);

    // --parallel: prompt 64 by default, one -p and one -n >= 2, no --breakdown or --ttft
    p = lm_bench_params_default();
    p.parallel = (struct lm_bench_list){.v = {1, 8}, .n = 2};
    CHECK(lm_bench_params_resolve(&p) == LM_OK && p.prompt.v[0] == 64 && p.gen.v[0] == 128);
    struct lm_bench_params q = lm_bench_params_default();
    q.parallel = list1(2);
    q.gen = list1(1);
    CHECK(refused(q, "--parallel takes one -p value >= 1 and one -n value >= 2"));
    q.gen = (struct lm_bench_list){.v = {4, 8}, .n = 2};
    CHECK(refused(q, "--parallel takes one -p value"));
    q.gen = list1(4);
    q.prompt = list1(0);
    CHECK(refused(q, "--parallel takes one -p value"));
    q.prompt = list1(8);
    q.breakdown = true;
    CHECK(refused(q, "does not combine with --breakdown or --ttft"));
    q.breakdown = false;
    q.ttft = 4;
    CHECK(refused(q, "does not combine with --breakdown or --ttft"));

    // the --parallel-only flags
    q = lm_bench_params_default();
    q.popt.arrival = 100;
    CHECK(refused(q, "--arrival, --step-tokens and --lookup apply to --parallel runs"));
    q.popt = (struct lm_bench_parallel_opts){.lookup = true};
    CHECK(refused(q, "apply to --parallel runs"));
    q.popt = (struct lm_bench_parallel_opts){.trace = "t.jsonl"};
    CHECK(refused(q, "--trace, --perfetto and --profile apply to --parallel runs"));
    q.popt = (struct lm_bench_parallel_opts){.profile = true};
    CHECK(refused(q, "--breakdown profiles the pp/tg tests"));
    q.parallel = (struct lm_bench_list){.v = {1, 8}, .n = 2};
    q.popt = (struct lm_bench_parallel_opts){.step_tokens = 4};
    CHECK(refused(q, "--step-tokens 4 < N = 8"));
    q.popt = (struct lm_bench_parallel_opts){.step_tokens = 8};
    CHECK(lm_bench_params_resolve(&q) == LM_OK);
    q = lm_bench_params_default();
    q.parallel = list1(8);
    q.popt = (struct lm_bench_parallel_opts){.arrival = 100, .step_tokens = 9};
    CHECK(refused(q, "a step budget of 9 leaves no prefill chunk beside N = 8"));
    q.popt.step_tokens = 10; // a chunk of 2 beside 8 decode tokens
    CHECK(lm_bench_params_resolve(&q) == LM_OK);
    q.parallel = list1(255);
    q.popt = (struct lm_bench_parallel_opts){.arrival = 100}; // the default budget, 256
    CHECK(refused(q, "a step budget of 256 leaves no prefill chunk beside N = 255"));
}

static int positions(struct lm_bench_params p) {
    CHECK(lm_bench_params_resolve(&p) == LM_OK);
    return lm_bench_positions(&p);
}

static void test_positions(void) {
    struct lm_bench_params p = lm_bench_params_default();
    CHECK(positions(p) == 512); // pp512 (tg128 needs 16 + 128)
    p.prompt = list1(16);
    p.gen = list1(200);
    CHECK(positions(p) == LM_BENCH_TG_PROMPT + 200);
    p.ttft = 300;
    CHECK(positions(p) == 300);
    p.ttft = 0;
    p.breakdown = true; // the breakdown generates the first -n after the first -p
    CHECK(positions(p) == 216);
    p.prompt = (struct lm_bench_list){.v = {0, 8}, .n = 2};
    p.gen = list1(0); // a breakdown of 128 + 128 when the first values are 0
    CHECK(positions(p) == 256);
    p.breakdown = false;
    CHECK(positions(p) == LM_BENCH_TG_PROMPT + 1); // at least the sampling test's prompt
    p = lm_bench_params_default();
    p.parallel = list1(4);
    p.prompt = list1(8);
    p.gen = list1(4);
    CHECK(positions(p) == 13); // one request: prompt + generated + 1
    p.popt.arrival = 40;
    CHECK(positions(p) == 42); // the arriving prompt + 2
    p = lm_bench_params_default();
    p.prompt = list1(64);
    p.gen = list1(32);
    p.depth = (struct lm_bench_list){.v = {0, 1000}, .n = 2};
    CHECK(positions(p) == 1064); // pp64 after the deepest fill (tg32 there needs 1032)
    p.gen = list1(100);
    CHECK(positions(p) == 1100);
    p.parallel = list1(2);
    p.prompt = list1(8);
    p.gen = list1(4);
    CHECK(refused(p, "--parallel does not combine with -d"));
}

static void test_bandwidth_lookup(void) {
    const struct lm_bench_bw bw[3] = {{1, 10.0}, {4, 30.0}, {2, -1}};
    CHECK(lm_bench_bw_for(bw, 3, 1) == 10.0);
    CHECK(lm_bench_bw_for(bw, 3, 4) == 30.0);
    CHECK(lm_bench_bw_for(bw, 3, 2) == 30.0); // not measured: the most threads measured
    CHECK(lm_bench_bw_for(bw, 3, 8) == 30.0);
    CHECK(lm_bench_bw_for(bw, 0, 1) == 0);
}

static void test_request_prompts(void) {
    int32_t ids[100];
    for (int i = 0; i < 100; i++) ids[i] = 1000 + i;
    int32_t a[50], b[50];
    lm_bench_request_prompt(ids, 100, 0, a, 50);
    lm_bench_request_prompt(ids, 100, 1, b, 50);
    CHECK(a[0] == 1000 && b[0] == 1000); // the BOS of every prompt
    CHECK(a[1] == 1001 && a[49] == 1049);
    CHECK(b[1] == 1000 + 1 + 37 && b[1] != a[1]); // another offset per request
    lm_bench_request_prompt(ids, 100, 3, b, 50); // wraps around ids[1, 100)
    CHECK(b[1] == 1000 + 1 + 111 % 99);
}

static void test_arrival_medians(void) {
    struct lm_bench_arrival_result runs[4] = {
        {.step_tokens = 16, .chunk_tokens = 14, .gap_base_max = 4, .gap_during_max = 9, .chunk_step = 3},
        {.gap_base_max = 1, .gap_during_max = 7, .chunk_step = 2},
        {.gap_base_max = 3, .gap_during_max = 12, .chunk_step = 1},
        {.gap_base_max = 2, .gap_during_max = 8, .chunk_step = 4}};
    struct lm_bench_arrival_result out;
    lm_bench_arrival_summarize(runs, 4, &out);
    CHECK(out.reps == 4 && out.step_tokens == 16 && out.chunk_tokens == 14); // from the first run
    CHECK(out.gap_base_max == 2 && out.gap_during_max == 8 && out.chunk_step == 2); // lower middles
    CHECK(out.increase == 6);               // of the medians
    CHECK(out.gap_during_max_worst == 12);  // the worst run
    CHECK(runs[2].gap_during_max == 12);    // the runs are not reordered
}

// The sampling chain: each mode's temperature when none is given (the single-stream tests the
// default chain, --parallel greedy), a given one kept, the other fields as given; the reports'
// description of it (sampling.h).
static void test_sampling(void) {
    const struct lm_sampler_params d = lm_sampler_params_default();
    struct lm_bench_params p = lm_bench_params_default();
    CHECK(p.sampling.temperature < 0 && p.sampling.top_k == d.top_k && p.sampling.seed == d.seed);
    CHECK(lm_bench_params_resolve(&p) == LM_OK && lm_bench_sampling_is_default(&p.sampling));
    p = lm_bench_params_default();
    p.parallel = list1(2);
    CHECK(lm_bench_params_resolve(&p) == LM_OK && p.sampling.temperature == 0);
    CHECK(p.sampling.top_k == d.top_k && p.sampling.top_p == d.top_p && p.sampling.min_p == d.min_p);
    p = lm_bench_params_default();
    p.parallel = list1(2);
    p.sampling.temperature = 0.7f;
    p.sampling.seed = 9;
    CHECK(lm_bench_params_resolve(&p) == LM_OK && p.sampling.temperature == 0.7f && p.sampling.seed == 9);
    p = lm_bench_params_default();
    p.sampling.temperature = 0;
    CHECK(lm_bench_params_resolve(&p) == LM_OK && p.sampling.temperature == 0);

    char buf[160];
    lm_bench_sampling_desc(&d, buf, sizeof buf);
    CHECK(!strcmp(buf, "default chain: temp 0.8, top-k 40, top-p 0.95, min-p 0.05"));
    struct lm_sampler_params q = d;
    q.seed = 3;
    q.frequency_penalty = 0.5f;
    lm_bench_sampling_desc(&q, buf, sizeof buf);
    CHECK(!strcmp(buf, "chain: temp 0.8, top-k 40, top-p 0.95, min-p 0.05, frequency penalty 0.5, seed 3"));
    q = d;
    q.temperature = 0;
    q.repeat_penalty = 1.1f;
    lm_bench_sampling_desc(&q, buf, sizeof buf);
    CHECK(!strcmp(buf, "chain: greedy, repeat penalty 1.1, seed 0"));
    lm_bench_sampling_desc(&q, buf, 8); // truncated, terminated
    CHECK(!strcmp(buf, "chain: "));
}

int main(void) {
    test_resolve();
    test_positions();
    test_bandwidth_lookup();
    test_request_prompts();
    test_arrival_medians();
    test_sampling();
    return lm_test_finish();
}
