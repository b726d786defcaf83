// The CPU features this build's natively compiled code may use, read from the compiler's own
// feature macros under the global flags (-march=native, CMAKE_C_FLAGS). Data only, no code:
// it is linked into binaries that must start on any x86-64 (cpu_check.c reads it).
#include "base/cpu_check.h"

// Feature macros not listed (__SHSTK__, __PKU__, __WAITPKG__, __MOVDIRI__, __SERIALIZE__,
// ...) name instructions the compiler only emits through intrinsics lumen does not call.
const char lm_cpu_required_list[] = ""
#ifdef __SSE3__
    "+sse3"
#endif
#ifdef __SSSE3__
    "+ssse3"
#endif
#ifdef __SSE4_1__
    "+sse4.1"
#endif
#ifdef __SSE4_2__
    "+sse4.2"
#endif
#ifdef __SSE4A__
    "+sse4a"
#endif
#ifdef __POPCNT__
    "+popcnt"
#endif
#ifdef __LZCNT__
    "+lzcnt"
#endif
#ifdef __LAHF_SAHF__
    "+sahf"
#endif
#ifdef __MOVBE__
    "+movbe"
#endif
#ifdef __GCC_HAVE_SYNC_COMPARE_AND_SWAP_16
    "+cx16"
#endif
#ifdef __PCLMUL__
    "+pclmul"
#endif
#ifdef __AES__
    "+aes"
#endif
#ifdef __SHA__
    "+sha"
#endif
#ifdef __GFNI__
    "+gfni"
#endif
#ifdef __VAES__
    "+vaes"
#endif
#ifdef __VPCLMULQDQ__
    "+vpclmulqdq"
#endif
#ifdef __RDRND__
    "+rdrnd"
#endif
#ifdef __RDSEED__
    "+rdseed"
#endif
#ifdef __ADX__
    "+adx"
#endif
#ifdef __PRFCHW__
    "+prfchw"
#endif
#ifdef __RDPID__
    "+rdpid"
#endif
#ifdef __XSAVE__
    "+xsave"
#endif
#ifdef __XSAVEOPT__
    "+xsaveopt"
#endif
#ifdef __XSAVEC__
    "+xsavec"
#endif
#ifdef __XSAVES__
    "+xsaves"
#endif
#ifdef __CLFLUSHOPT__
    "+clflushopt"
#endif
#ifdef __CLWB__
    "+clwb"
#endif
#ifdef __CLZERO__
    "+clzero"
#endif
#ifdef __BMI__
    "+bmi"
#endif
#ifdef __BMI2__
    "+bmi2"
#endif
#ifdef __AVX__
    "+avx"
#endif
#ifdef __AVX2__
    "+avx2"
#endif
#ifdef __FMA__
    "+fma"
#endif
#ifdef __F16C__
    "+f16c"
#endif
#ifdef __FMA4__
    "+fma4"
#endif
#ifdef __XOP__
    "+xop"
#endif
#ifdef __AVXVNNI__
    "+avxvnni"
#endif
#ifdef __AVX512F__
    "+avx512f"
#endif
#ifdef __AVX512CD__
    "+avx512cd"
#endif
#ifdef __AVX512DQ__
    "+avx512dq"
#endif
#ifdef __AVX512BW__
    "+avx512bw"
#endif
#ifdef __AVX512VL__
    "+avx512vl"
#endif
#ifdef __AVX512IFMA__
    "+avx512ifma"
#endif
#ifdef __AVX512VBMI__
    "+avx512vbmi"
#endif
#ifdef __AVX512VBMI2__
    "+avx512vbmi2"
#endif
#ifdef __AVX512VNNI__
    "+avx512vnni"
#endif
#ifdef __AVX512BITALG__
    "+avx512bitalg"
#endif
#ifdef __AVX512VPOPCNTDQ__
    "+avx512vpopcntdq"
#endif
#ifdef __AVX512BF16__
    "+avx512bf16"
#endif
#ifdef __AVX512VP2INTERSECT__
    "+avx512vp2intersect"
#endif
#ifdef __AVX512FP16__
    "+avx512fp16"
#endif
#ifdef __AVX512ER__
    "+avx512er"
#endif
#ifdef __AVX512PF__
    "+avx512pf"
#endif
#ifdef __AVX5124VNNIW__
    "+avx5124vnniw"
#endif
#ifdef __AVX5124FMAPS__
    "+avx5124fmaps"
#endif
#ifdef __AMX_TILE__
    "+amx-tile"
#endif
#ifdef __AMX_INT8__
    "+amx-int8"
#endif
#ifdef __AMX_BF16__
    "+amx-bf16"
#endif
    ;
