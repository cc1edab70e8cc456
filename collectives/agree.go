package collectives

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// The settings on which every rank of a communicator must agree travel in
// the rendezvous, ahead of each rank's endpoint description: with
// different channel counts, chunk sizes or group sizes the ranks' plans
// post different messages, and the transfers wait for peers that never
// send them (over TCP, connection setup itself waits for the sockets of
// the channels only one side has, and its error says a rank is "still
// missing"). New compares every rank's settings with rank 0's once the
// rendezvous is over and fails at once, on every rank alike, with an
// error that names the ranks and their values.

// agreedSetting is one setting that must match: its key in the
// rendezvous, the Config field that sets it, and its value in a
// configuration with its defaults.
type agreedSetting struct {
	key, field string
	value      func(c Config) string
}

var agreedSettings = []agreedSetting{
	{"transport", "Config.Transport", func(c Config) string { return c.Transport }},
	{"channels", "Config.Channels", func(c Config) string { return strconv.Itoa(c.Channels) }},
	{"chunk_bytes", "Config.ChunkBytes", func(c Config) string { return strconv.FormatInt(c.ChunkBytes, 10) }},
	{"group_size", "Config.GroupSize", func(c Config) string { return strconv.Itoa(c.GroupSize) }},
}

// settingsBlob prefixes the endpoint description blob with c's agreed
// settings: one line of key=value pairs, then the description.
func settingsBlob(c Config, blob []byte) []byte {
	var s strings.Builder
	for i, a := range agreedSettings {
		if i > 0 {
			s.WriteByte(' ')
		}
		s.WriteString(a.key + "=" + a.value(c))
	}
	s.WriteByte('\n')
	return append([]byte(s.String()), blob...)
}

// splitSettings undoes settingsBlob: the settings by key, and the endpoint
// description.
func splitSettings(b []byte) (map[string]string, []byte, bool) {
	line, rest, ok := bytes.Cut(b, []byte("\n"))
	if !ok {
		return nil, nil, false
	}
	m := map[string]string{}
	for _, kv := range strings.Fields(string(line)) {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m, rest, true
}

// SettingsError is New's error on every rank when the ranks' Configs
// differ in a setting that must be the same everywhere (after defaults).
// Field names it ("Config.Channels"), so that a program that sets it from
// a flag can name the flag.
type SettingsError struct {
	Field string
	msg   string
}

func (e *SettingsError) Error() string { return e.msg }

// agree checks every rank's settings (blobs from the rendezvous, by rank)
// against rank 0's and returns the endpoint descriptions. Every rank has
// the same blobs and so returns the same error: the first setting on
// which some rank differs from rank 0, with rank 0's value and each
// differing rank's (the first eight).
func agree(blobs [][]byte) ([][]byte, error) {
	sets := make([]map[string]string, len(blobs))
	eps := make([][]byte, len(blobs))
	for r, b := range blobs {
		var ok bool
		if sets[r], eps[r], ok = splitSettings(b); !ok {
			return nil, fmt.Errorf("collectives: rank %d sent no settings in the rendezvous: it runs another version of metaroce", r)
		}
	}
	for _, a := range agreedSettings {
		want := sets[0][a.key]
		var diff []string
		n := 0
		for r := 1; r < len(sets); r++ {
			if v := sets[r][a.key]; v != want {
				if n < 8 {
					diff = append(diff, fmt.Sprintf("rank %d has %s", r, v))
				}
				n++
			}
		}
		if n == 0 {
			continue
		}
		more := ""
		if n > len(diff) {
			more = fmt.Sprintf(" and %d more ranks differ", n-len(diff))
		}
		return nil, &SettingsError{Field: a.field, msg: fmt.Sprintf("collectives: the ranks disagree on %s (%s), which must be the same on every rank: rank 0 has %s, %s%s",
			a.key, a.field, want, strings.Join(diff, ", "), more)}
	}
	return eps, nil
}
