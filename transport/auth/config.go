package auth

import (
	"errors"
	"fmt"
	"os"
)

// EnvSecret is the environment variable that holds the job's shared secret.
const EnvSecret = "METAROCE_SECRET"

// MinSecretLen is the shortest secret accepted, bytes: 128 bits of key
// material when the secret is random.
const MinSecretLen = 16

// Overhead is the number of bytes Seal adds to a packet: an 8-byte sequence
// number and a 16-byte tag. A driver that seals must announce a MaxDatagram
// Overhead bytes below what its sockets accept.
const Overhead = seqLen + tagLen

const (
	seqLen = 8
	tagLen = 16
	// DefaultReplayWindow is the receive window of sequence numbers per key.
	DefaultReplayWindow = 4096
	// DefaultMaxConns bounds the connections a Table holds keys for; it
	// matches the core's default MaxConns.
	DefaultMaxConns = 4096
)

// ErrNoSecret is returned by SecretFromEnv when METAROCE_SECRET is unset.
var ErrNoSecret = errors.New("auth: " + EnvSecret + " is not set")

// Config parameterises a Table.
type Config struct {
	// Secret is the job's shared secret, at least MinSecretLen bytes; every
	// endpoint of the job must hold the same one.
	Secret []byte
	// Encrypt encrypts everything after the 24-byte header; otherwise the
	// whole packet is authenticated and travels in clear.
	Encrypt bool
	// ReplayWindow is the number of sequence numbers each receive key
	// remembers, a multiple of 64 in 64..65536. Default 4096.
	ReplayWindow int
	// MaxConns bounds the connections with keys (pending handshakes
	// included). Default 4096.
	MaxConns int
}

// SecretFromEnv returns the secret in METAROCE_SECRET, ErrNoSecret when it
// is unset (authentication off), or an error when it is too short.
func SecretFromEnv() ([]byte, error) {
	return secretFrom(os.LookupEnv)
}

func secretFrom(get func(string) (string, bool)) ([]byte, error) {
	s, ok := get(EnvSecret)
	if !ok || s == "" {
		return nil, ErrNoSecret
	}
	if len(s) < MinSecretLen {
		return nil, fmt.Errorf("auth: %s has %d bytes, want at least %d; generate one with `head -c 32 /dev/urandom | base64` and give every rank the same value",
			EnvSecret, len(s), MinSecretLen)
	}
	return []byte(s), nil
}

func (c Config) withDefaults() (Config, error) {
	if len(c.Secret) < MinSecretLen {
		return c, fmt.Errorf("auth: secret of %d bytes, want at least %d", len(c.Secret), MinSecretLen)
	}
	if c.ReplayWindow == 0 {
		c.ReplayWindow = DefaultReplayWindow
	}
	if c.ReplayWindow < 64 || c.ReplayWindow > 65536 || c.ReplayWindow%64 != 0 {
		return c, fmt.Errorf("auth: replay window %d, want a multiple of 64 in 64..65536", c.ReplayWindow)
	}
	if c.MaxConns <= 0 {
		c.MaxConns = DefaultMaxConns
	}
	return c, nil
}
