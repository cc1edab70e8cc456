package transport

import (
	"math"
	"testing"

	"github.com/metaroce/metaroce/transport/cc"
	"github.com/metaroce/metaroce/transport/wire"
	"github.com/stretchr/testify/require"
)

// TestPaceSpan: the time a packet or burst is charged is bytes/rate in
// nanoseconds, never negative, never wrapped, and at most maxPaceGap,
// for every rate the controller can return: 0 (unpaced), the least hint
// and below, the fastest links, and the values of 2⁶³ and up that a
// signed conversion would turn negative.
func TestPaceSpan(t *testing.T) {
	cases := []struct {
		name        string
		bytes, rate uint64
		want        Time
	}{
		{"unpaced", 4136, 0, 0},
		{"nothing to send", 0, 125, 0},
		{"segment at 100 Gb/s", 4136, 12_500_000_000, 330},
		{"100 bytes at the least hint", 100, 125, 800 * Millisecond},
		{"exactly the cap", 125, 125, maxPaceGap},
		{"segment at the least hint", 4136, 125, maxPaceGap},
		{"segment at 1 B/s", 4136, 1, maxPaceGap},
		{"largest count at 1 B/s", math.MaxUint64, 1, maxPaceGap},
		{"largest count at the largest rate", math.MaxUint64, math.MaxUint64, Second},
		{"burst at 2^63 B/s", 64 << 10, 1 << 63, 0},
		{"burst at 2^64-1 B/s", 64 << 10, math.MaxUint64, 0},
	}
	for _, tc := range cases {
		got := paceSpan(tc.bytes, tc.rate)
		require.Equal(t, tc.want, got, tc.name)
		require.GreaterOrEqual(t, got, Time(0), tc.name)
		require.LessOrEqual(t, got, maxPaceGap, tc.name)
	}
}

// TestRepace: once the pacing rate rises to repaceRise times the one the
// last paced packet was charged at or more, a gap of repaceMinGap or more
// in force is cut to what
// the new rate implies for that packet (bytes/rate, or 9/8 of it, the top
// of the jitter's range, under a hint), counted from the same start; a
// smaller rise or gap, a rate that stays or falls, or no packet paced yet,
// changes nothing, and the pacing time never moves later.
func TestRepace(t *testing.T) {
	const from = 5 * Second // virtual time the last paced packet's gap starts at
	cases := []struct {
		name     string
		hinted   bool   // the rate follows a hint (jittered gaps)
		bytes    uint64 // the last paced packet
		was, now uint64 // the rate it was charged at, the rate now (bytes/s)
		gap      Time   // the gap it was charged
		want     Time   // the gap in force afterwards
	}{
		{"least hint, then no hint and a 100 Gb/s line", false, 4136, 125, 12_500_000_000, 9 * maxPaceGap / 8, 330},
		{"least hint, then 100 Gb/s", true, 4136, 125, 12_500_000_000, 9 * maxPaceGap / 8, 330 + 330/8},
		{"a 1% rise keeps the gap", true, 4136, 1_000_000_000, 1_010_000_000, 4600, 4600},
		{"a 10% rise keeps it", true, 4136, 1_000_000_000, 1_100_000_000, 4600, 4600},
		{"a doubling keeps a micro-second gap", true, 4136, 1_000_000_000, 2_000_000_000, 4600, 4600},
		{"a rise just under repaceRise keeps a long gap", false, 4136, 4_000_000, repaceRise*4_000_000 - 1, 1_034_000, 1_034_000},
		{"a rise of repaceRise cuts a long gap", false, 4136, 4_000_000, repaceRise * 4_000_000, 1_034_000, 517_000},
		{"a gap just under repaceMinGap stays", false, 4136, 4_137_000, 100 * 4_137_000, repaceMinGap - 1, repaceMinGap - 1},
		{"rate unchanged", true, 4136, 1_000_000_000, 1_000_000_000, 4600, 4600},
		{"rate fell", false, 4136, 1_000_000_000, 125, 4136, 4136},
		{"rate fell to unpaced", false, 4136, 1_000_000_000, 0, 4136, 4136},
		{"rate rose to 2^64-1", false, 4136, 125, math.MaxUint64, maxPaceGap, 0},
		{"rate rose from 2^63", false, 4136, 1 << 63, math.MaxUint64, 0, 0},
	}
	for _, tc := range cases {
		_, c := testConn(t, Config{}, 1500)
		if tc.hinted {
			c.cc.OnRateHint(int64(from), tc.now)
		}
		require.Equal(t, tc.hinted, c.cc.Hinted(), tc.name)
		c.paceFrom, c.paceBytes, c.paceRate = from, tc.bytes, tc.was
		c.paceNext = from + tc.gap
		c.repace(tc.now)
		require.Equal(t, from+tc.want, c.paceNext, tc.name)
		require.LessOrEqual(t, c.paceNext, from+tc.gap, "%s: the pacing time moved later", tc.name)
		if tc.now/repaceRise >= tc.was && tc.gap >= repaceMinGap {
			most := paceSpan(tc.bytes, tc.now)
			if tc.hinted {
				most += most / 8
			}
			require.LessOrEqual(t, c.paceNext-from, most, "%s: the gap in force exceeds what the rate implies", tc.name)
		}
	}

	// Nothing paced yet: no gap to cut.
	_, c := testConn(t, Config{}, 1500)
	c.repace(12_500_000_000)
	require.Zero(t, c.paceNext)
}

// TestPaceBase: a paced packet's gap counts from the time it was due, or
// no further back than the burst credit (under a hint one packet, with no
// RTT sample yet); the first paced packet earns none. With a catch-up span
// (a software driver's), a sender backlogged since its packet was due
// makes up the lateness of this turn, up to the span and the catch-up
// bytes; one found idle since then gets the burst only, so that senders
// starting together stay within it.
func TestPaceBase(t *testing.T) {
	const now = 10 * Millisecond
	const rate = 1_250_000_000 // bytes/s, a 10 Gb/s hint
	const onePacket = -1       // wantDelta: the controller's burst, one packet here
	for _, tc := range []struct {
		name      string
		span      Time // CatchUpTime, 0: none
		most      int  // CatchUpBytes
		held      bool // backlogged since the packet was due (else found idle after it)
		paceNext  Time // when the packet was due, 0: none paced yet
		wantDelta Time // now − base
	}{
		{"first paced packet", 100 * Microsecond, 256 << 10, true, 0, 0},
		{"due in the future", 100 * Microsecond, 256 << 10, true, now + Microsecond, -Microsecond},
		{"no catch-up: one packet's credit", 0, 0, true, now - 50*Microsecond, onePacket},
		{"held, late by 50 µs: made up", 100 * Microsecond, 256 << 10, true, now - 50*Microsecond, 50 * Microsecond},
		{"held, late by 150 µs: the span", 100 * Microsecond, 256 << 10, true, now - 150*Microsecond, 100 * Microsecond},
		{"held, late by 90 µs, 64 KiB cap", 100 * Microsecond, 64 << 10, true, now - 90*Microsecond, paceSpan(64<<10, rate)},
		{"idle since it was due: the burst only", 100 * Microsecond, 256 << 10, false, now - 50*Microsecond, onePacket},
		{"held, late by half a micro-second", 100 * Microsecond, 256 << 10, true, now - 500, 500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, c := testConn(t, Config{CC: cc.Config{CatchUpTime: int64(tc.span), CatchUpBytes: tc.most}}, 1500)
			c.cc.OnRateHint(int64(now)-1, rate)
			require.True(t, c.cc.Hinted())
			c.paceNext = tc.paceNext
			c.backlogFrom = now - Second // backlogged long before
			if !tc.held {
				c.backlogFrom = tc.paceNext + 1
			}
			want := tc.wantDelta
			if want == onePacket {
				require.Equal(t, c.ep.cfg.CC.MSS, c.cc.Burst(), "one packet before an RTT sample")
				want = paceSpan(uint64(c.cc.Burst()), rate)
			}
			require.Equal(t, want, now-c.paceBase(now, rate))
		})
	}
}

// TestBacklogFrom: the backlog's start is the first attempt to send that
// finds something queued after one that found nothing, so that a sender
// that finished a message, went idle and later queues another is not
// taken for one held all along: its first packet after the idle spell gets
// the burst only (124,500 bytes once left back to back there).
func TestBacklogFrom(t *testing.T) {
	const rate = 1_250_000_000
	_, c := testConn(t, Config{CC: cc.Config{CatchUpTime: int64(100 * Microsecond), CatchUpBytes: 256 << 10}}, 1500)
	c.cc.OnRateHint(0, rate)
	buf := make([]byte, 1<<16)
	t0 := 5 * Millisecond
	// The last packet left at t0, its gap ending 2 µs later.
	c.paceFrom, c.paceBytes, c.paceRate, c.paceNext = t0, 1500, rate, t0+2*Microsecond
	_, ok := c.pollSequenced(t0, buf)
	require.False(t, ok)
	require.Zero(t, c.backlogFrom, "nothing queued: no backlog")

	t1 := t0 + Millisecond           // idle, then something is queued
	c.cc.OnRateHint(int64(t1), rate) // a fresh hint: paced at rate
	c.ctrlQ = append(c.ctrlQ, &ctrlPkt{op: wire.OpRecvReady})
	_, ok = c.pollSequenced(t1, buf)
	require.True(t, ok, "the RECV_READY leaves")
	require.Equal(t, t1, c.backlogFrom, "the backlog starts when first seen")
	require.Equal(t, uint64(rate), c.paceRate, "paced at the hint")
	require.Equal(t, paceSpan(uint64(c.cc.Burst()), rate), t1-c.paceFrom, "after an idle spell, the burst only")

	// Backlogged since t1: a packet due 2 µs after t1 (the pacer held it)
	// and sent 50 µs after that makes up its lateness.
	c.ctrlQ = append(c.ctrlQ, &ctrlPkt{op: wire.OpRecvReady})
	due := t1 + 2*Microsecond
	c.paceFrom, c.paceNext = t1, due
	t2 := due + 50*Microsecond
	_, ok = c.pollSequenced(t2, buf)
	require.True(t, ok)
	require.Equal(t, t1, c.backlogFrom)
	require.Equal(t, due, c.paceFrom, "backlogged: its gap counts from when it was due")
}
