// Package term tells the commands whether an output is a terminal, where
// they draw progress lines with carriage returns that logs, pipes and files
// must never see.
package term

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// IsTerminal reports whether w is a terminal: an *os.File on which a TCGETS
// ioctl succeeds. Pipes, regular files and in-memory writers are not.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
