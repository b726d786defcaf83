// f16 il GEMM microbenchmark (not a ctest): the table's il_gemm[F16] walked as matmul.c's
// rows_il16 walks it (groups in 256 KB chunks, tiles of 16 tokens) over nomic-embed-text's
// shapes, and the core's FP32 FMA peak (24-chain zmm fma loop), in % of that peak.
// Args: [tokens (2048)] [activation stride in bytes, 0 = n_in * 4]. Issue 38's nomic notes.
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/kernels.h"
#include "tensor/dtype.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

// 512-bit fmas per ns: 16 independent chains (enough for 2 pipes x 4 cycles of latency)
static double fma_peak(void) {
#if defined(__x86_64__) && defined(__AVX512F__)
    const long n = 50000000;
    const double t0 = now();
    __asm__ volatile("mov %0, %%rcx\n"
                     "1:\n"
                     ".irp r,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15\n"
                     "vfmadd231ps %%zmm30, %%zmm31, %%zmm\\r\n"
                     ".endr\n"
                     "dec %%rcx\n"
                     "jnz 1b\n"
                     :
                     : "r"(n)
                     : "rcx", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8",
                       "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "memory");
    return 16.0 * (double)n / ((now() - t0) * 1e9);
#else
    return 0;
#endif
}

// W (n_out, n_in) f16 @ n_tok activation rows (xs bytes apart) -> Y, as rows_il16; seconds
static double walk(lm_il_gemm_fn g, int64_t n_out, int64_t n_in, int64_t n_tok, const lm_f16 *W,
                   const char *X, size_t xs, float *Y) {
    const size_t gb = (size_t)16 * (size_t)n_in * sizeof(lm_f16);
    int64_t chunk = (int64_t)((256 * 1024) / gb);
    if (chunk < 1) chunk = 1;
    const double t0 = now();
    for (int64_t g0 = 0; g0 < n_out / 16; g0 += chunk) {
        const int64_t g1 = g0 + chunk < n_out / 16 ? g0 + chunk : n_out / 16;
        for (int64_t i = 0; i < n_tok; i += 16) {
            const int nt = n_tok - i < 16 ? (int)(n_tok - i) : 16;
            for (int64_t k = g0; k < g1; k++)
                g(n_in, nt, Y + i * n_out + k * 16, (size_t)n_out, W + k * 16 * n_in, X + (size_t)i * xs, xs);
        }
    }
    return now() - t0;
}

int main(int argc, char **argv) {
    const int64_t n_tok = argc > 1 ? atoll(argv[1]) : 2048;
    const size_t stride = argc > 2 ? (size_t)atoll(argv[2]) : 0;
    const struct lm_kernels *k = lm_kernels_best();
    if (n_tok < 1 || !k->il_gemm[LM_DTYPE_F16]) {
        fprintf(stderr, "f16_gemm_bench: %s has no il_gemm for f16 (or tokens %lld < 1)\n", k->name, (long long)n_tok);
        return 1;
    }
    const double pk = fma_peak();
    printf("table %s, fma peak %.2f zmm fma/ns, %lld tokens\n", k->name, pk, (long long)n_tok);
    const int64_t shapes[3][2] = {{3072, 768}, {768, 3072}, {768, 768}}; // ffn_up/gate, ffn_down, q/k/v/o
    const int64_t max_in = 3072, max_out = 3072;
    const size_t xs_max = stride > max_in * 4 ? stride : (size_t)max_in * 4;
    lm_f16 *W = malloc(sizeof(lm_f16) * (size_t)(max_out * max_in));
    char *X = malloc(xs_max * (size_t)n_tok);
    float *Y = malloc(sizeof(float) * (size_t)(n_tok * max_out));
    if (!W || !X || !Y) return 1;
    for (int64_t i = 0; i < max_out * max_in; i++) W[i] = lm_f32_to_f16((float)((i * 7919) % 2001 - 1000) / 1000.f);
    for (size_t i = 0; i < xs_max * (size_t)n_tok / 4; i++)
        ((float *)X)[i] = lm_f16_to_f32(lm_f32_to_f16((float)((i * 104729) % 2001 - 1000) / 1000.f));
    for (int s = 0; s < 3; s++) {
        const int64_t no = shapes[s][0], ni = shapes[s][1];
        const size_t xs = stride ? stride : (size_t)ni * 4;
        const double fmas = (double)no * (double)ni * (double)n_tok / 16;
        double best = 1e30;
        for (int rep = 0; rep < 3; rep++) { // the first touches the pages
            const double t = walk(k->il_gemm[LM_DTYPE_F16], no, ni, n_tok, W, X, xs, Y);
            if (t < best) best = t;
        }
        printf("%4lld x %4lld  stride %6zu  %8.2f ms  %6.1f%% of peak\n", (long long)no, (long long)ni, xs,
               best * 1e3, pk > 0 ? 100 * fmas / (best * 1e9) / pk : 0.0);
    }
    free(W);
    free(X);
    free(Y);
    return 0;
}
