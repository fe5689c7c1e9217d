package codec

import (
	"bufio"
	"bytes"
	"io"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/internal/ascii"
	"github.com/valyala/fasthttp"
)

// Answer is an upstream's answer whose header section the gateway passes
// on as it was read: the status line and the fields in the backend's
// order and spelling, less the hop-by-hop ones, with the gateway's own
// fields added at the end. Parsing a section into fasthttp's header and
// writing it out again was about a sixth of the Go work of a proxied
// request (bench/RESULTS.md, "the answer's header section as read").
//
// Only the common answer is taken this way: HTTP/1.1, a final status with
// a body framed by one Content-Length, every line strict, no Connection
// option but close and keep-alive, at most one Date, Content-Type,
// Content-Encoding and Server (fasthttp keeps the last). Read leaves any other answer untouched
// in the reader, for fasthttp to read as before, so the rules for the
// rare cases stay in one place.
//
// The zero value is ready to use; it allocates only while its buffer
// grows.
type Answer struct {
	head          []byte // the status line and the kept field lines, each with CRLF
	body          []byte // a body of up to keptBody bytes, read here (readBody)
	contentLength int
	active        bool
	streamed      bool // the body is left in the reader, longer than the window
	close         bool // the backend asked to close its connection
	// keepAlive is the idle timeout the backend announced (Keep-Alive:
	// timeout=N), when keepAliveSet.
	keepAlive    time.Duration
	keepAliveSet bool
	walk         sectionWalk
}

// sectionWalk is how far Read has walked a header section that has not
// all come yet, so that each byte is walked once however the section is
// split: a backend sending it a byte at a time does not make the loop
// walk it again from the start at each byte.
type sectionWalk struct {
	at      int   // where the next line starts (0: the status line)
	code    int   // the status
	length  int   // Content-Length, -1 until read
	singles uint8 // the single-valued fields seen (answerField)
}

// Active reports that the answer in hand is one Read took: the transport
// writes it with Write, not from the fasthttp.Response.
func (a *Answer) Active() bool { return a != nil && a.active }

// Streamed reports that Read left the body in the reader: it is longer
// than the window the caller holds, and is read as the client takes it.
func (a *Answer) Streamed() bool { return a.streamed }

// Close reports that the backend asked to close the connection.
func (a *Answer) Close() bool { return a.close }

// KeepAlive reports the idle timeout the backend announced with the
// answer (Keep-Alive: timeout=N), a field the client does not get.
func (a *Answer) KeepAlive() (time.Duration, bool) { return a.keepAlive, a.keepAliveSet }

// Reset drops the answer; a later Read or nothing takes its place.
func (a *Answer) Reset() {
	a.head = a.head[:0]
	a.contentLength = 0
	a.active, a.close, a.streamed = false, false, false
	a.keepAlive, a.keepAliveSet = 0, false
	a.walk = sectionWalk{}
}

var (
	strHTTP11Sp     = []byte("HTTP/1.1 ")
	strDateField    = []byte("Date: ")
	strConnClose    = []byte("Connection: close\r\n")
	strConnKeep     = []byte("Connection: keep-alive\r\n")
	strFieldSep     = []byte(": ")
	strAnswerDate   = "Date"
	strAnswerLength = "Content-Length"
)

// dateFormat is the HTTP date (RFC 9110 §5.6.7).
const dateFormat = "Mon, 02 Jan 2006 15:04:05 GMT"

// Read reads an answer from br into a and resp when its header section is
// one the gateway passes on as read (see Answer): the status code, the
// body and its length go into resp, the section into a. It reports
// taken=false, with nothing consumed from br, for any other answer, and
// for a read error before a whole section: the caller then reads it with
// fasthttp. maxBody (0 for none) bounds the body as ReadLimitBody does;
// a body longer than window is left in br, for the caller to stream
// (Streamed). head says the request was HEAD (the answer has no body).
// now is the time of the Date field added when the backend sent none.
func (a *Answer) Read(br *bufio.Reader, resp *fasthttp.Response, maxBody, window int, head bool, now time.Time) (taken bool, err error) {
	a.Reset()
	var (
		end     int
		verdict sectionVerdict
	)
	for n := 1; ; {
		if _, err := br.Peek(n); err != nil {
			a.Reset()
			return false, nil
		}
		// The buffered bytes from the answer's first: a fill moves them
		// to the buffer's front but keeps them, so the walk's offsets hold.
		b, _ := br.Peek(br.Buffered())
		end, verdict = a.readSection(b, maxBody, now)
		if verdict != sectionShort {
			break
		}
		if len(b) >= br.Size() {
			a.Reset()
			return false, nil
		}
		n = len(b) + 1 // wait for more than what is here now
	}
	if verdict != sectionTaken {
		a.Reset()
		return false, nil
	}
	if _, err := br.Discard(end); err != nil {
		return true, err
	}
	resp.ResetBody()
	resp.Header.SetNoDefaultContentType(true)
	resp.SetStatusCode(a.walk.code)
	resp.Header.SetContentLength(a.walk.length)
	a.contentLength = a.walk.length
	a.active = true
	if head {
		return true, nil
	}
	if a.walk.length > window {
		a.streamed = true
		return true, nil
	}
	if !head {
		if err := a.readBody(br, resp, a.walk.length); err != nil {
			a.active = false
			return true, err
		}
	}
	return true, nil
}

// sectionVerdict is what readSection made of the bytes buffered.
type sectionVerdict uint8

const (
	sectionTaken sectionVerdict = iota // the common answer: passed on as read
	sectionOther                       // another answer: fasthttp's to read
	sectionShort                       // no blank line yet: the section needs more bytes
)

// readSection walks a header section at the front of b, line by line, into
// a.head: the status line, the fields kept, and a Date when the backend
// sent none. It goes on from where the last call stopped (a.walk) when
// that one found the section short: b is then the same bytes and more.
// Done, it returns the section's length (through its blank line), with the
// status and Content-Length in a.walk. One pass finds the lines and the
// section's end: the bytes are not searched for CRLF CRLF first.
func (a *Answer) readSection(b []byte, maxBody int, now time.Time) (end int, verdict sectionVerdict) {
	w := &a.walk
	if w.at == 0 {
		code, reason, rest, verdict := statusLine(b)
		if verdict != sectionTaken {
			return 0, verdict
		}
		a.head = append(a.head, strHTTP11Sp...)
		a.head = strconv.AppendInt(a.head, int64(code), 10)
		a.head = append(a.head, ' ')
		a.head = append(a.head, reason...)
		a.head = append(a.head, '\r', '\n')
		w.at = len(b) - len(rest)
		w.code, w.length = code, -1
	}
	for {
		line, rest, verdict := crlfLine(b[w.at:])
		if verdict != sectionTaken {
			return 0, verdict // short: the walk goes on from this line
		}
		w.at = len(b) - len(rest)
		if len(line) == 0 {
			break // the blank line
		}
		name, value, err := splitFieldLine(line)
		if err != nil {
			return 0, sectionOther
		}
		switch kind, single := answerField(name); kind {
		case answerConnection:
			if !a.connectionOptions(value) {
				return 0, sectionOther
			}
			continue
		case answerDropped:
			continue
		case answerKeepAlive:
			// The shortest timeout announced, as fasthttp's path reads it
			// (upstream.loopPool.roundTrip): a backend that says two
			// things is held to the safer one.
			if d, ok := KeepAliveTimeout(value); ok && (!a.keepAliveSet || d < a.keepAlive) {
				a.keepAlive, a.keepAliveSet = d, true
			}
			continue
		case answerOther:
			return 0, sectionOther
		case answerLength:
			n, ok := decimal(value)
			if !ok || w.length >= 0 {
				return 0, sectionOther // a second one, even equal, is fasthttp's to judge
			}
			w.length = n
			continue
		default:
			if single != 0 {
				if w.singles&single != 0 {
					return 0, sectionOther // fasthttp keeps the last; the answer is its to pass as before
				}
				w.singles |= single
			}
		}
		a.head = append(a.head, line...)
		a.head = append(a.head, '\r', '\n')
	}
	if w.length < 0 || maxBody > 0 && w.length > maxBody {
		return 0, sectionOther
	}
	if w.singles&singleDate == 0 {
		a.head = append(a.head, strDateField...)
		a.head = now.UTC().AppendFormat(a.head, dateFormat)
		a.head = append(a.head, '\r', '\n')
	}
	return w.at, sectionTaken
}

// The fields fasthttp holds one value of, each a bit of Read's singles.
const (
	singleDate uint8 = 1 << iota
	singleContentType
	singleContentEncoding
	singleServer
)

// answerKind is what Read does with an answer's field, by its name.
type answerKind uint8

const (
	answerKept       answerKind = iota // passed on (once, for a single-valued one)
	answerConnection                   // its options are read: close and keep-alive only
	answerDropped                      // hop-by-hop, or a field the gateway stamps itself (StampedByGateway)
	answerKeepAlive                    // hop-by-hop, and its timeout is how long the backend keeps the connection idle
	answerLength                       // Content-Length: the body's framing
	answerOther                        // Transfer-Encoding, or Trailer (announcing trailers a length-framed body cannot have): fasthttp judges the answer
)

type answerName struct {
	name   string
	kind   answerKind
	single uint8
}

// answerNames holds every name Read treats apart, by length, so that a
// field is compared with the few of its own length, once.
var answerNames = func() (t [32][]answerName) {
	add := func(n string, kind answerKind, single uint8) {
		t[len(n)] = append(t[len(n)], answerName{n, kind, single})
	}
	for _, n := range hopByHop {
		switch n {
		case "Connection":
			add(n, answerConnection, 0)
		case "Trailer":
			add(n, answerOther, 0)
		case "Keep-Alive":
			add(n, answerKeepAlive, 0)
		default:
			add(n, answerDropped, 0)
		}
	}
	// Host and Expect, framing in a request, are kept in an answer.
	add(strAnswerLength, answerLength, 0)
	add("Transfer-Encoding", answerOther, 0)
	add(strAnswerDate, answerKept, singleDate)
	add("Content-Type", answerKept, singleContentType)
	add("Content-Encoding", answerKept, singleContentEncoding)
	add("Server", answerKept, singleServer)
	return t
}()

// answerField returns what Read does with a field of this name, and the
// bit of a single-valued one (0 for others).
func answerField(name []byte) (answerKind, uint8) {
	if len(name) < len(answerNames) {
		for _, n := range answerNames[len(name)] {
			if ascii.EqualFold(name, n.name) {
				return n.kind, n.single
			}
		}
	}
	return answerKept, 0
}

// connectionOptions reads an answer's Connection field: close and
// keep-alive only (any other option names fields to remove, which the
// fasthttp path does).
func (a *Answer) connectionOptions(v []byte) bool {
	ok := true
	forEachToken(v, func(tok []byte) {
		switch {
		case ascii.EqualFold(tok, "close"):
			a.close = true
		case ascii.EqualFold(tok, "keep-alive"):
		default:
			ok = false
		}
	})
	return ok
}

// statusLine reads "HTTP/1.1 SSS reason" off the front of a section: a
// final status other than 204 and 304 (no body is framed for them by
// Content-Length) and a reason, which is kept.
func statusLine(b []byte) (code int, reason, rest []byte, verdict sectionVerdict) {
	line, rest, verdict := crlfLine(b)
	if verdict != sectionTaken {
		return 0, nil, nil, verdict
	}
	if len(line) < len("HTTP/1.1 200 ") || !bytes.HasPrefix(line, strHTTP11Sp) || line[12] != ' ' {
		return 0, nil, nil, sectionOther
	}
	for _, b := range line[9:12] {
		if b < '0' || b > '9' {
			return 0, nil, nil, sectionOther
		}
		code = code*10 + int(b-'0')
	}
	if code < 200 || code > 599 || code == 204 || code == 304 {
		return 0, nil, nil, sectionOther
	}
	reason = line[13:]
	if len(reason) == 0 {
		return 0, nil, nil, sectionOther
	}
	if !plainValue(reason) {
		for _, b := range reason {
			if !valueChars[b] {
				return 0, nil, nil, sectionOther
			}
		}
	}
	return code, reason, rest, sectionTaken
}

// crlfLine splits the first CRLF-ended line off b; a bare LF or CR is
// not the common answer, and a line not ended yet needs more bytes.
func crlfLine(b []byte) (line, rest []byte, verdict sectionVerdict) {
	i := bytes.IndexByte(b, '\n')
	switch {
	case i < 0:
		return nil, nil, sectionShort
	case i < 1 || b[i-1] != '\r':
		return nil, nil, sectionOther
	}
	return b[:i-1], b[i+1:], sectionTaken
}

// decimal reads a number of up to 15 digits (a Content-Length, a
// Keep-Alive timeout): digits only, after the optional whitespace around
// it.
func decimal(v []byte) (int, bool) {
	v = ascii.TrimOWS(v)
	if len(v) == 0 || len(v) > 15 {
		return 0, false
	}
	n := 0
	for _, b := range v {
		if b < '0' || b > '9' {
			return 0, false
		}
		n = n*10 + int(b-'0')
	}
	return n, true
}

// keptBody is the largest body an Answer reads into a buffer of its own.
// A larger one goes into the fasthttp.Response's buffer, so that no
// Answer keeps a large buffer between requests.
const keptBody = 16 << 10

// readBody reads n bytes of body from br into a buffer the Answer keeps
// for the next one, and gives it to resp without a copy: a body in
// fasthttp's own buffer comes from, and goes back to, a pool every loop
// shares, whose counters moved a cache line between cores at every
// request (BenchmarkProxyPathTwoLoops).
func (a *Answer) readBody(br *bufio.Reader, resp *fasthttp.Response, n int) error {
	if n > keptBody {
		return readBody(br, resp, n)
	}
	b := a.body[:0]
	if cap(b) < n {
		b = make([]byte, 0, n)
	}
	err := readChunks(br, n, func(p []byte) { b = append(b, p...) })
	a.body = b
	if err != nil {
		return err
	}
	resp.SetBodyRaw(b)
	return nil
}

// readBody reads n bytes of body from br into resp's own buffer.
func readBody(br *bufio.Reader, resp *fasthttp.Response, n int) error {
	return readChunks(br, n, resp.AppendBody)
}

// readChunks reads n bytes from br, handing each piece to put straight
// from br's buffer (one copy, as fasthttp reads a body).
func readChunks(br *bufio.Reader, n int, put func([]byte)) error {
	for n > 0 {
		b, err := br.Peek(min(n, br.Size()))
		if len(b) > 0 {
			put(b)
			_, _ = br.Discard(len(b))
			n -= len(b)
		}
		if n > 0 && err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF // the answer began: not a closed idle connection
			}
			return err
		}
	}
	return nil
}

// Add appends a field the gateway sets on the answer.
func (a *Answer) Add(name string, value []byte) {
	a.head = append(a.head, name...)
	a.head = append(a.head, strFieldSep...)
	a.head = append(a.head, value...)
	a.head = append(a.head, strCRLF...)
}

// Write writes the answer to w: the section as read and added to, the
// length, Connection: close when the client connection closes after it
// (closeConn) or Connection: keep-alive for an HTTP/1.0 client that keeps
// it (keepAlive), the blank line, and body unless the request was HEAD.
func (a *Answer) Write(w *bufio.Writer, body []byte, closeConn, keepAlive, head bool) error {
	err := a.WriteHead(w, closeConn, keepAlive)
	if !head && err == nil {
		_, err = w.Write(body)
	}
	return err
}

// WriteHead writes the answer's header section, as Write does, and no
// body: a streamed body follows it.
func (a *Answer) WriteHead(w *bufio.Writer, closeConn, keepAlive bool) error {
	_, _ = w.Write(a.head)
	_, _ = w.Write(strCLColonSpace)
	_, _ = w.Write(strconv.AppendInt(w.AvailableBuffer(), int64(a.contentLength), 10))
	_, _ = w.Write(strCRLF)
	switch {
	case closeConn:
		_, _ = w.Write(strConnClose)
	case keepAlive:
		_, _ = w.Write(strConnKeep)
	}
	_, err := w.Write(strCRLF)
	return err
}

// BodyLen is the length of resp's body without reading it: a body that
// streams (longer than the window a response holds) is counted by its
// Content-Length, 0 when it has none, and is never pulled into memory
// (fasthttp's Body would read all of it).
func BodyLen(resp *fasthttp.Response) int {
	if resp.IsBodyStream() {
		return max(resp.Header.ContentLength(), 0)
	}
	return len(resp.Body())
}
