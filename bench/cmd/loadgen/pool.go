package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

// A latency file holds one run's answered requests: the count n, then n
// corrected and n service latencies in ns, each an int64 little-endian.
// make bench writes one per open-loop round (-latencies) and pools a
// target's rounds with -pool: a percentile over every request of the run,
// which a median of the rounds' percentiles is not (it passes over the
// rounds a stall fell in).

// writeLatencies writes r's answered requests to path.
func writeLatencies(path string, r *result) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<16)
	err = binary.Write(w, binary.LittleEndian, int64(len(r.corrected)))
	if err == nil {
		err = binary.Write(w, binary.LittleEndian, r.corrected)
	}
	if err == nil {
		err = binary.Write(w, binary.LittleEndian, r.service)
	}
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("latencies %s: %w", path, err)
	}
	return nil
}

// readLatencies appends a latency file's samples to corr and svc. The
// file's size must be what its count says, so that a damaged file is an
// error rather than an allocation of its garbage count.
func readLatencies(path string, corr, svc []int64) ([]int64, []int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return corr, svc, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return corr, svc, err
	}
	br := bufio.NewReaderSize(f, 1<<16)
	var n int64
	if err := binary.Read(br, binary.LittleEndian, &n); err != nil {
		return corr, svc, fmt.Errorf("%s: count: %w", path, err)
	}
	if n < 0 || n != (st.Size()-8)/16 || (st.Size()-8)%16 != 0 {
		return corr, svc, fmt.Errorf("%s: %d bytes do not hold the %d samples it counts", path, st.Size(), n)
	}
	// Read straight into the pooled slices' new tails.
	at := len(corr)
	corr, svc = slices.Grow(corr, int(n))[:at+int(n)], slices.Grow(svc, int(n))[:at+int(n)]
	if err := binary.Read(br, binary.LittleEndian, corr[at:]); err != nil {
		return corr[:at], svc[:at], fmt.Errorf("%s: corrected: %w", path, err)
	}
	if err := binary.Read(br, binary.LittleEndian, svc[at:]); err != nil {
		return corr[:at], svc[:at], fmt.Errorf("%s: service: %w", path, err)
	}
	return corr, svc, nil
}

// pool prints one POOLED line over the latency files' samples together.
func pool(w io.Writer, label string, paths []string) error {
	if len(paths) == 0 {
		return errors.New("-pool needs latency files")
	}
	var corr, svc []int64
	for _, p := range paths {
		var err error
		if corr, svc, err = readLatencies(p, corr, svc); err != nil {
			return err
		}
	}
	slices.Sort(corr)
	slices.Sort(svc)
	var b strings.Builder
	fmt.Fprintf(&b, "POOLED label=%s files=%d answered=%d", orDash(strings.ReplaceAll(label, " ", "_")), len(paths), len(corr))
	for _, q := range []struct {
		name string
		q    float64
	}{{"p99", 0.99}, {"p999", 0.999}, {"p9999", 0.9999}} {
		fmt.Fprintf(&b, " c_%s_ms=%.3f s_%s_ms=%.3f", q.name, quantile(corr, q.q), q.name, quantile(svc, q.q))
	}
	fmt.Fprintf(&b, " c_max_ms=%.3f c_over_5ms=%d c_over_10ms=%d", maxMS(corr),
		countOver(corr, 5*time.Millisecond), countOver(corr, 10*time.Millisecond))
	_, err := fmt.Fprintln(w, b.String())
	return err
}
