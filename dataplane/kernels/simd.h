// STOKER_AVX2_CLONES before a function builds it twice, plain and for AVX2,
// and picks one at load time by the CPU (GCC's and clang's target_clones,
// resolved through an ifunc). For flat loops the compiler vectorises. The
// functions it marks use no fused multiply-add (AVX2 does not imply FMA), so
// both builds give the same bytes.
//
// Under the sanitizers it is empty: an ifunc resolver runs while the dynamic
// loader relocates the program, before the sanitizer runtime is up, and
// ThreadSanitizer's instrumented resolver crashes there. Those builds check
// the plain loop, which is the same source.
#ifndef STOKER_DATAPLANE_KERNELS_SIMD_H_
#define STOKER_DATAPLANE_KERNELS_SIMD_H_

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define STOKER_NO_CLONES 1
#endif
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer) || \
    __has_feature(undefined_behavior_sanitizer)
#define STOKER_NO_CLONES 1
#endif
#endif

#if defined(STOKER_NO_CLONES) || !defined(__x86_64__)
#define STOKER_AVX2_CLONES
#else
#define STOKER_AVX2_CLONES __attribute__((target_clones("avx2", "default")))
#endif

#endif  // STOKER_DATAPLANE_KERNELS_SIMD_H_
