package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// parseFlags parses args into fs, whose Usage writes to fs.Output().
// -h/--help was asked for, so its usage goes to stdout (where `mrbench -h |
// less` finds it) and the result is flag.ErrHelp. A bad flag or value gets
// one line that names it and where the flags are listed, rather than the
// error lost above the whole usage; the caller prints that line with its
// own prefix. name is the command as the user typed it ("mrbench",
// "mrbench sim").
func parseFlags(fs *flag.FlagSet, args []string, stdout io.Writer, name string) error {
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
		msg := err.Error()
		if strings.HasPrefix(msg, undefined) {
			return fmt.Errorf("unknown flag %s (%s -h lists the flags)", asTyped(args, msg[len(undefined):]), name)
		}
		// "invalid value "x" for flag -name: why": name the flag as typed.
		if _, rest, ok := strings.Cut(msg, " for flag -"); ok && strings.HasPrefix(msg, "invalid ") {
			if n, _, ok := strings.Cut(rest, ":"); ok {
				msg = strings.Replace(msg, " for flag -"+n+":", " for flag "+asTyped(args, n)+":", 1)
			}
		}
		return fmt.Errorf("%s (%s -h lists the flags)", msg, name)
	}
	return nil
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
