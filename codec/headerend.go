package codec

import (
	"bytes"
	"errors"

	"github.com/valyala/fasthttp"
)

// ErrBareLFEnd refuses a header section whose blank line ends in a bare LF.
// fasthttp only ends a section at CRLF CRLF (so that it frames a stream the
// way a strict peer does) and would otherwise wait for one until the header
// timeout; the gateway answers 400 at once instead. Bare LF at the end of a
// field line is tolerated (RFC 9112 §2.2) when the section ends properly.
var ErrBareLFEnd = errors.New("codec: header section ends in a bare LF")

// HeaderEnd verdicts.
const (
	hdrPending uint8 = iota
	hdrCRLF          // the section ended with CRLF CRLF
	hdrBareLF        // it ended with a blank line that is or follows a bare LF
	hdrUnknown       // gave up: too many bytes, or a stream joined mid-way
)

// Scan states.
const (
	hdrLeading uint8 = iota // before the request line: blank lines are skipped
	hdrResumed              // hdrLeading, joined at an unknown point of the stream
	hdrFields               // after the request line
)

// HeaderEnd follows the bytes of a request's header section as they arrive and
// tells how the section ends: at its first blank line after the request
// line, as fasthttp reads it. It costs one IndexByte per line and holds no
// bytes.
type HeaderEnd struct {
	verdict  uint8
	state    uint8
	lastCR   bool // the unfinished line's last byte is CR
	prevCRLF bool // the last finished line ended in CRLF
	lineLen  int  // bytes of the unfinished line
	left     int  // bytes to scan before giving up
}

// Start begins a section at a request boundary; limit is the most bytes the
// section may take (beyond it the parser refuses it anyway).
func (s *HeaderEnd) Start(limit int) {
	*s = HeaderEnd{left: limit}
}

// Resume begins a section somewhere after the bytes tail ended with, when
// the scanner did not see the bytes in between: a blank line that may end a
// section split around that point is not held against it.
func (s *HeaderEnd) Resume(limit int, tail []byte) {
	*s = HeaderEnd{left: limit, state: hdrResumed}
	switch n := len(tail); {
	case n == 0:
	case tail[n-1] == '\n':
		s.prevCRLF = n > 1 && tail[n-2] == '\r'
	case tail[n-1] == '\r' && n > 1 && tail[n-2] == '\n':
		// A line that so far holds only CR.
		s.lineLen, s.lastCR = 1, true
		s.prevCRLF = n > 2 && tail[n-3] == '\r'
	default:
		// Inside a line that is not blank.
		s.lineLen, s.lastCR = 2, tail[n-1] == '\r'
	}
}

// Feed scans the next bytes of the stream until a verdict.
func (s *HeaderEnd) Feed(p []byte) {
	if s.verdict != hdrPending {
		return
	}
	if len(p) > s.left {
		p = p[:s.left]
	}
	s.left -= len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			s.lineLen += len(p)
			s.lastCR = p[len(p)-1] == '\r'
			break
		}
		if i > 0 {
			s.lineLen += i
			s.lastCR = p[i-1] == '\r'
		}
		crlf := s.lineLen > 0 && s.lastCR
		blank := s.lineLen == 0 || (s.lineLen == 1 && s.lastCR)
		switch {
		case !blank:
			s.state = hdrFields
		case s.state == hdrFields:
			if crlf && s.prevCRLF {
				s.verdict = hdrCRLF
			} else {
				s.verdict = hdrBareLF
			}
			return
		case s.state == hdrResumed && crlf && s.prevCRLF:
			// Perhaps the CRLF CRLF of a section whose start came
			// before the join: not for this scanner to judge.
			s.verdict = hdrUnknown
			return
		default:
			s.state = hdrLeading // an empty line before a request line
		}
		s.prevCRLF = crlf
		s.lineLen, s.lastCR = 0, false
		p = p[i+1:]
	}
	if s.left == 0 {
		s.verdict = hdrUnknown
	}
}

// Bad reports a section that ended, but not with CRLF CRLF.
func (s *HeaderEnd) Bad() bool { return s.verdict == hdrBareLF }

var strCRLFCRLF = []byte("\r\n\r\n")

// EndsBadly reports a parsed header whose section fasthttp accepted although
// its blank line is a bare LF (it does when a CRLF CRLF follows later in
// the same buffer). A section without fields keeps no raw bytes to tell.
func EndsBadly(h *fasthttp.RequestHeader) bool {
	raw := h.RawHeaders()
	return len(raw) > 0 && !bytes.HasSuffix(raw, strCRLFCRLF)
}
