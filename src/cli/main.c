// lumen command line: dispatches to the subcommands (run, chat, tokenize, perplexity, info,
// analyze, bench, serve).
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const char *k_usage =
    "lumen: LLM inference for GGUF models on CPUs, with a built-in profiler\n"
    "\n"
    "usage: lumen <command> [options]\n"
    "\n"
    "commands:\n"
    "  run     generate text from a prompt (streams to stdout, stats on stderr)\n"
    "  chat    interactive multi-turn chat (line editing, history, KV kept between turns)\n"
    "  tokenize print a text's token ids and pieces\n"
    "  embed   embeddings of texts (JSON lines), pooled as the model says\n"
    "  rerank  a reranker's relevance scores of documents for a query\n"
    "  perplexity a text's perplexity (llama-perplexity's method); KL-divergence against a\n"
    "          base-logits file written by lumen or llama-perplexity\n"
    "  info    print a model's architecture, hyper-parameters, tokenizer and tensors\n"
    "  analyze report on a JSONL profile trace (text, optional --html page)\n"
    "  bench   throughput tests (pp/tg/TTFT), bandwidth roofline, --breakdown report\n"
    "  serve   OpenAI-compatible HTTP server on the continuous-batching engine\n"
    "\n"
    "`lumen <command> --help` shows each command's options.\n";

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
        !strcmp(argv[1], "help")) {
        fputs(k_usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? LM_EXIT_USAGE : 0;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "run")) return cmd_run(argc - 1, argv + 1);
    if (!strcmp(cmd, "info")) return cmd_info(argc - 1, argv + 1);
    if (!strcmp(cmd, "analyze")) return cmd_analyze(argc - 1, argv + 1);
    if (!strcmp(cmd, "bench")) return cmd_bench(argc - 1, argv + 1);
    if (!strcmp(cmd, "chat")) return cmd_chat(argc - 1, argv + 1);
    if (!strcmp(cmd, "tokenize")) return cmd_tokenize(argc - 1, argv + 1);
    if (!strcmp(cmd, "serve")) return cmd_serve(argc - 1, argv + 1);
    if (!strcmp(cmd, "perplexity")) return cmd_perplexity(argc - 1, argv + 1);
    if (!strcmp(cmd, "embed")) return cmd_embed(argc - 1, argv + 1);
    if (!strcmp(cmd, "rerank")) return cmd_rerank(argc - 1, argv + 1);
    fprintf(stderr, "lumen: unknown command '%s' (try `lumen --help`)\n", cmd);
    return LM_EXIT_USAGE;
}
