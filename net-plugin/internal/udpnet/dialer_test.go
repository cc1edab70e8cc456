package udpnet

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/metaroce/metaroce/net-plugin/internal/backend"
	"github.com/metaroce/metaroce/net-plugin/internal/backend/backendtest"
)

// TestStepAbortRace runs Step and Abort of one finished dialer at the same
// time, as core.Connect (NCCL's connecting thread) and core.Finalize
// (another thread) can: exactly one of them owns the result, Step's answer
// says which, and under -race the two share no unguarded state.
func TestStepAbortRace(t *testing.T) {
	for range 50 {
		done := make(chan struct{})
		close(done)
		dl := &dialer{cancel: func() {}, done: done, err: errors.New("no connection")}
		var wg sync.WaitGroup
		var err error
		wg.Add(2)
		go func() { defer wg.Done(); _, err = dl.Step() }()
		go func() { defer wg.Done(); dl.Abort() }()
		wg.Wait()
		if err == nil {
			t.Fatal("Step of a failed dialer returned no error")
		}
		if dl.aborted != errors.Is(err, backend.ErrInternal) {
			t.Fatalf("aborted=%v but Step said %v", dl.aborted, err)
		}
	}
}

// withSecret returns a loopback backend whose packets are authenticated
// with secret; timeout bounds its handshakes.
func withSecret(t *testing.T, seed uint64, secret string, timeout time.Duration) *Backend {
	t.Helper()
	b, err := New(Config{IfNames: "=lo", Timeout: timeout, PortsPerPlane: 4, Seed: seed, Secret: []byte(secret)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// TestSecretReachesDatapath: Config.Secret keys the datapath's packet
// authentication: two backends with the same secret connect and move
// data; with different secrets the handshake never completes.
func TestSecretReachesDatapath(t *testing.T) {
	const s1, s2 = "secret-of-job-one-0123", "secret-of-job-two-4567"
	sc, rc := connect(t, withSecret(t, 21, s1, 5*time.Second), withSecret(t, 22, s1, 5*time.Second))
	buf := make([]byte, 5)
	r, err := rc.Irecv([][]byte{buf}, []int32{1})
	require.NoError(t, err)
	s, err := sc.Isend([]byte("hello"), 1)
	require.NoError(t, err)
	backendtest.Wait(t, s, nil)
	backendtest.Wait(t, r, nil)
	require.Equal(t, "hello", string(buf))

	a, b := withSecret(t, 23, s1, 500*time.Millisecond), withSecret(t, 24, s2, 500*time.Millisecond)
	l, err := b.Listen(0)
	require.NoError(t, err)
	defer l.Close()
	d, err := a.Dial(0, l.Handle())
	require.NoError(t, err)
	defer d.Abort()
	backendtest.PollUntil(t, "failed connect", func() bool {
		var sc backend.SendConn
		sc, err = d.Step()
		require.Nil(t, sc, "connected across different secrets")
		return err != nil
	})
	// Whichever comes first, the plugin's deadline or the handshake's,
	// the error names the peer and the secret, the likely cause: the
	// listener drops the HELLOs without answering, so nothing else here
	// tells a mismatch from a dead peer.
	require.ErrorContains(t, err, "udpnet: connecting to peer")
	msg := err.Error()
	require.Contains(t, msg, "METAROCE_SECRET", "the error does not say that the secrets may differ")
}
