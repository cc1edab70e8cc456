package auth

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
)

// Labels of the key derivation (docs at package level). Changing any of
// them changes every key, so they are part of the protocol.
const (
	kdfSalt      = "metaroce v1"
	infoHand     = "metaroce v1 handshake"
	infoConn     = "metaroce v1 conn"
	connKeyBytes = 16 // AES-128
	handKeyBytes = 32 // HMAC-SHA256
)

// Directions of a connection, as encoded in the key derivation.
const (
	dirInitToResp byte = 1
	dirRespToInit byte = 2
)

// tuple names a connection by the ids and tokens both sides announced.
type tuple struct {
	iConn uint32
	iTok  uint64
	rConn uint32
	rTok  uint64
}

// master is the HKDF pseudorandom key extracted from the shared secret.
func master(secret []byte) ([]byte, error) {
	return hkdf.Extract(sha256.New, secret, []byte(kdfSalt))
}

// handshakeKey derives the HMAC key of handshake packets.
func handshakeKey(prk []byte) ([]byte, error) {
	return hkdf.Expand(sha256.New, prk, infoHand, handKeyBytes)
}

// connKeys derives the AES-128 key of one direction of connection t and
// returns what seals with it: the standard library's AES-GCM, and, for
// authentication-only packets on CPUs with vector carry-less multiply, the
// faster tag-only gmac (nil elsewhere).
func connKeys(prk []byte, t tuple, dir byte) (cipher.AEAD, *gmac, error) {
	info := make([]byte, 0, len(infoConn)+1+24)
	info = append(info, infoConn...)
	info = append(info, dir)
	info = binary.BigEndian.AppendUint32(info, t.iConn)
	info = binary.BigEndian.AppendUint64(info, t.iTok)
	info = binary.BigEndian.AppendUint32(info, t.rConn)
	info = binary.BigEndian.AppendUint64(info, t.rTok)
	k, err := hkdf.Expand(sha256.New, prk, string(info), connKeyBytes)
	if err != nil {
		return nil, nil, err
	}
	blk, err := aes.NewCipher(k)
	if err != nil {
		return nil, nil, err
	}
	a, err := cipher.NewGCM(blk)
	if err != nil {
		return nil, nil, err
	}
	var g *gmac
	if useVPCLMUL {
		g = newGMAC(blk)
	}
	return a, g, nil
}
