// Request parsing for the OpenAI routes (/v1/completions, /v1/chat/completions) and
// llama-server's /tokenize and /detokenize: JSON body -> struct api_request, every field
// type- and range-checked with a message naming it. No socket, no model: the fuzz target
// (fuzz/fuzz_server_api.c) drives these functions directly.
#include "api.h"

#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_internal.h"

// ================================================================ prompt

// A token id array: every element an integer id in [0, n_vocab).
static bool parse_ids(json_t *a, const char *key, int32_t n_vocab, int32_t **ids, int32_t *n,
                      struct api_error *e) {
    const size_t k = json_array_size(a);
    if (k > (size_t)INT32_MAX / 2) return api_bad_request(e, "invalid_value", key, "'%s' is too long", key);
    int32_t *v = malloc((k ? k : 1) * sizeof *v);
    if (!v) return api_oom(e);
    for (size_t i = 0; i < k; i++) {
        json_t *x = json_array_get(a, i);
        if (!json_is_integer(x)) {
            free(v);
            return api_bad_request(e, "invalid_type", key, "'%s'[%zu] must be an integer token id (got %s)",
                               key, i, api_json_kind(x));
        }
        const json_int_t id = json_integer_value(x);
        if (id < 0 || id >= n_vocab) {
            free(v);
            return api_bad_request(e, "invalid_value", key, "'%s'[%zu] is token %lld, outside the "
                               "vocabulary [0, %d)", key, i, (long long)id, n_vocab);
        }
        v[i] = (int32_t)id;
    }
    *ids = v;
    *n = (int32_t)k;
    return true;
}

static bool parse_prompt(json_t *o, int32_t n_vocab, struct api_request *r, struct api_error *e) {
    json_t *p = api_field(o, "prompt");
    if (!p) return api_bad_request(e, "missing_field", "prompt", "'prompt' is required");
    if (json_is_string(p)) {
        r->prompt_len = json_string_length(p);
        r->prompt = api_dup_n(json_string_value(p), r->prompt_len);
        return r->prompt ? true : api_oom(e);
    }
    if (!json_is_array(p)) return api_wrong_type(e, "prompt", "a string or an array of token ids", p);
    const size_t k = json_array_size(p);
    if (k == 0) return api_bad_request(e, "invalid_value", "prompt", "'prompt' is an empty array");
    json_t *first = json_array_get(p, 0);
    if (json_is_integer(first)) {
        r->has_prompt_ids = true;
        return parse_ids(p, "prompt", n_vocab, &r->prompt_ids, &r->n_prompt_ids, e);
    }
    // a batch of prompts: only a batch of one is served (one choice per request)
    if (k > 1)
        return api_bad_request(e, "unsupported", "prompt", "'prompt' holds %zu prompts; lumen serves one "
                           "prompt per request (send one request each)", k);
    if (json_is_string(first)) {
        r->prompt_len = json_string_length(first);
        r->prompt = api_dup_n(json_string_value(first), r->prompt_len);
        return r->prompt ? true : api_oom(e);
    }
    if (json_is_array(first)) {
        r->has_prompt_ids = true;
        return parse_ids(first, "prompt", n_vocab, &r->prompt_ids, &r->n_prompt_ids, e);
    }
    return api_wrong_type(e, "prompt", "a string or an array of token ids", first);
}

// ================================================================ structured output

// response_format, llama-server's json_schema and grammar: at most one constraint.
static bool parse_format(json_t *o, struct api_request *r, struct api_error *e) {
    json_t *rf = api_field(o, "response_format");
    json_t *js = api_field(o, "json_schema");
    json_t *gr = api_field(o, "grammar");
    const char *given = NULL; // the field that set r->format
    if (rf) {
        json_t *t = json_is_object(rf) ? json_object_get(rf, "type") : NULL;
        if (!json_is_string(t)) return api_wrong_type(e, "response_format", "an object with a string 'type'", rf);
        const char *ts = json_string_value(t);
        if (!strcmp(ts, "json_object")) {
            r->format = API_FORMAT_JSON_OBJECT;
        } else if (!strcmp(ts, "json_schema")) {
            json_t *w = json_object_get(rf, "json_schema");
            if (!json_is_object(w))
                return api_bad_request(e, "invalid_value", "response_format", "response_format type 'json_schema' "
                                   "needs 'json_schema': {\"name\", \"schema\", \"strict\"}");
            json_t *nm = json_object_get(w, "name");
            if (nm && !json_is_string(nm)) return api_wrong_type(e, "response_format.json_schema.name", "a string", nm);
            bool strict = false;
            if (!api_get_bool(w, "strict", &strict, e)) return false;
            json_t *sc = api_field(w, "schema");
            if (sc && !json_is_object(sc) && !json_is_boolean(sc))
                return api_wrong_type(e, "response_format.json_schema.schema", "a JSON Schema object", sc);
            r->format = API_FORMAT_JSON_SCHEMA;
            r->schema = sc ? api_dump(sc) : api_dup_n("{}", 2);
            if (!r->schema) return api_oom(e);
            r->schema_len = strlen(r->schema);
        } else if (strcmp(ts, "text") != 0) {
            return api_bad_request(e, "invalid_value", "response_format", "response_format type '%.40s' is not one of "
                               "'text', 'json_object', 'json_schema'", ts);
        }
        if (r->format != API_FORMAT_TEXT) given = "response_format";
    }
    if (js) {
        if (!json_is_object(js) && !json_is_boolean(js)) return api_wrong_type(e, "json_schema", "a JSON Schema object", js);
        if (given)
            return api_bad_request(e, "invalid_value", "json_schema", "'json_schema' and '%s' both constrain the output; "
                               "give one", given);
        r->format = API_FORMAT_JSON_SCHEMA;
        r->schema = api_dump(js);
        if (!r->schema) return api_oom(e);
        r->schema_len = strlen(r->schema);
        given = "json_schema";
    }
    if (gr) {
        if (!json_is_string(gr)) return api_wrong_type(e, "grammar", "a string (GBNF)", gr);
        if (json_string_length(gr) == 0) return true; // llama-server: an empty grammar is none
        if (given)
            return api_bad_request(e, "invalid_value", "grammar", "'grammar' and '%s' both constrain the output; give one",
                               given);
        r->format = API_FORMAT_GRAMMAR;
        r->grammar = api_dup_n(json_string_value(gr), json_string_length(gr));
        if (!r->grammar) return api_oom(e);
        r->grammar_len = json_string_length(gr);
        given = "grammar";
    }
    if (given && r->tool_choice != API_TOOLS_NONE)
        return api_bad_request(e, "unsupported", given, "'%s' together with 'tools' is not supported (the tool-call "
                           "format constrains the output; set tool_choice 'none' or leave out one of them)", given);
    return true;
}

// ================================================================ sampling fields

static bool parse_stop(json_t *o, struct api_request *r, struct api_error *e) {
    json_t *s = api_field(o, "stop");
    if (!s) return true;
    json_t *one[1] = {s};
    json_t **items = one;
    size_t k = 1;
    if (json_is_array(s)) {
        k = json_array_size(s);
        if (k > API_MAX_STOP)
            return api_bad_request(e, "invalid_value", "stop", "'stop' has %zu strings (at most %d)", k,
                               API_MAX_STOP);
        items = NULL;
    } else if (!json_is_string(s)) {
        return api_wrong_type(e, "stop", "a string or an array of strings", s);
    }
    for (size_t i = 0; i < k; i++) {
        json_t *v = items ? items[i] : json_array_get(s, i);
        if (!json_is_string(v))
            return api_bad_request(e, "invalid_type", "stop", "'stop'[%zu] must be a string (got %s)", i,
                               api_json_kind(v));
        const size_t n = json_string_length(v);
        if (n == 0) continue; // an empty stop string would match everywhere: ignored
        if (n > API_MAX_STOP_LEN)
            return api_bad_request(e, "invalid_value", "stop", "a stop string has %zu bytes (at most %d)", n,
                               API_MAX_STOP_LEN);
        r->stop[r->n_stop] = api_dup_n(json_string_value(v), n);
        if (!r->stop[r->n_stop]) return api_oom(e);
        r->stop_len[r->n_stop++] = n;
    }
    return true;
}

// A logit_bias key: a token id in canonical decimal ("0", "17"; not "017", "+17", " 17" or
// "1e1", which would name the same token twice), below n_vocab. -1 when it is not one.
static long long bias_key(const char *key, int32_t n_vocab) {
    const size_t n = strlen(key);
    if (n == 0 || n > 10 || (key[0] == '0' && n > 1)) return -1;
    long long id = 0;
    for (size_t i = 0; i < n; i++) {
        if (key[i] < '0' || key[i] > '9') return -1;
        id = id * 10 + (key[i] - '0');
    }
    return id < n_vocab ? id : -1;
}

// logit_bias: {"token id": bias in [-100, 100]}; -100 bans the token (as OpenAI documents).
// Keys are canonical decimal ids (the body's duplicate keys are refused by the JSON load),
// at most API_MAX_LOGIT_BIAS of them.
static bool parse_logit_bias(json_t *o, int32_t n_vocab, struct api_request *r, struct api_error *e) {
    json_t *b = api_field(o, "logit_bias");
    if (!b) return true;
    if (!json_is_object(b)) return api_wrong_type(e, "logit_bias", "an object of token id: bias", b);
    const size_t k = json_object_size(b);
    if (k == 0) return true;
    if (k > API_MAX_LOGIT_BIAS)
        return api_bad_request(e, "invalid_value", "logit_bias", "'logit_bias' has %zu entries (at most %d)", k,
                           API_MAX_LOGIT_BIAS);
    r->bias_tokens = malloc(k * sizeof *r->bias_tokens);
    r->bias_values = malloc(k * sizeof *r->bias_values);
    if (!r->bias_tokens || !r->bias_values) return api_oom(e);
    const char *key;
    json_t *v;
    json_object_foreach(b, key, v) {
        const long long id = bias_key(key, n_vocab);
        if (id < 0)
            return api_bad_request(e, "invalid_value", "logit_bias", "logit_bias key '%.40s' is not a token id "
                               "in [0, %d) written in decimal without sign, spaces or leading zeros", key,
                               n_vocab);
        if (!json_is_number(v))
            return api_bad_request(e, "invalid_type", "logit_bias", "logit_bias['%s'] must be a number (got "
                               "%s)", key, api_json_kind(v));
        const double x = json_number_value(v);
        if (!(x >= -100.0 && x <= 100.0))
            return api_bad_request(e, "invalid_value", "logit_bias", "logit_bias['%s'] is %g; it must be in "
                               "[-100, 100]", key, x);
        r->bias_tokens[r->n_bias] = (int32_t)id;
        r->bias_values[r->n_bias++] = x <= -100.0 ? -INFINITY : (float)x;
    }
    return true;
}

static bool parse_sampling(json_t *o, int32_t n_vocab, struct api_request *r, struct api_error *e) {
    struct lm_sampler_params *sp = &r->sampling;
    double x = sp->temperature;
    if (!api_get_number(o, "temperature", 0.0, 100.0, &x, NULL, e)) return false;
    sp->temperature = (float)x;
    x = sp->top_p;
    if (!api_get_number(o, "top_p", 0.0, 1.0, &x, NULL, e)) return false;
    sp->top_p = (float)x;
    x = sp->min_p;
    if (!api_get_number(o, "min_p", 0.0, 1.0, &x, NULL, e)) return false;
    sp->min_p = (float)x;
    x = sp->repeat_penalty;
    if (!api_get_number(o, "repeat_penalty", 0.01, 100.0, &x, NULL, e)) return false;
    sp->repeat_penalty = (float)x;
    x = 0.0;
    if (!api_get_number(o, "presence_penalty", -2.0, 2.0, &x, NULL, e)) return false;
    sp->presence_penalty = (float)x;
    x = 0.0;
    if (!api_get_number(o, "frequency_penalty", -2.0, 2.0, &x, NULL, e)) return false;
    sp->frequency_penalty = (float)x;
    long long v = sp->top_k;
    if (!api_get_int(o, "top_k", -1, INT32_MAX, &v, NULL, e)) return false;
    sp->top_k = v < 0 ? 0 : (int32_t)v; // -1 (llama-server's "off") and 0 both mean off
    v = 0;
    if (!api_get_int(o, "seed", LLONG_MIN, LLONG_MAX, &v, &r->seed_given, e)) return false;
    sp->seed = (uint64_t)v;
    return parse_stop(o, r, e) && parse_logit_bias(o, n_vocab, r, e);
}

// Fields that would change what is computed and that lumen does not implement: refused
// with a clear message rather than silently ignored.
static bool parse_unsupported(json_t *o, enum api_kind kind, struct api_error *e) {
    long long n = 1;
    if (!api_get_int(o, "n", 1, INT32_MAX, &n, NULL, e)) return false;
    if (n != 1)
        return api_bad_request(e, "unsupported", "n", "'n' is %lld; lumen returns one choice per request "
                           "(n must be 1; send n requests)", n);
    if (kind == API_COMPLETION) {
        long long best_of = 1;
        if (!api_get_int(o, "best_of", 1, INT32_MAX, &best_of, NULL, e)) return false;
        if (best_of != 1)
            return api_bad_request(e, "unsupported", "best_of", "'best_of' must be 1 (got %lld)", best_of);
        bool echo = false;
        if (!api_get_bool(o, "echo", &echo, e)) return false;
        if (echo) return api_bad_request(e, "unsupported", "echo", "'echo' is not supported");
        json_t *suffix = api_field(o, "suffix");
        if (suffix && !json_is_string(suffix)) return api_wrong_type(e, "suffix", "a string", suffix);
        if (suffix && json_string_length(suffix) > 0)
            return api_bad_request(e, "unsupported", "suffix", "'suffix' (insertion) is not supported");
    } else {
        json_t *fns = api_field(o, "functions");
        if (fns && (!json_is_array(fns) || json_array_size(fns) > 0))
            return api_bad_request(e, "unsupported", "functions", "'functions' is not supported");
    }
    return true;
}

// ================================================================ entry points

bool api_json_within(const char *p, size_t n, const struct api_limits *lim, struct api_error *e) {
    size_t values = 0;
    int depth = 0;
    bool in_token = false; // inside a number or literal
    for (size_t i = 0; i < n; i++) {
        const char ch = p[i];
        if (ch == '"') { // a string (or a key): one value; skip to its end
            values++;
            in_token = false;
            for (i++; i < n && p[i] != '"'; i++)
                if (p[i] == '\\') i++;
        } else if (ch == '{' || ch == '[') {
            values++;
            in_token = false;
            if (++depth > lim->max_depth)
                return api_bad_request(e, "invalid_json", NULL, "the JSON body nests deeper than %d levels",
                                   lim->max_depth);
        } else if (ch == '}' || ch == ']' || ch == ',' || ch == ':' || ch == ' ' || ch == '\t' ||
                   ch == '\n' || ch == '\r') {
            if (ch == '}' || ch == ']') depth--;
            in_token = false;
        } else if (!in_token) { // a number or a literal starts
            values++;
            in_token = true;
        }
        if (values > lim->max_values)
            return api_fail(e, 413, "invalid_request_error", "request_too_large", NULL, "the JSON body holds "
                            "more than %zu values (strings, numbers, objects, arrays)", lim->max_values);
    }
    return true;
}

json_t *api_load_object(const char *body, size_t len, const struct api_limits *lim, struct api_error *e) {
    if (lim && !api_json_within(body ? body : "", len, lim, e)) return NULL;
    json_error_t je;
    // duplicate keys are refused: two parsers (a proxy's and ours) must not read one body two ways
    json_t *root = json_loadb(body ? body : "", len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        api_bad_request(e, "invalid_json", NULL, "malformed JSON body: %s (line %d, column %d)", je.text,
                    je.line, je.column);
        return NULL;
    }
    if (!json_is_object(root)) {
        api_wrong_type(e, "body", "a JSON object", root);
        json_decref(root);
        return NULL;
    }
    return root;
}

bool api_parse_generate(const char *body, size_t len, enum api_kind kind, int32_t n_vocab,
                        const struct api_limits *lim, struct api_request *r, struct api_error *e) {
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->sampling = lm_sampler_params_default();
    json_t *o = api_load_object(body, len, lim, e);
    if (!o) return false;
    bool ok = true;
    json_t *model = api_field(o, "model");
    if (model && !json_is_string(model)) ok = api_wrong_type(e, "model", "a string", model);
    if (ok) ok = kind == API_COMPLETION ? parse_prompt(o, n_vocab, r, e) : api_parse_messages(o, r, e);
    if (ok) ok = parse_unsupported(o, kind, e);
    if (ok && kind == API_CHAT) ok = api_parse_tools(o, r, e) && api_parse_tool_choice(o, r, e);
    if (ok && kind == API_CHAT) ok = api_parse_reasoning(o, r, e);
    if (ok && kind == API_COMPLETION) { // tools are a chat thing
        json_t *t = api_field(o, "tools");
        if (t && (!json_is_array(t) || json_array_size(t) > 0))
            ok = api_bad_request(e, "unsupported", "tools", "'tools' needs /v1/chat/completions");
        r->tool_choice = API_TOOLS_NONE;
    }
    if (ok) ok = parse_format(o, r, e);
    // without tools in the prompt, none of them is called
    if (ok && r->tool_choice == API_TOOLS_NONE && r->tools_json) {
        free(r->tools_json);
        r->tools_json = NULL;
        r->tools_len = 0;
    }
    long long mt = 0, mct = 0;
    bool mt_given = false, mct_given = false;
    if (ok) ok = api_get_int(o, "max_tokens", 1, 1 << 24, &mt, &mt_given, e);
    if (ok) ok = api_get_int(o, "max_completion_tokens", 1, 1 << 24, &mct, &mct_given, e);
    if (ok && (mt_given || mct_given)) {
        r->max_tokens_given = true;
        r->max_tokens = (int32_t)(mct_given ? mct : mt); // max_completion_tokens supersedes
    }
    if (ok) ok = parse_sampling(o, n_vocab, r, e);
    if (ok) ok = api_get_bool(o, "ignore_eos", &r->ignore_eos, e);
    if (ok) ok = api_get_bool(o, "stream", &r->stream, e);
    if (ok) {
        r->lookup_given = api_field(o, "lookup") != NULL;
        ok = api_get_bool(o, "lookup", &r->lookup, e);
    }
    if (ok) {
        r->draft_model_given = api_field(o, "draft_model") != NULL;
        ok = api_get_bool(o, "draft_model", &r->draft_model, e);
    }
    if (ok) {
        long long dm = 0;
        ok = api_get_int(o, "draft_max", 1, LM_DRAFT_MAX_LIMIT, &dm, NULL, e);
        r->draft_max = (int32_t)dm;
    }
    if (ok) {
        json_t *so = api_field(o, "stream_options");
        if (so && !json_is_object(so)) ok = api_wrong_type(e, "stream_options", "an object", so);
        else if (so) ok = api_get_bool(so, "include_usage", &r->include_usage, e);
    }
    if (ok && kind == API_COMPLETION) { // logprobs: alternatives per token, 0..20
        long long lp = 0;
        ok = api_get_int(o, "logprobs", 0, API_MAX_TOP_LOGPROBS, &lp, &r->logprobs, e);
        r->top_logprobs = (int32_t)lp;
    } else if (ok) { // logprobs: bool, top_logprobs: 0..20 alternatives
        ok = api_get_bool(o, "logprobs", &r->logprobs, e);
        long long tl = 0;
        bool tl_given = false;
        if (ok) ok = api_get_int(o, "top_logprobs", 0, API_MAX_TOP_LOGPROBS, &tl, &tl_given, e);
        if (ok && tl_given && tl > 0 && !r->logprobs)
            ok = api_bad_request(e, "invalid_value", "top_logprobs", "'top_logprobs' needs 'logprobs': true");
        r->top_logprobs = (int32_t)tl;
    }
    json_decref(o);
    if (!ok) api_request_free(r);
    return ok;
}

int32_t api_n_logprobs(const struct api_request *r) {
    return r->logprobs ? 1 + r->top_logprobs : 0;
}

void api_request_free(struct api_request *r) {
    free(r->prompt);
    free(r->prompt_ids);
    for (size_t i = 0; i < r->n_msgs && r->msgs; i++) {
        free(r->msgs[i].role);
        free(r->msgs[i].content);
        for (size_t j = 0; j < r->msgs[i].n_calls; j++) {
            free(r->msgs[i].calls[j].id);
            free(r->msgs[i].calls[j].name);
            free(r->msgs[i].calls[j].arguments);
        }
        free(r->msgs[i].calls);
        free(r->msgs[i].tool_call_id);
        free(r->msgs[i].reasoning);
    }
    free(r->msgs);
    for (int32_t i = 0; i < r->n_tools; i++) {
        free(r->tools[i].name);
        free(r->tools[i].parameters);
    }
    free(r->tools);
    free(r->tools_json);
    free(r->schema);
    free(r->grammar);
    free(r->metadata);
    for (int32_t i = 0; i < r->n_stop; i++) free(r->stop[i]);
    free(r->bias_tokens);
    free(r->bias_values);
    const enum api_kind kind = r->kind;
    const enum api_dialect dialect = r->dialect;
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->dialect = dialect;
}

bool api_parse_tokenize(const char *body, size_t len, const struct api_limits *lim, struct api_tokenize *t,
                        struct api_error *e) {
    memset(t, 0, sizeof *t);
    t->parse_special = true;
    json_t *o = api_load_object(body, len, lim, e);
    if (!o) return false;
    bool ok = true;
    json_t *c = api_field(o, "content");
    if (!c) ok = api_bad_request(e, "missing_field", "content", "'content' is required");
    else if (!json_is_string(c)) ok = api_wrong_type(e, "content", "a string", c);
    if (ok) ok = api_get_bool(o, "add_special", &t->add_special, e);
    if (ok) ok = api_get_bool(o, "parse_special", &t->parse_special, e);
    if (ok) ok = api_get_bool(o, "with_pieces", &t->with_pieces, e);
    if (ok) {
        t->len = json_string_length(c);
        t->content = api_dup_n(json_string_value(c), t->len);
        if (!t->content) ok = api_oom(e);
    }
    json_decref(o);
    return ok;
}

bool api_parse_detokenize(const char *body, size_t len, int32_t n_vocab, const struct api_limits *lim,
                          int32_t **ids, int32_t *n_ids, struct api_error *e) {
    *ids = NULL;
    *n_ids = 0;
    json_t *o = api_load_object(body, len, lim, e);
    if (!o) return false;
    bool ok = true;
    json_t *t = api_field(o, "tokens");
    if (!t) ok = api_bad_request(e, "missing_field", "tokens", "'tokens' is required");
    else if (!json_is_array(t)) ok = api_wrong_type(e, "tokens", "an array of token ids", t);
    if (ok) ok = parse_ids(t, "tokens", n_vocab, ids, n_ids, e);
    json_decref(o);
    return ok;
}
