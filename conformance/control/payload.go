package control

// Payload returns n bytes generated from seed, the content a LEN:SEED send
// argument stands for: the little-endian bytes of successive SplitMix64
// outputs (state += 0x9e3779b97f4a7c15, then the usual two multiply-xorshift
// rounds). Both sides of the contract compute it, so a large message need not
// cross the control pipe.
func Payload(n int, seed uint64) []byte {
	b := make([]byte, n)
	s := seed
	for i := 0; i < n; i += 8 {
		s += 0x9e3779b97f4a7c15
		z := s
		z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		z ^= z >> 31
		for k := 0; k < 8 && i+k < n; k++ {
			b[i+k] = byte(z >> (8 * k))
		}
	}
	return b
}
