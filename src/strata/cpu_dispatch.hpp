// Run-time choice of the CPU code for the hot loops (private to libstrata).
//
// Strata's binaries run on any x86-64: the build adds no -m flags (CMakeLists.txt). The loops that lose most
// without AVX2 and FMA (the element-wise activations, pooling, LRN, softmax, the allreduce's sum and the solvers'
// update sweeps; docs/benchmarks.md has the figures) are marked STRATA_HOT_KERNEL: GCC compiles each twice, for
// x86-64-v3 (AVX2, FMA, BMI2: Haswell, Zen and newer) and for the baseline, and the dynamic loader picks one from
// cpuid once, when libstrata loads (an ifunc, so a call costs what any call into the library costs). OpenMP
// regions inside a marked function are cloned with it.
//
// The attribute goes on free functions and non-virtual members; GCC does not clone virtual functions, so a
// layer's Forward_cpu calls a marked kernel. Where the whole build already targets AVX2 (STRATA_NATIVE on such a
// machine) there is one version, as there is with other compilers and architectures.
//
// The two versions may round differently (wider vector sums, fused multiply-adds): results are reproducible
// on one machine, not bit-identical across machines of different levels.
#pragma once

// -DSTRATA_HOT_KERNEL= on the command line builds the baseline copy alone (to test or time what a machine without
// AVX2 runs).
#ifndef STRATA_HOT_KERNEL
#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__) && defined(__x86_64__) && \
    defined(__linux__) && !defined(__AVX2__)
#define STRATA_HOT_KERNEL __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define STRATA_HOT_KERNEL
#endif
#endif
