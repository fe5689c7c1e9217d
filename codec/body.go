package codec

import (
	"bufio"
	"io"
	"math"
	"time"
)

// Body reads a request body from a connection's bufio.Reader: a fixed
// length, or the chunked coding (RFC 9112 §7.1), decoded strictly: chunk
// sizes of hex digits only (no sign, no 0x, no overflow), extensions free
// of control bytes, every line ended by CRLF (a bare LF is an error), the
// CRLF after each chunk's data checked, trailer fields checked like header
// fields and bounded, the body's total bounded. One lives in each
// connection and is reused for every body, so streaming allocates
// nothing. After any error it returns that error for good: the
// connection's position in the input is then unknown and it must close.
type Body struct {
	br      *bufio.Reader
	pre     []byte // bytes decoded before the handler ran, served first (SetPending)
	chunked bool
	left    int64 // fixed: bytes not yet read; chunked: left in the current chunk
	total   int64 // chunked: data bytes decoded so far
	limit   int64 // chunked: MaxBodyBytes, 0 for none
	trailer int   // chunked: most bytes of trailer fields accepted
	crlf    bool  // chunked: a chunk's data ended; its CRLF is next
	eof     bool
	err     error
	until   time.Time   // reads fail after it (ReadBefore); zero for none
	conn    ReadLimiter // brought forward to until; nil for none
}

const (
	maxChunkLine = 1024 // chunk-size line, extensions included
)

// StartFixed begins a body of exactly n bytes.
func (b *Body) StartFixed(br *bufio.Reader, n int64) {
	*b = Body{br: br, left: n}
}

// StartChunked begins a chunked body of at most limit data bytes (0: no
// limit) and trailer bytes of trailer fields.
func (b *Body) StartChunked(br *bufio.Reader, limit int64, trailer int) {
	*b = Body{br: br, chunked: true, limit: limit, trailer: trailer}
}

// SetPending makes Read return p first: the start of the body a caller
// already decoded (to check a small body whole) before streaming the rest.
func (b *Body) SetPending(p []byte) { b.pre = p }

// Read implements io.Reader: the decoded body, then io.EOF.
func (b *Body) Read(p []byte) (int, error) {
	if len(b.pre) > 0 {
		n := copy(p, b.pre)
		b.pre = b.pre[n:]
		return n, nil
	}
	if b.err != nil {
		return 0, b.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	if b.late() {
		return 0, b.fail(ErrBodyTimeout)
	}
	for b.left == 0 {
		if b.eof || !b.chunked {
			b.eof = true
			return 0, io.EOF
		}
		if err := b.nextChunk(); err != nil {
			return 0, b.fail(b.lateOr(err))
		}
	}
	n, err := b.br.Read(p[:min(int64(len(p)), b.left)])
	b.left -= int64(n)
	if b.chunked && b.left == 0 {
		b.crlf = true
	}
	if err != nil {
		return n, b.fail(b.lateOr(err))
	}
	if b.late() {
		// Bytes that came after the deadline are not passed on: the
		// upstream write they would make fails on its own deadline, and
		// the failure would read as the backend's.
		return 0, b.fail(ErrBodyTimeout)
	}
	return n, nil
}

// lateOr is ErrBodyTimeout for a read that failed past the deadline (the
// connection's read deadline, brought forward to it), else err.
func (b *Body) lateOr(err error) error {
	if b.late() {
		return ErrBodyTimeout
	}
	return err
}

// Discard skips the rest of the body if at most limit bytes of it are left;
// it reports whether the body has ended cleanly.
func (b *Body) Discard(limit int64) bool {
	b.pre = nil
	for b.err == nil {
		for b.left == 0 {
			if b.eof || !b.chunked {
				return true
			}
			if err := b.nextChunk(); err != nil {
				b.fail(err)
				return false
			}
		}
		if b.left > limit {
			return false
		}
		n, err := b.br.Discard(int(b.left))
		b.left -= int64(n)
		limit -= int64(n)
		if err != nil {
			b.fail(err)
			return false
		}
		b.crlf = b.chunked
	}
	return false
}

func (b *Body) fail(err error) error {
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	b.err = err
	return err
}

// nextChunk reads up to the next chunk's data, or through the last chunk
// and the trailer section.
func (b *Body) nextChunk() error {
	if b.crlf {
		if err := b.readCRLF(); err != nil {
			return err
		}
		b.crlf = false
	}
	line, err := b.readLine()
	if err != nil {
		return err
	}
	size, err := chunkSize(line)
	if err != nil {
		return err
	}
	if b.limit > 0 && size > b.limit-b.total {
		return ErrBodyTooLarge
	}
	b.total += size
	if size > 0 {
		b.left = size
		return nil
	}
	// Trailer fields are read and dropped.
	budget := b.trailer
	for {
		line, err := b.readLine()
		if err != nil {
			return err
		}
		if len(line) == 0 {
			b.eof = true
			return nil
		}
		if budget -= len(line) + 2; budget < 0 || CheckFieldLine(line) != nil {
			return ErrBadChunk
		}
	}
}

// readLine returns the next CRLF-terminated line without its CRLF. A bare
// LF, or a line longer than the buffer, is a framing error.
func (b *Body) readLine() ([]byte, error) {
	line, err := b.br.ReadSlice('\n')
	if err != nil {
		if err == bufio.ErrBufferFull {
			return nil, ErrBadChunk
		}
		return nil, err
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return nil, ErrBadChunk
	}
	return line[:len(line)-2], nil
}

func (b *Body) readCRLF() error {
	cr, err := b.br.ReadByte()
	if err != nil {
		return err
	}
	lf, err := b.br.ReadByte()
	if err != nil {
		return err
	}
	if cr != '\r' || lf != '\n' {
		return ErrBadChunk
	}
	return nil
}

// chunkSize parses chunk-size [ chunk-ext ]: hex digits, then nothing or
// optional blanks and ";" extensions free of control characters.
func chunkSize(line []byte) (int64, error) {
	var size int64
	i := 0
	for ; i < len(line); i++ {
		var d byte
		switch c := line[i]; {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			goto ext
		}
		if size > math.MaxInt64>>4 {
			return 0, ErrBadChunk
		}
		size = size<<4 | int64(d)
	}
ext:
	if i == 0 || len(line)-i > maxChunkLine {
		return 0, ErrBadChunk
	}
	rest := line[i:]
	for len(rest) > 0 && (rest[0] == ' ' || rest[0] == '\t') {
		rest = rest[1:]
	}
	if len(rest) == 0 {
		return size, nil
	}
	if rest[0] != ';' {
		return 0, ErrBadChunk
	}
	for _, c := range rest {
		if c < ' ' && c != '\t' || c == 0x7f {
			return 0, ErrBadChunk
		}
	}
	return size, nil
}
