// `lumen analyze FILE.jsonl [--html OUT.html]`: the text report of a JSONL trace
// (docs/profiling.md) on stdout, optionally a self-contained HTML report.
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "report.h"

static const char *k_analyze_usage =
    "usage: lumen analyze FILE.jsonl [--html OUT.html]\n"
    "\n"
    "Reads a trace written by `lumen run --trace FILE.jsonl` and prints: event types,\n"
    "phases, phase/op, per-layer spans, op aggregate, matmul shape x variant (GB/s),\n"
    "barrier waits per phase/op and thread, variant selections, memory. Every timing\n"
    "row is count | total | avg | min | max | p95 | p99 (exact nearest-rank percentiles).\n"
    "\n"
    "  --html OUT.html   also write one self-contained HTML page with charts\n"
    "\n"
    "Malformed input: one line naming the file and line number, exit status 1.\n";

int cmd_analyze(int argc, char **argv) {
    const char *in = NULL, *html = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(k_analyze_usage, stdout);
            return 0;
        }
        if (!strcmp(a, "--html")) html = cli_value("analyze", argc, argv, &i);
        else if (a[0] == '-' && a[1]) cli_usage_error("analyze", "unknown option '%s'", a);
        else if (in) cli_usage_error("analyze", "more than one input file ('%s', '%s')", in, a);
        else in = a;
    }
    if (!in) cli_usage_error("analyze", "no input file (usage: lumen analyze FILE.jsonl [--html OUT.html])");
    struct lm_prof_report *r;
    if (lm_prof_report_load(in, &r) != LM_OK) {
        fprintf(stderr, "lumen analyze: %s\n", lm_error_msg());
        return 1;
    }
    lm_prof_report_print(r, stdout);
    int rc = 0;
    if (html) {
        if (lm_prof_report_write_html(r, html) != LM_OK) {
            fprintf(stderr, "lumen analyze: %s\n", lm_error_msg());
            rc = 1;
        } else {
            fprintf(stderr, "lumen analyze: wrote %s\n", html);
        }
    }
    lm_prof_report_free(r);
    return rc;
}
