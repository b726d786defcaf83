// Trace analyzer: exact statistics (count, total, mean, min, max, nearest-rank p95/p99)
// on a synthetic JSONL with known answers, the HTML report's charts, and malformed
// inputs (bad JSON, unknown version, truncation, schema violations) each giving one
// "file:line: what" message. Engine steps (version 2): known answers and bad step events.
// LM_TEST_LABELS: unit
#include <unistd.h>

#include "lm_test.h"
#include "prof/prof.h"
#include "report/report.h"

static char g_dir[] = "/tmp/lm_prof_analyze_XXXXXX";

static const char *tmp_path(const char *name) {
    static char buf[512];
    snprintf(buf, sizeof buf, "%s/%s", g_dir, name);
    return buf;
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

#define HDR "{\"type\":\"header\",\"schema\":\"lumen-trace\",\"version\":1,\"unit\":\"ns\"," \
            "\"clock\":\"tsc\",\"ns_per_tick\":0.3333,\"n_threads\":2,\"events\":1,\"dropped\":0}\n"

static bool near(double a, double b) { return fabs(a - b) <= 1e-6 * (fabs(b) + 1); }

static void check_row(const struct lm_prof_report *r, const char *sec, const char *key,
                      uint64_t count, double total, double min, double max, double p95,
                      double p99) {
    struct lm_prof_row row;
    bool found = lm_prof_report_row(r, sec, key, &row);
    CHECKF(found, "no row %s / %s", sec, key);
    if (!found) return;
    CHECKF(row.count == count, "%s/%s count %llu != %llu", sec, key,
           (unsigned long long)row.count, (unsigned long long)count);
    CHECKF(near(row.total, total), "%s/%s total %g != %g", sec, key, row.total, total);
    CHECKF(near(row.avg, total / (double)count), "%s/%s avg %g", sec, key, row.avg);
    CHECKF(near(row.min, min), "%s/%s min %g != %g", sec, key, row.min, min);
    CHECKF(near(row.max, max), "%s/%s max %g != %g", sec, key, row.max, max);
    CHECKF(near(row.p95, p95), "%s/%s p95 %g != %g", sec, key, row.p95, p95);
    CHECKF(near(row.p99, p99), "%s/%s p99 %g != %g", sec, key, row.p99, p99);
}

// ============================================================================
// known answers
// ============================================================================

static void test_known(void) {
    const char *path = tmp_path("known.jsonl");
    FILE *f = fopen(path, "w");
    fputs(HDR, f);
    int n = 0;
    fprintf(f, "{\"type\":\"variant\",\"tid\":0,\"ts_ns\":0,\"kernel\":\"dot_q4_K\","
               "\"variant\":\"avx2\",\"reason\":\"cpu_feature avx2\"}\n");
    fprintf(f, "{\"type\":\"memory\",\"tid\":0,\"ts_ns\":1,\"weights_mapped\":1048576,"
               "\"kv_cache\":2097152,\"scratch\":0,\"rss\":0,\"rss_peak\":0}\n");
    fprintf(f, "{\"type\":\"memory\",\"tid\":0,\"ts_ns\":2,\"weights_mapped\":1048576,"
               "\"kv_cache\":1048576,\"scratch\":0,\"rss\":0,\"rss_peak\":0}\n");
    n += 3;
    // 100 decode steps of 1..100 us, written in a scrambled order (37 is coprime to 100)
    for (int i = 0; i < 100; i++) {
        int v = (i * 37) % 100 + 1;
        fprintf(f, "{\"type\":\"phase\",\"tid\":0,\"ts_ns\":%d,\"dur_ns\":%d,\"phase\":\"decode\","
                   "\"step\":%d,\"n_tokens\":1}\n", 1000000 * i, v * 1000, i);
        n++;
    }
    // qkv: 1..10 us on tid 1 (p95 = v[ceil(9.5)] = 10, p99 = 10)
    for (int i = 10; i >= 1; i--, n++)
        fprintf(f, "{\"type\":\"op\",\"tid\":1,\"ts_ns\":%d,\"dur_ns\":%d,\"phase\":\"decode\","
                   "\"step\":0,\"op\":\"qkv\",\"layer\":%d}\n", 100 + i, i * 1000, i % 2);
    // down: 1..20 us on tid 0, layer 3 (p95 = v[19] = 19, p99 = v[20] = 20)
    for (int i = 1; i <= 20; i++, n++)
        fprintf(f, "{\"type\":\"op\",\"tid\":0,\"ts_ns\":%d,\"dur_ns\":%d,\"phase\":\"prefill\","
                   "\"step\":-1,\"op\":\"down\",\"layer\":3}\n", 200000000 + i * 100000, i * 1000);
    // barrier waits after qkv: 100, 200, 300, 400 ns
    for (int i = 1; i <= 4; i++, n++)
        fprintf(f, "{\"type\":\"barrier\",\"tid\":%d,\"ts_ns\":%d,\"dur_ns\":%d,\"phase\":\"decode\","
                   "\"step\":0,\"op\":\"qkv\",\"layer\":0}\n", i % 2, 300 + i, i * 100);
    // two matmuls: 1000 bytes and 4000 flops in 500 ns each -> 2 GB/s, 8 GFLOP/s
    for (int i = 0; i < 2; i++, n++)
        fprintf(f, "{\"type\":\"matmul\",\"tid\":0,\"ts_ns\":%d,\"dur_ns\":500,\"phase\":\"decode\","
                   "\"step\":0,\"op\":\"qkv\",\"layer\":0,\"weight\":\"blk.0.attn_q.weight\","
                   "\"m\":1024,\"n\":1,\"k\":640,\"dtype\":\"q4_K\",\"variant\":\"q4_K_avx2\","
                   "\"reason\":\"cpu_feature avx2\",\"bytes\":1000,\"flops\":4000}\n", 400 + i);
    fprintf(f, "{\"type\":\"end\",\"events\":%d,\"dropped\":0}\n", n);
    fclose(f);

    struct lm_prof_report *r = NULL;
    enum lm_status st = lm_prof_report_load(path, &r);
    CHECKF(st == LM_OK, "%s", lm_error_msg());
    if (!r) return;
    check_row(r, "phase", "decode", 100, 5050e3, 1e3, 100e3, 95e3, 99e3);
    check_row(r, "step", "decode", 100, 5050e3, 1e3, 100e3, 95e3, 99e3);
    check_row(r, "phase_op", "decode :: qkv", 10, 55e3, 1e3, 10e3, 10e3, 10e3);
    check_row(r, "op", "qkv", 10, 55e3, 1e3, 10e3, 10e3, 10e3);
    check_row(r, "phase_op", "prefill :: down", 20, 210e3, 1e3, 20e3, 19e3, 20e3);
    // tid 0's consecutive down events of layer 3 form one block span: first start to last end
    check_row(r, "layer", "prefill :: block_3", 1, 1900000 + 20000, 1920000, 1920000, 1920000,
              1920000);
    check_row(r, "barrier_phase", "decode", 4, 1000, 100, 400, 400, 400);
    check_row(r, "barrier_op", "decode :: qkv", 4, 1000, 100, 400, 400, 400);
    check_row(r, "matmul", "qkv m=1024 n=1 k=640 q4_K q4_K_avx2", 2, 1000, 500, 500, 500, 500);
    check_row(r, "type", "phase", 100, 5050e3, 1e3, 100e3, 95e3, 99e3);
    struct lm_prof_row row;
    CHECK(lm_prof_report_row(r, "type", "variant", &row) && row.count == 1);
    CHECK(lm_prof_report_row(r, "type", "memory", &row) && row.count == 2);
    CHECK(!lm_prof_report_row(r, "phase", "nonexistent", &row));
    CHECK(!lm_prof_report_row(r, "no_such_section", "decode", &row));

    // the text report carries every section, throughput and memory peak
    const char *txt = tmp_path("known.txt");
    FILE *o = fopen(txt, "w");
    lm_prof_report_print(r, o);
    fclose(o);
    char buf[65536];
    o = fopen(txt, "r");
    size_t len = fread(buf, 1, sizeof buf - 1, o);
    buf[len] = 0;
    fclose(o);
    const char *want[] = {
        "Total events: 139",
        "decode: count=100 | total=5.050ms | avg=0.0505ms | min=0.0010ms | max=0.1000ms | "
        "p95=0.0950ms | p99=0.0990ms",
        "Event type summary:", "By phase/op", "Per-layer totals", "Op aggregate",
        "Matmul shape x variant", "2.00 GB/s | 8.00 GFLOP/s", "Barrier wait by phase",
        "Barrier wait by phase/op", "thread 1:", "dot_q4_K -> avx2 (cpu_feature avx2): count=1",
        "matmul qkv q4_K -> q4_K_avx2 (cpu_feature avx2): count=2",
        "kv_cache: last=1.00MiB | peak=2.00MiB", "decode: 100 tokens",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        CHECKF(strstr(buf, want[i]) != NULL, "text report lacks '%s'", want[i]);

    // HTML: one self-contained page with its four charts
    const char *html = tmp_path("known.html");
    CHECK(lm_prof_report_write_html(r, html) == LM_OK);
    char *page = malloc(1 << 20);
    o = fopen(html, "r");
    len = fread(page, 1, (1 << 20) - 1, o);
    page[len] = 0;
    fclose(o);
    int n_svg = 0;
    for (const char *p = page; (p = strstr(p, "<svg")); p++) n_svg++;
    CHECKF(n_svg == 4, "%d svg charts", n_svg);
    const char *hw[] = {"<!DOCTYPE html>", "<title>Time by op (decode)</title>",
                        "<title>Per-layer time (decode)", "<title>Decode step latency over time</title>",
                        "<title>Decode step latency histogram</title>", "<polyline",
                        "Matmul shape", "Barrier wait by phase / op", "Variant selection", "Memory",
                        "</html>"};
    for (size_t i = 0; i < sizeof hw / sizeof hw[0]; i++)
        CHECKF(strstr(page, hw[i]) != NULL, "HTML lacks '%s'", hw[i]);
    CHECK(strstr(page, "http://") == NULL && strstr(page, "https://") == NULL &&
          strstr(page, "<script src") == NULL && strstr(page, "<link") == NULL);
    free(page);
    CHECK(lm_prof_report_write_html(r, "/nonexistent_dir/x.html") == LM_ERR_IO);
    lm_prof_report_free(r);
    unlink(txt);
    unlink(html);
    unlink(path);
}

// ============================================================================
// engine steps (schema version 2)
// ============================================================================

#define HDR2 "{\"type\":\"header\",\"schema\":\"lumen-trace\",\"version\":2,\"unit\":\"ns\"," \
             "\"clock\":\"tsc\",\"ns_per_tick\":0.3333,\"n_threads\":1,\"events\":1,\"dropped\":0}\n"

static void test_steps(void) {
    const char *path = tmp_path("steps.jsonl");
    FILE *f = fopen(path, "w");
    fputs(HDR2, f);
    // 20 steps: step 0 prefills 4 prompts of 16 (4 seqs, 64 us), steps 1..18 decode 4 (10..27 us),
    // step 19 decodes 4 + a 12-token chunk of a fifth prompt (5 seqs, 40 us)
    int n = 0;
    for (int s = 0; s < 20; s++, n++) {
        int nt = 4, nd = 4, ns = 4, us = 9 + s;
        if (s == 0) nt = 64, nd = 0, us = 64;
        if (s == 19) nt = 16, ns = 5, us = 40;
        fprintf(f, "{\"type\":\"step\",\"tid\":0,\"ts_ns\":%d,\"dur_ns\":%d,\"step\":%d,"
                   "\"n_tokens\":%d,\"n_decode\":%d,\"n_prefill\":%d,\"n_seqs\":%d}\n",
                100000 * s, us * 1000, s, nt, nd, nt - nd, ns);
    }
    fprintf(f, "{\"type\":\"end\",\"events\":%d,\"dropped\":0}\n", n);
    fclose(f);
    struct lm_prof_report *r = NULL;
    CHECKF(lm_prof_report_load(path, &r) == LM_OK, "%s", lm_error_msg());
    if (!r) return;
    // all: 10..27 us (18 steps) + 40 + 64 -> total 333 + 104 = 437 us
    check_row(r, "step", "engine", 20, 437e3, 10e3, 64e3, 40e3, 64e3);
    check_row(r, "step", "engine decode only", 18, 333e3, 10e3, 27e3, 27e3, 27e3);
    check_row(r, "step", "engine with prefill", 2, 104e3, 40e3, 64e3, 64e3, 64e3);
    check_row(r, "step_tokens", "tokens", 20, 64 + 18 * 4 + 16, 4, 64, 16, 64);
    check_row(r, "step_tokens", "decode", 20, 19 * 4, 0, 4, 4, 4);
    check_row(r, "step_tokens", "prefill", 20, 64 + 12, 0, 64, 12, 64);
    check_row(r, "step_tokens", "seqs", 20, 19 * 4 + 5, 4, 5, 4, 5);
    check_row(r, "type", "step", 20, 437e3, 10e3, 64e3, 40e3, 64e3);
    const char *txt = tmp_path("steps.txt");
    FILE *o = fopen(txt, "w");
    lm_prof_report_print(r, o);
    fclose(o);
    char buf[65536];
    o = fopen(txt, "r");
    size_t len = fread(buf, 1, sizeof buf - 1, o);
    buf[len] = 0;
    fclose(o);
    const char *want[] = {
        "Engine steps (one per lm_engine_step",
        "  decode only: count=18 | total=0.333ms",
        "  tokens per step: count=20 | total=152 | avg=7.60 | min=4 | max=64",
        "  sequences per step: count=20 | total=81",
        "  tokens: 152 = decode 76 (50.0%) + prefill 76 (50.0%); step time: decode only 76.2%, "
        "with prefill 23.8%",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        CHECKF(strstr(buf, want[i]) != NULL, "text report lacks '%s'", want[i]);
    const char *html = tmp_path("steps.html");
    CHECK(lm_prof_report_write_html(r, html) == LM_OK);
    o = fopen(html, "r");
    len = fread(buf, 1, sizeof buf - 1, o);
    buf[len] = 0;
    fclose(o);
    CHECK(strstr(buf, "Engine steps") != NULL);
    lm_prof_report_free(r);
    unlink(txt);
    unlink(html);
    unlink(path);
}

// ============================================================================
// malformed input
// ============================================================================

#define OP(extra) "{\"type\":\"op\",\"tid\":0,\"ts_ns\":1,\"dur_ns\":5,\"phase\":\"decode\"," \
                  "\"step\":0" extra "}\n"
#define END(n) "{\"type\":\"end\",\"events\":" #n ",\"dropped\":0}\n"

static void bad(const char *name, const char *text, enum lm_status want, const char *line_tag,
                const char *msg) {
    const char *path = tmp_path(name);
    char p[512];
    snprintf(p, sizeof p, "%s", path);
    write_file(p, text);
    struct lm_prof_report *r = (struct lm_prof_report *)1;
    enum lm_status st = lm_prof_report_load(p, &r);
    const char *m = lm_error_msg();
    char tag[600];
    snprintf(tag, sizeof tag, "%s:%s:", p, line_tag);
    CHECKF(st == want, "%s: status %d, want %d (%s)", name, st, want, m);
    CHECKF(r == NULL, "%s: report not NULL on error", name);
    CHECKF(strstr(m, tag) != NULL, "%s: message lacks '%s': %s", name, tag, m);
    CHECKF(strstr(m, msg) != NULL, "%s: message lacks '%s': %s", name, msg, m);
    CHECKF(strchr(m, '\n') == NULL, "%s: message spans lines", name);
    unlink(p);
}

// MoE expert spans (schema version 3): by expert over layers, tokens at the gate/up span;
// refused in older versions and with bad keys
#define HDR3 "{\"type\":\"header\",\"schema\":\"lumen-trace\",\"version\":3,\"unit\":\"ns\"," \
             "\"clock\":\"tsc\",\"ns_per_tick\":0.3333,\"n_threads\":1,\"events\":1,\"dropped\":0}\n"
#define EXPERT(op, layer, e, tok) "{\"type\":\"expert\",\"tid\":0,\"ts_ns\":1,\"dur_ns\":7," \
    "\"phase\":\"decode\",\"step\":0,\"op\":\"" op "\",\"layer\":" #layer ",\"expert\":" #e \
    ",\"tokens\":" #tok "}\n"

static void bad(const char *name, const char *text, enum lm_status want, const char *line_tag,
                const char *msg);

static void test_experts(void) {
    const char *path = tmp_path("experts.jsonl");
    write_file(path, HDR3 EXPERT("ffn_moe_gate_up", 0, 5, 3) EXPERT("ffn_moe_down", 0, 5, 3)
                         EXPERT("ffn_moe_gate_up", 1, 5, 2) EXPERT("ffn_moe_gate_up", 1, 2, 1) END(4));
    struct lm_prof_report *r = NULL;
    CHECKF(lm_prof_report_load(path, &r) == LM_OK, "%s", lm_error_msg());
    struct lm_prof_row row;
    CHECK(r && lm_prof_report_row(r, "expert", "expert 5", &row) && row.count == 3);
    CHECK(r && lm_prof_report_row(r, "expert_tokens", "expert 5", &row) && row.count == 2 &&
          row.total == 5);
    CHECK(r && lm_prof_report_row(r, "expert_tokens", "expert 2", &row) && row.total == 1);
    lm_prof_report_free(r);
    bad("expert_v2.jsonl", HDR2 EXPERT("ffn_moe_gate_up", 0, 5, 3) END(1), LM_ERR_FORMAT, "2",
        "expert event in a version 2 trace");
    bad("expert_op.jsonl", HDR3 EXPERT("qkv", 0, 5, 3) END(1), LM_ERR_FORMAT, "2",
        "expert event: op 'qkv' is not a MoE op");
    bad("expert_range.jsonl", HDR3 EXPERT("ffn_moe_down", 0, 256, 3) END(1), LM_ERR_FORMAT, "2",
        "out of range");
}

static void test_malformed(void) {
    bad("badjson.jsonl", HDR OP(",\"op\":\"qkv\",\"layer\":0") "{\"type\":\"op\",\"tid\":0,\n" END(2),
        LM_ERR_FORMAT, "3", "bad JSON");
    bad("version.jsonl",
        "{\"type\":\"header\",\"schema\":\"lumen-trace\",\"version\":4,\"n_threads\":1}\n" END(0),
        LM_ERR_UNSUPPORTED, "1", "unsupported trace version 4 (this lumen reads 1 to 3)");
    bad("version0.jsonl",
        "{\"type\":\"header\",\"schema\":\"lumen-trace\",\"version\":0,\"n_threads\":1}\n" END(0),
        LM_ERR_UNSUPPORTED, "1", "unsupported trace version 0");
#define STEP(body) "{\"type\":\"step\",\"tid\":0,\"ts_ns\":1,\"dur_ns\":5," body "}\n"
    bad("step_v1.jsonl", HDR STEP("\"step\":0,\"n_tokens\":1,\"n_decode\":1,\"n_prefill\":0,\"n_seqs\":1") END(1),
        LM_ERR_FORMAT, "2", "step event in a version 1 trace");
    bad("step_key.jsonl", HDR2 STEP("\"step\":0,\"n_tokens\":1,\"n_decode\":1,\"n_seqs\":1") END(1),
        LM_ERR_FORMAT, "2", "step event lacks required key 'n_prefill'");
    bad("step_neg.jsonl", HDR2 STEP("\"step\":-1,\"n_tokens\":1,\"n_decode\":1,\"n_prefill\":0,\"n_seqs\":1") END(1),
        LM_ERR_FORMAT, "2", "step event: key 'step' must be a non-negative integer");
    bad("step_sum.jsonl", HDR2 STEP("\"step\":0,\"n_tokens\":8,\"n_decode\":3,\"n_prefill\":4,\"n_seqs\":4") END(1),
        LM_ERR_FORMAT, "2", "step event: n_decode 3 + n_prefill 4 + n_draft 0 != n_tokens 8");
    bad("step_draft.jsonl", HDR2 STEP("\"step\":0,\"n_tokens\":8,\"n_decode\":3,\"n_prefill\":4,\"n_seqs\":4,"
                                      "\"n_draft\":2,\"n_accepted\":1") END(1),
        LM_ERR_FORMAT, "2", "step event: n_decode 3 + n_prefill 4 + n_draft 2 != n_tokens 8");
    bad("step_acc.jsonl", HDR2 STEP("\"step\":0,\"n_tokens\":8,\"n_decode\":4,\"n_prefill\":0,\"n_seqs\":4,"
                                    "\"n_draft\":4,\"n_accepted\":5") END(1),
        LM_ERR_FORMAT, "2", "step event: n_accepted 5 > n_draft 4");
    bad("step_acc2.jsonl", HDR2 STEP("\"step\":0,\"n_tokens\":8,\"n_decode\":4,\"n_prefill\":0,\"n_seqs\":4,"
                                     "\"n_draft\":4") END(1),
        LM_ERR_FORMAT, "2", "step event lacks required key 'n_accepted'");
    bad("step_zero.jsonl", HDR2 STEP("\"step\":0,\"n_tokens\":0,\"n_decode\":0,\"n_prefill\":0,\"n_seqs\":0") END(1),
        LM_ERR_FORMAT, "2", "step event: n_tokens 0 < 1");
    bad("step_seqs.jsonl", HDR2 STEP("\"step\":0,\"n_tokens\":8,\"n_decode\":4,\"n_prefill\":4,\"n_seqs\":4") END(1),
        LM_ERR_FORMAT, "2", "step event: n_seqs 4 outside [5, 8]");
    bad("step_seqs2.jsonl", HDR2 STEP("\"step\":0,\"n_tokens\":4,\"n_decode\":4,\"n_prefill\":0,\"n_seqs\":9") END(1),
        LM_ERR_FORMAT, "2", "step event: n_seqs 9 outside [4, 4]");
    bad("step_tid.jsonl", HDR2 "{\"type\":\"step\",\"tid\":3,\"ts_ns\":1,\"dur_ns\":5,\"step\":0,"
                               "\"n_tokens\":1,\"n_decode\":1,\"n_prefill\":0,\"n_seqs\":1}\n" END(1),
        LM_ERR_FORMAT, "2", "tid 3 >= header n_threads 1");
#undef STEP
    bad("schema.jsonl", "{\"type\":\"header\",\"schema\":\"other\",\"version\":1,\"n_threads\":1}\n",
        LM_ERR_FORMAT, "1", "schema");
    bad("noend.jsonl", HDR OP(",\"op\":\"qkv\",\"layer\":0"), LM_ERR_FORMAT, "2",
        "truncated: no end record");
    bad("cut.jsonl", HDR OP(",\"op\":\"qkv\",\"layer\":0") "{\"type\":\"op\",\"tid\":0,\"ts_",
        LM_ERR_FORMAT, "3", "truncated");
    bad("count.jsonl", HDR OP(",\"op\":\"qkv\",\"layer\":0") END(5), LM_ERR_FORMAT, "3",
        "end record says 5 events, file has 1");
    bad("nolayer.jsonl", HDR OP(",\"op\":\"qkv\"") END(1), LM_ERR_FORMAT, "2",
        "op event lacks required key 'layer'");
    bad("durtype.jsonl",
        HDR "{\"type\":\"op\",\"tid\":0,\"ts_ns\":1,\"dur_ns\":\"5\",\"phase\":\"decode\",\"step\":0,"
            "\"op\":\"qkv\",\"layer\":0}\n" END(1),
        LM_ERR_FORMAT, "2", "'dur_ns' must be a non-negative integer");
    bad("negdur.jsonl",
        HDR "{\"type\":\"op\",\"tid\":0,\"ts_ns\":1,\"dur_ns\":-5,\"phase\":\"decode\",\"step\":0,"
            "\"op\":\"qkv\",\"layer\":0}\n" END(1),
        LM_ERR_FORMAT, "2", "'dur_ns' must be a non-negative integer");
    bad("type.jsonl", HDR "{\"type\":\"bogus\",\"tid\":0}\n" END(1), LM_ERR_FORMAT, "2",
        "unknown event type 'bogus'");
    bad("op.jsonl", HDR OP(",\"op\":\"frobnicate\",\"layer\":0") END(1), LM_ERR_FORMAT, "2",
        "unknown op 'frobnicate'");
    bad("phase.jsonl",
        HDR "{\"type\":\"phase\",\"tid\":0,\"ts_ns\":1,\"dur_ns\":5,\"phase\":\"warmup\",\"step\":0,"
            "\"n_tokens\":1}\n" END(1),
        LM_ERR_FORMAT, "2", "unknown phase 'warmup'");
    bad("layer.jsonl", HDR OP(",\"op\":\"qkv\",\"layer\":999") END(1), LM_ERR_FORMAT, "2",
        "layer 999");
    bad("first.jsonl", OP(",\"op\":\"qkv\",\"layer\":0") END(1), LM_ERR_FORMAT, "1",
        "expected the header");
    bad("after.jsonl", HDR END(0) OP(",\"op\":\"qkv\",\"layer\":0"), LM_ERR_FORMAT, "3",
        "data after the end record");
    bad("trailing.jsonl", HDR "{\"type\":\"end\",\"events\":0} x\n", LM_ERR_FORMAT, "2",
        "trailing characters");
    bad("nested.jsonl", HDR "{\"type\":\"end\",\"events\":{\"n\":0}}\n", LM_ERR_FORMAT, "2",
        "nested value");
    bad("dup.jsonl", HDR "{\"type\":\"end\",\"events\":0,\"events\":0}\n", LM_ERR_FORMAT, "2",
        "duplicate key");
    bad("tid.jsonl", HDR "{\"type\":\"op\",\"tid\":5,\"ts_ns\":1,\"dur_ns\":5,\"phase\":\"decode\","
                         "\"step\":0,\"op\":\"qkv\",\"layer\":0}\n" END(1),
        LM_ERR_FORMAT, "2", "tid 5 >= header n_threads 2");
    bad("notobj.jsonl", HDR "[1,2]\n" END(0), LM_ERR_FORMAT, "2", "expected '{'");
    bad("string.jsonl", HDR "{\"type\":\"end\",\"events\":0,\"x\":\"abc}\n", LM_ERR_FORMAT, "2",
        "unterminated string");
    bad("empty.jsonl", "", LM_ERR_FORMAT, "0", "empty file");

    struct lm_prof_report *r;
    CHECK(lm_prof_report_load(tmp_path("does_not_exist.jsonl"), &r) == LM_ERR_IO);
    CHECK(strstr(lm_error_msg(), "does_not_exist.jsonl") != NULL);

    // escapes, blank lines, CRLF and unknown extra keys are accepted
    write_file(tmp_path("ok.jsonl"),
               HDR "\n{\"type\":\"variant\",\"tid\":0,\"ts_ns\":0,\"kernel\":\"k\\u00e9\\\"x\\\"\","
                   "\"variant\":\"v\",\"reason\":\"r\",\"extra\":[]}\r\n" END(1));
    CHECK(lm_prof_report_load(tmp_path("ok.jsonl"), &r) == LM_ERR_FORMAT); // [] is nested: rejected
    write_file(tmp_path("ok.jsonl"),
               HDR "\n{\"type\":\"variant\",\"tid\":0,\"ts_ns\":0,\"kernel\":\"k\\u00e9\\\"x\\\"\","
                   "\"variant\":\"v\",\"reason\":\"r\",\"extra\":true}\r\n" END(1));
    CHECKF(lm_prof_report_load(tmp_path("ok.jsonl"), &r) == LM_OK, "%s", lm_error_msg());
    struct lm_prof_row row;
    CHECK(r && lm_prof_report_row(r, "type", "variant", &row) && row.count == 1);
    lm_prof_report_free(r);
    unlink(tmp_path("ok.jsonl"));
}

int main(void) {
    CHECK(mkdtemp(g_dir) != NULL);
    test_known();
    test_steps();
    test_malformed();
    test_experts();
    rmdir(g_dir);
    return lm_test_finish();
}
