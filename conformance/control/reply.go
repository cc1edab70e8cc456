package control

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// Reply is the one JSON line an IUT answers each request with. OK false
// means the request failed and Error says why; the other fields belong to
// the commands that fill them.
type Reply struct {
	OK          bool              `json:"ok"`
	Error       string            `json:"error,omitempty"`
	Addr        string            `json:"addr,omitempty"` // listen: ip:port the tester sends to
	Conn        uint64            `json:"conn,omitempty"` // accept: 1, 2, … in accept order
	ID          uint64            `json:"id,omitempty"`   // post-recv, send: operation id for completions
	Completions []Completion      `json:"completions,omitempty"`
	Counters    map[string]uint64 `json:"counters,omitempty"`
}

// Completion is one finished operation, reported once by completions.
type Completion struct {
	ID    uint64   `json:"id"`
	Op    string   `json:"op"` // "recv" or "send"
	Flow  uint32   `json:"flow"`
	Sizes []int    `json:"sizes,omitempty"` // recv: bytes received per buffer; send: [length]
	Bufs  []string `json:"bufs,omitempty"`  // recv: every buffer in full, hex
	Error string   `json:"error,omitempty"` // non-empty when the operation failed
}

// Op values of a Completion.
const (
	OpRecv = "recv"
	OpSend = "send"
)

// Format encodes r as one line (no newline).
func (r Reply) Format() []byte {
	b, err := json.Marshal(r)
	if err != nil { // only unsupported types fail, and Reply has none
		panic(err)
	}
	return b
}

// ParseReply decodes one reply line.
func ParseReply(line []byte) (Reply, error) {
	var r Reply
	if err := json.Unmarshal(line, &r); err != nil {
		return r, fmt.Errorf("control: reply %.80q is not a JSON object: %v", line, err)
	}
	if !r.OK && r.Error == "" {
		return r, fmt.Errorf("control: reply %.80q: ok false without error", line)
	}
	for _, c := range r.Completions {
		if c.Op != OpRecv && c.Op != OpSend {
			return r, fmt.Errorf("control: completion %d: op %q, want recv or send", c.ID, c.Op)
		}
		for i, n := range c.Sizes {
			if n < 0 {
				return r, fmt.Errorf("control: completion %d: sizes[%d] is %d, want a byte count", c.ID, i, n)
			}
		}
		for i, b := range c.Bufs {
			if _, err := hex.DecodeString(b); err != nil {
				return r, fmt.Errorf("control: completion %d: bufs[%d] is not hex: %v", c.ID, i, err)
			}
		}
	}
	return r, nil
}

// Fail is the reply to a failed request.
func Fail(err error) Reply { return Reply{Error: err.Error()} }
