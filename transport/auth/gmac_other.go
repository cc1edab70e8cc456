//go:build !amd64

package auth

// useVPCLMUL is false: no vector GHASH on this architecture.
const useVPCLMUL = false

// ghashBlocks folds every 16-byte block of p into acc (see gmac).
func ghashBlocks(acc *[2]uint64, pow *[32][2]uint64, p []byte) {
	ghashGeneric(acc, pow, p)
}
