// Package procstat reads what the benchmarks sample of a running process
// from /proc (Linux only).
package procstat

import (
	"os"
	"strconv"
	"strings"
)

// RSSKiB returns the resident set size (VmRSS in /proc/PID/status) of pid
// in KiB, or -1 when it cannot be read.
func RSSKiB(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return -1
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				if v, err := strconv.ParseInt(f[0], 10, 64); err == nil {
					return v
				}
			}
		}
	}
	return -1
}
