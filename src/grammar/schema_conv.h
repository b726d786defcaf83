// The JSON Schema converter's internal state and the functions its files share
// (schema_conv.c: failure, paths, rules, primitives, literals, $ref resolution; schema.c: $ref
// expansion, dispatch, entry; schema_types.c: objects, arrays, strings, numbers;
// schema_combine.c: type, enum, the combinators and merges). Not part of the API.
#ifndef LM_GRAMMAR_SCHEMA_CONV_H
#define LM_GRAMMAR_SCHEMA_CONV_H

#include <jansson.h>

#include "grammar/schema.h"

struct rule {
    char *name, *body; // body NULL while a $ref target is being expanded
    bool dead;         // its body moved to a $ref target's rule: not written out
};

struct conv {
    json_t *doc;
    struct rule *rules;
    int n_rules, cap_rules;
    int *by_name, *by_body; // open-addressing tables of rule indices (-1 empty)
    int cap_tab;
    // $ref targets: pointer text -> rule index; edges between targets reached with no
    // character consumed (a cycle of them is left recursion)
    char **ref_ptr;
    int *ref_rule;
    int n_refs, cap_refs;
    int *edge_from, *edge_to;
    int n_edges, cap_edges;
    int cur_ref;
    int last_new; // the rule rule_for created last (-1: it reused one)
    bool guarded;
    int depth;
    long nodes;
    uint64_t deadline;
    size_t out_bytes;
    bool failed;
    char path[1024];
    size_t path_n;
    // the dispatch of one subschema (schema.c), which sc_visit calls
    const char *(*visit)(struct conv *c, json_t *s, const char *hint);
};

// Failure: one message "json schema: POINTER: ..." (the first wins); always false.
bool sc_fail(struct conv *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool sc_nomem(struct conv *c);
size_t sc_path_push(struct conv *c, const char *seg); // returns the old length for sc_path_pop
size_t sc_path_push_i(struct conv *c, size_t i);
void sc_path_pop(struct conv *c, size_t old);
void sc_buf_init(struct lm_strbuf *b);
// A new rule named after hint (made unique), body NULL to set later; its index or -1.
int sc_rule_new(struct conv *c, const char *hint, const char *body);
void sc_rule_set_body(struct conv *c, int i, const char *body);
// Rule `to` takes rule `from`'s body; `from` is no longer written out.
void sc_rule_take_body(struct conv *c, int to, int from);
// The rule for a body (an existing one with the same body, or a new one named after hint).
const char *sc_rule_for(struct conv *c, const char *hint, struct lm_strbuf *body);
const char *sc_rule_text(struct conv *c, const char *hint, const char *text);
const char *sc_prim(struct conv *c, const char *name); // a shared rule ("string", "value", ...)
void sc_dump_json(struct lm_strbuf *b, json_t *v);   // v as the grammar spaces JSON
void sc_put_literal(struct lm_strbuf *b, json_t *v); // the same, as one GBNF literal
json_t *sc_resolve(struct conv *c, const char *ref);   // a local $ref's target (borrowed)
const char *sc_visit(struct conv *c, json_t *s, const char *hint); // a subschema's rule
const char *sc_visit_child(struct conv *c, json_t *s, const char *seg, long idx,
                           const char *hint, bool guarded);
void sc_hint_join(char *out, size_t cap, const char *a, const char *b);
bool sc_in_list(const char *const *l, const char *k);
bool sc_has_any(json_t *s, const char *const *l);
bool sc_only_keywords(struct conv *c, json_t *s, const char *const *allowed, const char *why);
extern const char *const sc_annotations[];

// schema_types.c, schema_combine.c (the keywords)
enum { T_NULL = 1, T_BOOL = 2, T_OBJECT = 4, T_ARRAY = 8, T_NUMBER = 16, T_STRING = 32, T_INTEGER = 64 };
extern const char *const sc_type_names[];
bool sc_get_types(struct conv *c, json_t *s, unsigned *out);
json_t *sc_merge_schemas(struct conv *c, json_t *a, json_t *b, int depth);
const char *sc_visit_object(struct conv *c, json_t *s, const char *hint);
const char *sc_visit_array(struct conv *c, json_t *s, const char *hint);
const char *sc_visit_string(struct conv *c, json_t *s, const char *hint);
const char *sc_visit_number(struct conv *c, json_t *s, const char *hint, bool integer);
const char *sc_visit_enum(struct conv *c, json_t *s, const char *hint, unsigned types);
const char *sc_visit_any_of(struct conv *c, json_t *s, const char *hint, const char *kw);
const char *sc_visit_all_of(struct conv *c, json_t *s, const char *hint);

#endif
