package auth

import "golang.org/x/sys/cpu"

// useVPCLMUL is true where ghashBlocks can run its 512-bit loop: AVX-512
// (F for the registers, BW for byte shuffles, VL for the 256-bit forms) and
// the vector carry-less multiply.
var useVPCLMUL = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL &&
	cpu.X86.HasAVX512VPCLMULQDQ && cpu.X86.HasPCLMULQDQ

// ghashAVX512 hashes n 16-byte blocks at p into acc; pow as in gmac.
//
//go:noescape
func ghashAVX512(acc *[2]uint64, pow *[32][2]uint64, p *byte, n int)

// ghashBlocks folds every 16-byte block of p (len(p) a multiple of 16)
// into acc: acc = (acc ⊕ block)·H, block by block.
func ghashBlocks(acc *[2]uint64, pow *[32][2]uint64, p []byte) {
	if len(p) < 16 {
		return
	}
	if useVPCLMUL {
		ghashAVX512(acc, pow, &p[0], len(p)/16)
		return
	}
	ghashGeneric(acc, pow, p)
}
