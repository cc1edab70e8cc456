package reduce

import (
	"strings"

	"github.com/klauspost/cpuid/v2"
)

// useAVX2 selects the AVX2 assembly sums; it is fixed at start-up from cpuid and
// only read afterwards (tests flip it to compare both paths).
var useAVX2 = haveAVX2Asm && cpuid.CPU.Supports(cpuid.AVX, cpuid.AVX2)

// useF16C additionally selects the binary16 kernels, which convert with the
// F16C instructions; like useAVX2 it is fixed at start-up.
var useF16C = useAVX2 && cpuid.CPU.Supports(cpuid.F16C)

// featureList is the order in which Features reports CPU features.
var featureList = []struct {
	id   cpuid.FeatureID
	name string
}{
	{cpuid.SSE2, "sse2"}, {cpuid.SSE4, "sse4.1"}, {cpuid.AVX, "avx"}, {cpuid.AVX2, "avx2"},
	{cpuid.FMA3, "fma"}, {cpuid.F16C, "f16c"}, {cpuid.AVX512F, "avx512f"},
	{cpuid.AVX512BW, "avx512bw"}, {cpuid.AVX512BF16, "avx512bf16"}, {cpuid.AVX512FP16, "avx512fp16"},
	{cpuid.ASIMD, "asimd"}, {cpuid.ASIMDHP, "asimdhp"}, {cpuid.SVE, "sve"},
}

// Features returns the CPU brand and the SIMD features that matter for the
// reduction kernels, space-separated, followed by the kernel set in use, for
// example "AMD EPYC 7B13 | sse2 sse4.1 avx avx2 fma f16c | kernels=avx2".
// mrbench prints it in its header so that figures can be compared fairly.
func Features() string {
	var names []string
	for _, f := range featureList {
		if cpuid.CPU.Supports(f.id) {
			names = append(names, f.name)
		}
	}
	return cpuid.CPU.BrandName + " | " + strings.Join(names, " ") + " | kernels=" + KernelSet()
}

// KernelSet names the kernels Reduce uses on this machine: "avx2+f16c" or
// "avx2" when the assembly kernels are active (F16C adds the binary16 ones),
// "go" for the portable unrolled loops.
func KernelSet() string {
	switch {
	case useF16C:
		return "avx2+f16c"
	case useAVX2:
		return "avx2"
	}
	return "go"
}
