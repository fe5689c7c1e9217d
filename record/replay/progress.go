package replay

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// Bar returns a Progress function that redraws one line on w: a bar, the
// count, and the differences and errors so far; the last call (done ==
// total) ends the line.
func Bar(w io.Writer) func(done, total int, s *Summary) {
	const width = 30
	last := -1
	return func(done, total int, s *Summary) {
		if done == last {
			return
		}
		last = done
		filled := width
		if total > 0 {
			filled = min(width, done*width/total)
		}
		bar := strings.Repeat("=", filled) + strings.Repeat(" ", width-filled)
		if filled < width && filled > 0 {
			bar = bar[:filled-1] + ">" + bar[filled:]
		}
		fmt.Fprintf(w, "\r[%s] %d/%d  %d differing, %d errors ", bar, done, total, s.Differing, s.Errors)
		if done >= total {
			fmt.Fprintln(w)
		}
	}
}

// IsTerminal reports whether f is a terminal a progress bar can redraw
// (not a file, a pipe or a dumb terminal).
func IsTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0 && os.Getenv("TERM") != "dumb"
}
