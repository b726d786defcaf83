// `lumen analyze --html`: one self-contained HTML page (inline CSS + SVG, no network)
// with charts (time by op, per-layer stacked bars, decode-step latency over time,
// latency histogram) and the report tables.
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report_internal.h"

// ============================================================================
// helpers
// ============================================================================

static void esc(FILE *f, const char *s) {
    for (; *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

// Human duration for labels (ns in).
static const char *hdur(char *b, size_t n, double ns) {
    if (ns < 1e3) snprintf(b, n, "%.0f ns", ns);
    else if (ns < 1e6) snprintf(b, n, "%.1f µs", ns / 1e3);
    else if (ns < 1e9) snprintf(b, n, "%.2f ms", ns / 1e6);
    else snprintf(b, n, "%.2f s", ns / 1e9);
    return b;
}

// "Nice" axis step for a range split into ~n ticks.
static double nice_step(double range, int n) {
    if (range <= 0) return 1;
    double raw = range / n, p = pow(10, floor(log10(raw))), m = raw / p;
    return (m < 1.5 ? 1 : m < 3 ? 2 : m < 7 ? 5 : 10) * p;
}

static const char *const k_colors[] = {"#4e79a7", "#f28e2b", "#59a14f", "#b6b6b6", "#e15759",
                                       "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f"};

// Phase whose ops the charts show: decode if present, else prefill, else the busiest.
static int main_phase(const struct lm_prof_report *r) {
    double tot[LM_PHASE_COUNT + 1] = {0};
    int best = LM_PHASE_DECODE;
    for (int p = 0; p <= LM_PHASE_COUNT; p++) {
        for (int l = 0; l < LM_R_LAYERS; l++)
            for (int g = 0; g < LM_RG_COUNT; g++) tot[p] += r->layer_grp[p][l][g];
        if (tot[p] > tot[best]) best = p;
    }
    if (tot[LM_PHASE_DECODE] > 0) return LM_PHASE_DECODE;
    if (tot[LM_PHASE_PREFILL] > 0) return LM_PHASE_PREFILL;
    return best;
}

static const char *pname(int p) {
    return lm_prof_phase_name((enum lm_prof_phase)p);
}

// ============================================================================
// charts
// ============================================================================

// Horizontal bars: time by op in the main phase (+ barrier wait).
static void chart_ops(FILE *f, const struct lm_prof_report *r, int ph) {
    const struct lm_rsection *s = &r->sec[LM_RS_PHASE_OP];
    struct { const char *name; double v; int bar; } rows[LM_OP_COUNT + 1];
    int n = 0;
    char key[96];
    for (int o = 0; o < LM_OP_COUNT; o++) {
        snprintf(key, sizeof key, "%s :: %s", pname(ph), lm_prof_op_name((enum lm_prof_op)o));
        const struct lm_rgroup *g = lm_r_find(s, key);
        if (g && g->sum > 0) {
            rows[n].name = lm_prof_op_name((enum lm_prof_op)o);
            rows[n].v = g->sum;
            rows[n++].bar = 0;
        }
    }
    const struct lm_rgroup *bg = lm_r_find(&r->sec[LM_RS_BARRIER_PHASE], pname(ph));
    if (bg && bg->sum > 0) {
        rows[n].name = "barrier wait";
        rows[n].v = bg->sum;
        rows[n++].bar = 1;
    }
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (rows[j].v > rows[i].v) {
                __typeof__(rows[0]) t = rows[i];
                rows[i] = rows[j];
                rows[j] = t;
            }
    double total = 0, mx = n ? rows[0].v : 1;
    for (int i = 0; i < n; i++) total += rows[i].v;
    int W = 1240, rowh = 22, left = 120, right = 170, top = 8, H = top + n * rowh + 8;
    fprintf(f, "<svg class=\"chart\" viewBox=\"0 0 %d %d\" width=\"100%%\" "
               "role=\"img\"><title>Time by op (%s)</title>\n", W, H, pname(ph));
    if (!n) fprintf(f, "<text x=\"10\" y=\"20\" class=\"muted\">no op events</text>\n");
    for (int i = 0; i < n; i++) {
        double w = (W - left - right) * rows[i].v / mx;
        int y = top + i * rowh;
        char b[32];
        fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"lbl\" text-anchor=\"end\">%s</text>", left - 8,
                y + 15, rows[i].name);
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\" rx=\"3\" fill=\"%s\">"
                   "<title>%s: %s (%.1f%%)</title></rect>",
                left, y + 3, w < 1 ? 1 : w, rowh - 6, rows[i].bar ? "#b6b6b6" : "#4e79a7",
                rows[i].name, hdur(b, sizeof b, rows[i].v), 100 * rows[i].v / total);
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" class=\"val\">%s · %.1f%%</text>\n",
                left + w + 6, y + 15, hdur(b, sizeof b, rows[i].v), 100 * rows[i].v / total);
    }
    fputs("</svg>\n", f);
}

// Vertical stacked bars per layer: attention, FFN, other, barrier wait.
static void chart_layers(FILE *f, const struct lm_prof_report *r, int ph) {
    static const char *const gname[LM_RG_COUNT] = {"attention", "FFN", "other", "barrier wait"};
    int nl = r->max_layer + 1;
    int W = 1240, H = 300, left = 64, right = 16, top = 30, bottom = 40;
    double mx = 0;
    for (int l = 0; l < nl; l++) {
        double s = 0;
        for (int g = 0; g < LM_RG_COUNT; g++) s += r->layer_grp[ph][l + 1][g];
        if (s > mx) mx = s;
    }
    fprintf(f, "<svg class=\"chart\" viewBox=\"0 0 %d %d\" width=\"100%%\" role=\"img\">"
               "<title>Per-layer time (%s): attention vs FFN vs barrier wait</title>\n", W, H, pname(ph));
    // legend
    for (int g = 0; g < LM_RG_COUNT; g++)
        fprintf(f, "<rect x=\"%d\" y=\"6\" width=\"12\" height=\"12\" rx=\"2\" fill=\"%s\"/>"
                   "<text x=\"%d\" y=\"16\" class=\"lbl\">%s</text>",
                left + g * 130, k_colors[g], left + g * 130 + 17, gname[g]);
    fputc('\n', f);
    if (nl <= 0 || mx <= 0) {
        fputs("<text x=\"70\" y=\"80\" class=\"muted\">no per-layer events</text></svg>\n", f);
        return;
    }
    double step = nice_step(mx, 5), ymax = ceil(mx / step) * step, ph_ = H - top - bottom;
    for (double v = 0; v <= ymax + step * 0.01; v += step) {
        double y = top + ph_ - ph_ * v / ymax;
        char b[32];
        fprintf(f, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" class=\"grid\"/>"
                   "<text x=\"%d\" y=\"%.1f\" class=\"axis\" text-anchor=\"end\">%s</text>\n",
                left, W - right, y, y, left - 6, y + 4, hdur(b, sizeof b, v));
    }
    double bw = (double)(W - left - right) / nl;
    for (int l = 0; l < nl; l++) {
        double y = top + ph_;
        double x = left + l * bw + bw * 0.15;
        for (int g = 0; g < LM_RG_COUNT; g++) {
            double v = r->layer_grp[ph][l + 1][g];
            if (v <= 0) continue;
            double h = ph_ * v / ymax;
            y -= h;
            char b[32];
            fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\">"
                       "<title>layer %d %s: %s</title></rect>",
                    x, y, bw * 0.7, h, k_colors[g], l, gname[g], hdur(b, sizeof b, v));
        }
        if (nl <= 40 || l % 5 == 0)
            fprintf(f, "<text x=\"%.1f\" y=\"%d\" class=\"axis\" text-anchor=\"middle\">%d</text>\n",
                    left + l * bw + bw / 2, H - bottom + 16, l);
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"axis\" text-anchor=\"middle\">layer (time summed "
               "over threads and %s steps)</text></svg>\n", left + (W - left - right) / 2, H - 6, pname(ph));
}

// Line chart of decode-step latency in step order, with the p50/p95 of the series.
static void chart_steps(FILE *f, const struct lm_prof_report *r) {
    int W = 610, H = 280, left = 64, right = 12, top = 14, bottom = 40;
    fprintf(f, "<svg class=\"chart\" viewBox=\"0 0 %d %d\" width=\"100%%\" role=\"img\">"
               "<title>Decode step latency over time</title>\n", W, H);
    size_t n = r->n_steps;
    if (!n) {
        fputs("<text x=\"70\" y=\"80\" class=\"muted\">no decode phase events</text></svg>\n", f);
        return;
    }
    double mx = 0;
    for (size_t i = 0; i < n; i++) mx = r->steps[i] > mx ? r->steps[i] : mx;
    double step = nice_step(mx, 5), ymax = ceil(mx / step) * step, ph = H - top - bottom;
    if (ymax <= 0) ymax = 1;
    for (double v = 0; v <= ymax + step * 0.01; v += step) {
        double y = top + ph - ph * v / ymax;
        char b[32];
        fprintf(f, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" class=\"grid\"/>"
                   "<text x=\"%d\" y=\"%.1f\" class=\"axis\" text-anchor=\"end\">%s</text>\n",
                left, W - right, y, y, left - 6, y + 4, hdur(b, sizeof b, v));
    }
    double pw = W - left - right;
    fputs("<polyline fill=\"none\" stroke=\"#4e79a7\" stroke-width=\"1.6\" points=\"", f);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%.1f,%.1f ", left + (n > 1 ? pw * (double)i / (double)(n - 1) : pw / 2),
                top + ph - ph * r->steps[i] / ymax);
    fputs("\"/>\n", f);
    if (n <= 400)
        for (size_t i = 0; i < n; i++) {
            char b[32];
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.2\" fill=\"#4e79a7\"><title>step %zu: %s"
                       "</title></circle>", left + (n > 1 ? pw * (double)i / (double)(n - 1) : pw / 2),
                    top + ph - ph * r->steps[i] / ymax, i, hdur(b, sizeof b, r->steps[i]));
        }
    const struct lm_rgroup *g = lm_r_find(&r->sec[LM_RS_STEP], "decode");
    if (g) {
        double y = top + ph - ph * g->row.p95 / ymax;
        char b[32];
        fprintf(f, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#e15759\" "
                   "stroke-dasharray=\"5 4\"/><text x=\"%d\" y=\"%.1f\" class=\"axis\" "
                   "text-anchor=\"end\" fill=\"#e15759\">p95 %s</text>\n",
                left, W - right, y, y, W - right - 2, y - 4, hdur(b, sizeof b, g->row.p95));
    }
    for (int t = 0; t <= 4; t++) {
        size_t i = (size_t)((double)(n - 1) * t / 4.0);
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" class=\"axis\" text-anchor=\"middle\">%zu</text>",
                left + (n > 1 ? pw * (double)i / (double)(n - 1) : pw / 2), H - bottom + 16, i);
    }
    fprintf(f, "<text x=\"%.1f\" y=\"%d\" class=\"axis\" text-anchor=\"middle\">decode step</text>"
               "</svg>\n", left + pw / 2, H - 6);
}

// Histogram of decode-step latency (linear bins between min and max).
static void chart_hist(FILE *f, const struct lm_prof_report *r) {
    int W = 610, H = 280, left = 48, right = 34, top = 14, bottom = 40;
    fprintf(f, "<svg class=\"chart\" viewBox=\"0 0 %d %d\" width=\"100%%\" role=\"img\">"
               "<title>Decode step latency histogram</title>\n", W, H);
    size_t n = r->n_steps;
    if (!n) {
        fputs("<text x=\"60\" y=\"80\" class=\"muted\">no decode phase events</text></svg>\n", f);
        return;
    }
    enum { NB = 30 };
    double lo = r->steps[0], hi = r->steps[0];
    for (size_t i = 0; i < n; i++) {
        if (r->steps[i] < lo) lo = r->steps[i];
        if (r->steps[i] > hi) hi = r->steps[i];
    }
    if (hi <= lo) hi = lo + 1;
    unsigned cnt[NB] = {0}, mx = 0;
    for (size_t i = 0; i < n; i++) {
        int b = (int)((r->steps[i] - lo) / (hi - lo) * NB);
        if (b >= NB) b = NB - 1;
        if (++cnt[b] > mx) mx = cnt[b];
    }
    double ph = H - top - bottom, pw = W - left - right, bw = pw / NB;
    double ystep = nice_step(mx, 4), ymax = ceil(mx / ystep) * ystep;
    for (double v = 0; v <= ymax + 0.01; v += ystep) {
        double y = top + ph - ph * v / ymax;
        fprintf(f, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" class=\"grid\"/>"
                   "<text x=\"%d\" y=\"%.1f\" class=\"axis\" text-anchor=\"end\">%.0f</text>\n",
                left, W - right, y, y, left - 6, y + 4, v);
    }
    for (int b = 0; b < NB; b++) {
        double h = ph * cnt[b] / ymax;
        char b0[32], b1[32];
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#59a14f\">"
                   "<title>%s – %s: %u steps</title></rect>",
                left + b * bw + 1, top + ph - h, bw - 2, h, hdur(b0, sizeof b0, lo + (hi - lo) * b / NB),
                hdur(b1, sizeof b1, lo + (hi - lo) * (b + 1) / NB), cnt[b]);
    }
    for (int t = 0; t <= 4; t++) {
        char b[32];
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" class=\"axis\" text-anchor=\"middle\">%s</text>",
                left + pw * t / 4, H - bottom + 16, hdur(b, sizeof b, lo + (hi - lo) * t / 4));
    }
    fprintf(f, "<text x=\"%.1f\" y=\"%d\" class=\"axis\" text-anchor=\"middle\">step latency "
               "(count of steps per bin)</text></svg>\n", left + pw / 2, H - 6);
}

// ============================================================================
// tables
// ============================================================================

static void th_timing(FILE *f, const char *first) {
    fprintf(f, "<tr><th>%s</th><th>count</th><th>total</th><th>avg</th><th>min</th><th>max</th>"
               "<th>p95</th><th>p99</th>", first);
}

static void td_timing(FILE *f, const char *key, const struct lm_prof_row *r) {
    char b[7][32];
    fputs("<tr><td class=\"k\">", f);
    esc(f, key);
    fprintf(f, "</td><td>%llu</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td>",
            (unsigned long long)r->count, hdur(b[0], 32, r->total), hdur(b[1], 32, r->avg),
            hdur(b[2], 32, r->min), hdur(b[3], 32, r->max), hdur(b[4], 32, r->p95),
            hdur(b[5], 32, r->p99));
}

static void table_section(FILE *f, const struct lm_prof_report *r, int sec, const char *title,
                          const char *first, size_t limit) {
    const struct lm_rsection *s = &r->sec[sec];
    fprintf(f, "<section class=\"card\"><h2>%s</h2>", title);
    if (!s->n) {
        fputs("<p class=\"muted\">no samples</p></section>\n", f);
        return;
    }
    struct lm_rgroup **a = lm_r_sorted(s, true);
    if (!a) return;
    double all = 0;
    for (size_t i = 0; i < s->n; i++) all += a[i]->sum;
    fputs("<table>", f);
    th_timing(f, first);
    fputs("<th>share</th></tr>\n", f);
    for (size_t i = 0; i < s->n && i < limit; i++) {
        td_timing(f, a[i]->key, &a[i]->row);
        double sh = all > 0 ? 100 * a[i]->sum / all : 0;
        fprintf(f, "<td><div class=\"share\"><span style=\"width:%.1f%%\"></span></div>%.1f%%</td></tr>\n",
                sh, sh);
    }
    fputs("</table>", f);
    if (s->n > limit) fprintf(f, "<p class=\"muted\">… %zu more rows</p>", s->n - limit);
    fputs("</section>\n", f);
    free(a);
}

static const char k_css[] =
    "*{box-sizing:border-box}body{margin:0;font:14px/1.45 -apple-system,'Segoe UI',Roboto,"
    "'Helvetica Neue',Arial,sans-serif;background:#f4f6f9;color:#1f2933}"
    "header{background:linear-gradient(90deg,#1f3a5f,#2f5d8a);color:#fff;padding:22px 32px}"
    "header h1{margin:0;font-size:22px;font-weight:600}header p{margin:4px 0 0;opacity:.85}"
    "main{padding:20px 32px;max-width:1400px;margin:auto}"
    ".kpis{display:grid;grid-template-columns:repeat(6,1fr);gap:12px;margin-bottom:16px}"
    ".kpi{background:#fff;border-radius:10px;padding:12px 16px;box-shadow:0 1px 3px rgba(0,0,0,.08)}"
    ".kpi .v{font-size:22px;font-weight:600;color:#1f3a5f}.kpi .l{font-size:12px;color:#66788a;"
    "text-transform:uppercase;letter-spacing:.04em}"
    ".card{background:#fff;border-radius:10px;padding:14px 18px;margin-bottom:16px;"
    "box-shadow:0 1px 3px rgba(0,0,0,.08);overflow-x:auto}"
    ".card h2{margin:0 0 10px;font-size:16px;font-weight:600;color:#1f3a5f}"
    ".grid2{display:grid;grid-template-columns:1fr 1fr;gap:16px}"
    "table{border-collapse:collapse;width:100%;font-size:13px;font-variant-numeric:tabular-nums}"
    "th{text-align:right;color:#66788a;font-weight:600;border-bottom:2px solid #e3e8ee;padding:5px 8px}"
    "td{text-align:right;padding:4px 8px;border-bottom:1px solid #eef1f4}"
    "th:first-child,td.k{text-align:left}td.k{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px}"
    "tr:hover td{background:#f7f9fc}"
    ".share{display:inline-block;width:70px;height:8px;background:#eef1f4;border-radius:4px;"
    "margin-right:6px;vertical-align:middle}.share span{display:block;height:8px;border-radius:4px;"
    "background:#4e79a7}"
    ".muted{color:#8796a5}svg.chart{display:block;max-width:100%;height:auto}"
    "svg .lbl{font-size:12px;fill:#33414e}svg .val{font-size:11px;fill:#66788a}"
    "svg .axis{font-size:11px;fill:#66788a}svg .grid{stroke:#e8ecf0;stroke-width:1}"
    "footer{color:#8796a5;font-size:12px;padding:0 32px 24px;max-width:1400px;margin:auto}";

// ============================================================================
// page
// ============================================================================

static void kpi(FILE *f, const char *label, const char *value) {
    fprintf(f, "<div class=\"kpi\"><div class=\"v\">%s</div><div class=\"l\">%s</div></div>", value,
            label);
}

// The KPI cards: throughput, decode step latency, barrier wait share, events.
static void html_kpis(FILE *f, const struct lm_prof_report *r) {
    char b[64], b2[64];
    fputs("<div class=\"kpis\">", f);
    const struct lm_rgroup *gd = lm_r_find(&r->sec[LM_RS_PHASE], "decode");
    const struct lm_rgroup *gp = lm_r_find(&r->sec[LM_RS_PHASE], "prefill");
    snprintf(b, sizeof b, "%.1f", gd && gd->sum > 0 ? r->tokens[LM_PHASE_DECODE] / (gd->sum * 1e-9) : 0.0);
    kpi(f, "decode tok/s", b);
    snprintf(b, sizeof b, "%.1f", gp && gp->sum > 0 ? r->tokens[LM_PHASE_PREFILL] / (gp->sum * 1e-9) : 0.0);
    kpi(f, "prefill tok/s", b);
    kpi(f, "decode step avg", gd ? hdur(b, sizeof b, gd->row.avg) : "–");
    kpi(f, "decode step p99", gd ? hdur(b2, sizeof b2, gd->row.p99) : "–");
    double busy = 0, wait = 0;
    for (int t = 0; t < r->n_threads; t++) {
        busy += r->th[t].busy;
        wait += r->th[t].wait;
    }
    snprintf(b, sizeof b, "%.1f%%", busy + wait > 0 ? 100 * wait / (busy + wait) : 0.0);
    kpi(f, "barrier wait share", b);
    snprintf(b, sizeof b, "%llu", (unsigned long long)r->n_events);
    kpi(f, "events", b);
    fputs("</div>\n", f);
}

// Phase spans with tokens and tok/s for prefill and decode.
static void html_phases(FILE *f, const struct lm_prof_report *r) {
    fputs("<section class=\"card\"><h2>Phases</h2><table>", f);
    th_timing(f, "phase");
    fputs("<th>tokens</th><th>tok/s</th></tr>\n", f);
    for (int p = 0; p < LM_PHASE_COUNT; p++) {
        const struct lm_rgroup *g = lm_r_find(&r->sec[LM_RS_PHASE], pname(p));
        if (!g) continue;
        td_timing(f, pname(p), &g->row);
        if ((p == LM_PHASE_PREFILL || p == LM_PHASE_DECODE) && r->tokens[p] && g->sum > 0)
            fprintf(f, "<td>%llu</td><td>%.1f</td></tr>\n", (unsigned long long)r->tokens[p],
                    r->tokens[p] / (g->sum * 1e-9));
        else fputs("<td></td><td></td></tr>\n", f);
    }
    fputs("</table></section>\n", f);
}

// Engine steps (traces of the engine: lm_engine_step): latency by kind, tokens per step.
static void html_engine_steps(FILE *f, const struct lm_prof_report *r) {
    const struct lm_rgroup *ge = lm_r_find(&r->sec[LM_RS_STEP], "engine");
    if (!ge || !ge->n) return;
    fputs("<section class=\"card\"><h2>Engine steps (admission + forward pass + sampling)</h2><table>", f);
    th_timing(f, "step");
    fputs("</tr>\n", f);
    static const char *const kinds[3][2] = {{"engine", "all"}, {"engine decode only", "decode only"},
                                            {"engine with prefill", "with prefill"}};
    for (int i = 0; i < 3; i++) {
        const struct lm_rgroup *g = lm_r_find(&r->sec[LM_RS_STEP], kinds[i][0]);
        if (!g) continue;
        td_timing(f, kinds[i][1], &g->row);
        fputs("</tr>\n", f);
    }
    fputs("</table><table><tr><th>per step</th><th>avg</th><th>min</th><th>max</th><th>p95</th>"
          "<th>total</th></tr>\n", f);
    static const char *const counts[4] = {"tokens", "decode", "prefill", "seqs"};
    for (int i = 0; i < 4; i++) {
        const struct lm_rgroup *g = lm_r_find(&r->sec[LM_RS_STEP_TOKENS], counts[i]);
        if (!g) continue;
        fprintf(f, "<tr><td class=\"k\">%s</td><td>%.2f</td><td>%.0f</td><td>%.0f</td><td>%.0f</td>"
                   "<td>%.0f</td></tr>\n", counts[i], g->row.avg, g->row.min, g->row.max,
                g->row.p95, g->row.total);
    }
    fputs("</table></section>\n", f);
}

// Matmul shape x variant with GB/s and GFLOP/s, by total time.
static void html_matmul(FILE *f, const struct lm_prof_report *r) {
    const struct lm_rsection *ms = &r->sec[LM_RS_MATMUL];
    fputs("<section class=\"card\"><h2>Matmul shape × variant</h2>", f);
    if (!ms->n) fputs("<p class=\"muted\">no samples</p>", f);
    else {
        struct lm_rgroup **a = lm_r_sorted(ms, true);
        if (a) {
            fputs("<table>", f);
            th_timing(f, "op m n k dtype variant");
            fputs("<th>GB/s</th><th>GFLOP/s</th></tr>\n", f);
            for (size_t i = 0; i < ms->n; i++) {
                td_timing(f, a[i]->key, &a[i]->row);
                fprintf(f, "<td>%.2f</td><td>%.2f</td></tr>\n", a[i]->sum > 0 ? a[i]->bytes / a[i]->sum : 0,
                        a[i]->sum > 0 ? a[i]->flops / a[i]->sum : 0);
            }
            fputs("</table>", f);
            free(a);
        }
    }
    fputs("</section>\n", f);
}

// Busy vs barrier wait per thread.
static void html_threads(FILE *f, const struct lm_prof_report *r) {
    char b[64], b2[64];
    fputs("<section class=\"card\"><h2>Threads: busy vs barrier wait</h2><table><tr><th>thread</th>"
          "<th>busy</th><th>wait</th><th>wait share</th><th>barriers</th></tr>\n", f);
    for (int t = 0; t < r->n_threads; t++) {
        double tot = r->th[t].busy + r->th[t].wait, sh = tot > 0 ? 100 * r->th[t].wait / tot : 0;
        fprintf(f, "<tr><td class=\"k\">%d</td><td>%s</td><td>%s</td><td><div class=\"share\">"
                   "<span style=\"width:%.1f%%;background:#b6b6b6\"></span></div>%.1f%%</td><td>%llu</td></tr>\n",
                t, hdur(b, sizeof b, r->th[t].busy), hdur(b2, sizeof b2, r->th[t].wait), sh, sh,
                (unsigned long long)r->th[t].n_bar);
    }
    fputs("</table></section>\n", f);
}

// Variant selections and memory gauges side by side.
static void html_variants_memory(FILE *f, const struct lm_prof_report *r) {
    fputs("<div class=\"grid2\"><section class=\"card\"><h2>Variant selection</h2><table>"
          "<tr><th>kernel → variant (reason)</th><th>count</th></tr>\n", f);
    const int vs[2] = {LM_RS_VARIANT, LM_RS_MM_VARIANT};
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < r->sec[vs[k]].n; i++) {
            fputs("<tr><td class=\"k\">", f);
            if (k) fputs("matmul ", f);
            esc(f, r->sec[vs[k]].g[i].key);
            fprintf(f, "</td><td>%zu</td></tr>\n", r->sec[vs[k]].g[i].n);
        }
    fputs("</table></section><section class=\"card\"><h2>Memory</h2><table><tr><th>gauge</th>"
          "<th>last</th><th>peak</th></tr>\n", f);
    for (int i = 0; i < 5 && r->have_mem; i++)
        fprintf(f, "<tr><td class=\"k\">%s</td><td>%.2f MiB</td><td>%.2f MiB</td></tr>\n",
                lm_r_mem_names[i], r->mem_last[i] / 1048576.0, r->mem_peak[i] / 1048576.0);
    fputs("</table></section></div>\n", f);
}

enum lm_status lm_prof_report_write_html(const struct lm_prof_report *r, const char *path) {
    FILE *f = fopen(path, "w");
    if (!f) return lm_error_set(LM_ERR_IO, "%s: %s", path, strerror(errno));
    int ph = main_phase(r);
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
          "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
          "<title>lumen profile report</title><style>", f);
    fputs(k_css, f);
    fputs("</style></head><body>\n<header><h1>lumen profile report</h1><p>", f);
    esc(f, r->path);
    fprintf(f, " · %llu events · %d threads · clock %s · dropped %llu</p></header>\n<main>\n",
            (unsigned long long)r->n_events, r->n_threads, r->clock[0] ? r->clock : "?",
            (unsigned long long)r->dropped);

    html_kpis(f, r);

    // ---- charts
    fprintf(f, "<section class=\"card\"><h2>Time by op · %s (summed over threads and layers)</h2>", pname(ph));
    chart_ops(f, r, ph);
    fputs("</section>\n", f);
    fprintf(f, "<section class=\"card\"><h2>Per-layer time · %s</h2>", pname(ph));
    chart_layers(f, r, ph);
    fputs("</section>\n<div class=\"grid2\"><section class=\"card\"><h2>Decode step latency over time</h2>", f);
    chart_steps(f, r);
    fputs("</section><section class=\"card\"><h2>Decode step latency histogram</h2>", f);
    chart_hist(f, r);
    fputs("</section></div>\n", f);

    // ---- tables
    html_phases(f, r);
    html_engine_steps(f, r);
    table_section(f, r, LM_RS_PHASE_OP, "By phase / op (per-thread spans)", "phase :: op", 60);
    html_matmul(f, r);
    table_section(f, r, LM_RS_BARRIER_OP, "Barrier wait by phase / op", "phase :: after op", 60);
    html_threads(f, r);
    table_section(f, r, LM_RS_LAYER, "Per-layer spans (thread 0, barriers included)", "phase :: block", 600);
    table_section(f, r, LM_RS_OP, "Op aggregate (all phases and layers)", "op", 60);

    html_variants_memory(f, r);
    fputs("</main>\n<footer>Percentiles are exact nearest-rank over the events. Op and barrier "
          "times are per-thread spans summed over threads. Generated by "
          "<code>lumen analyze --html</code>.</footer>\n</body></html>\n", f);
    bool err = ferror(f) != 0;
    if (fclose(f) != 0) err = true;
    if (err) return lm_error_set(LM_ERR_IO, "%s: write failed", path);
    return LM_OK;
}
