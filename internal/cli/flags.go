// Package cli parses the commands' flags alike: -h prints the usage on
// stdout, and a bad flag or value gets one line that names it as typed and
// says what it takes.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// ParseFlags parses args into fs, whose Usage writes to fs.Output().
// -h/--help was asked for, so its usage goes to stdout (where `mrbench -h |
// less` finds it) and the result is flag.ErrHelp. A bad flag or value gets
// one line that names it and where the flags are listed, rather than the
// error lost above the whole usage; the caller prints that line with its
// own prefix. name is the command as the user typed it ("mrbench",
// "mrbench sim").
func ParseFlags(fs *flag.FlagSet, args []string, stdout io.Writer, name string) error {
	full := fs.Usage
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	fs.Usage = full
	if errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(stdout)
		full()
		return err
	}
	if err != nil {
		const undefined = "flag provided but not defined: -"
		const needsValue = "flag needs an argument: -"
		msg := err.Error()
		if strings.HasPrefix(msg, undefined) {
			return fmt.Errorf("unknown flag %s (%s -h lists the flags)", asTyped(args, msg[len(undefined):]), name)
		}
		if n, ok := strings.CutPrefix(msg, needsValue); ok {
			return fmt.Errorf("flag %s needs a value (%s -h lists the flags)", asTyped(args, n), name)
		}
		if v, n, why, ok := invalidValue(msg); ok {
			// Name the flag as typed, and say what it takes where the
			// flag package says only "parse error".
			if why == "parse error" {
				if want := wantOf(fs.Lookup(n)); want != "" {
					why = want
				}
			}
			msg = fmt.Sprintf("invalid value %s for flag %s: %s", v, asTyped(args, n), why)
		}
		return fmt.Errorf("%s (%s -h lists the flags)", msg, name)
	}
	return nil
}

// invalidValue takes apart the flag package's error for a value that a
// flag refused: `invalid value "x" for flag -name: why`, or for a boolean
// flag `invalid boolean value "x" for -name: why`. It returns the value as
// quoted there, the flag's name and the reason.
func invalidValue(msg string) (quoted, name, why string, ok bool) {
	rest, ok := strings.CutPrefix(msg, "invalid value ")
	if !ok {
		if rest, ok = strings.CutPrefix(msg, "invalid boolean value "); !ok {
			return "", "", "", false
		}
	}
	// The value is quoted (%q), so it is read whole even where it holds
	// " for flag -" or ": " itself.
	quoted, err := strconv.QuotedPrefix(rest)
	if err != nil {
		return "", "", "", false
	}
	rest = rest[len(quoted):]
	if r, ok := strings.CutPrefix(rest, " for flag -"); ok {
		rest = r
	} else if rest, ok = strings.CutPrefix(rest, " for -"); !ok {
		return "", "", "", false
	}
	name, why, ok = strings.Cut(rest, ": ")
	return quoted, name, why, ok
}

// wantOf says what a flag of f's type takes, for the flag package's "parse
// error", which names no type; "" for a flag whose own Set explains its
// errors (sizes, durations) or that is not defined.
func wantOf(f *flag.Flag) string {
	if f == nil {
		return ""
	}
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return ""
	}
	switch g.Get().(type) {
	case bool:
		return "want true or false (or the flag alone, for true)"
	case int, int64:
		return "want a whole number"
	case uint, uint64:
		return "want a whole number, 0 or more"
	case float64:
		return "want a number"
	}
	return ""
}

// asTyped returns the argument that spelled flag n ("--bogus=1" for n
// "bogus"), as the flag package names every flag with one dash.
func asTyped(args []string, n string) string {
	for _, a := range args {
		if a == "--" {
			break
		}
		b, _, _ := strings.Cut(a, "=")
		if b == "-"+n || b == "--"+n {
			return b
		}
	}
	return "-" + n
}
