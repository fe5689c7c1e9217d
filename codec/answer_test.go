package codec

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/valyala/fasthttp"
)

var answerNow = time.Date(2026, 12, 2, 3, 4, 5, 0, time.UTC)

// readAnswer runs Answer.Read over raw through a reader of size bytes.
func readAnswer(t *testing.T, r io.Reader, size, maxBody int, head bool) (*Answer, *fasthttp.Response, *bufio.Reader, bool, error) {
	t.Helper()
	br := bufio.NewReaderSize(r, size)
	var a Answer
	resp := &fasthttp.Response{}
	taken, err := a.Read(br, resp, maxBody, math.MaxInt, head, answerNow)
	return &a, resp, br, taken, err
}

// written is what a writes to the client for resp.
func written(a *Answer, resp *fasthttp.Response, closeConn, keepAlive, head bool) string {
	var b bytes.Buffer
	w := bufio.NewWriter(&b)
	if err := a.Write(w, resp.Body(), closeConn, keepAlive, head); err != nil {
		panic(err)
	}
	_ = w.Flush()
	return b.String()
}

// TestAnswerTaken: the common answer goes out with its lines as the
// backend wrote them, in its order and spelling, less the hop-by-hop
// fields and the trace the gateway stamps itself, with Content-Length
// and the client connection's own field last.
func TestAnswerTaken(t *testing.T) {
	for _, c := range []struct {
		name, in, want string
		close          bool
	}{{
		name: "plain",
		in:   "HTTP/1.1 200 OK\r\nserver: up\r\nDate: Tue, 01 Dec 2026 14:00:00 GMT\r\nContent-Type: text/plain\r\nContent-Length: 5\r\nx-odd-Case: v\r\n\r\nhello",
		want: "HTTP/1.1 200 OK\r\nserver: up\r\nDate: Tue, 01 Dec 2026 14:00:00 GMT\r\nContent-Type: text/plain\r\nx-odd-Case: v\r\nContent-Length: 5\r\n\r\nhello",
	}, {
		name: "hop-by-hop and the trace dropped in any case, close seen",
		in: "HTTP/1.1 503 Service Unavailable\r\nconnection: CLOSE\r\nkeep-ALIVE: timeout=5\r\nProxy-Authenticate: Basic\r\n" +
			"Proxy-Connection: keep-alive\r\nUPGRADE: h2c\r\nTE: trailers\r\ntraceparent: 00-x\r\nX-Request-ID: theirs\r\n" +
			"TraceParent: 00-y\r\nx-request-id: again\r\n" +
			"Set-Cookie: a=1\r\nSet-Cookie: b=2\r\nDate: x\r\nContent-Length: 0\r\n\r\n",
		want:  "HTTP/1.1 503 Service Unavailable\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\nDate: x\r\nContent-Length: 0\r\n\r\n",
		close: true,
	}, {
		name: "no Date: the gateway's",
		in:   "HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\nno",
		want: "HTTP/1.1 404 Not Found\r\nDate: Wed, 02 Dec 2026 03:04:05 GMT\r\nContent-Length: 2\r\n\r\nno",
	}, {
		name: "values kept byte for byte, whitespace and obs-text included",
		in:   "HTTP/1.1 200 Fine\r\nDate: x\r\nX-A:\tv  \r\nX-B: caf\xc3\xa9\r\nContent-Length:  3 \r\n\r\nabc",
		want: "HTTP/1.1 200 Fine\r\nDate: x\r\nX-A:\tv  \r\nX-B: caf\xc3\xa9\r\nContent-Length: 3\r\n\r\nabc",
	}} {
		t.Run(c.name, func(t *testing.T) {
			a, resp, br, taken, err := readAnswer(t, strings.NewReader(c.in+"NEXT"), 4096, 0, false)
			if !taken || err != nil {
				t.Fatalf("taken %v, err %v", taken, err)
			}
			if got := written(a, resp, false, false, false); got != c.want {
				t.Errorf("wrote\n%q\nwant\n%q", got, c.want)
			}
			if a.Close() != c.close {
				t.Errorf("Close() = %v", a.Close())
			}
			if rest, _ := io.ReadAll(br); string(rest) != "NEXT" {
				t.Errorf("left %q in the reader, want the next answer's bytes", rest)
			}
		})
	}
}

// TestAnswerConnectionField: the client connection's own field is the
// gateway's, after the backend's lines; a HEAD answer keeps its length
// and sends no body.
func TestAnswerConnectionField(t *testing.T) {
	in := "HTTP/1.1 200 OK\r\nDate: x\r\nContent-Length: 5\r\n\r\nhello"
	a, resp, _, _, _ := readAnswer(t, strings.NewReader(in), 4096, 0, false)
	if got, want := written(a, resp, true, true, false), "HTTP/1.1 200 OK\r\nDate: x\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello"; got != want {
		t.Errorf("close: %q", got)
	}
	if got, want := written(a, resp, false, true, false), "HTTP/1.1 200 OK\r\nDate: x\r\nContent-Length: 5\r\nConnection: keep-alive\r\n\r\nhello"; got != want {
		t.Errorf("HTTP/1.0 keep-alive: %q", got)
	}
	a.Add("Traceparent", []byte("00-1-2-00"))
	if got, want := written(a, resp, false, false, false), "HTTP/1.1 200 OK\r\nDate: x\r\nTraceparent: 00-1-2-00\r\nContent-Length: 5\r\n\r\nhello"; got != want {
		t.Errorf("stamped: %q", got)
	}

	// HEAD: the backend sends the length of the body it would have sent,
	// and no body; the next answer follows at once.
	in = "HTTP/1.1 200 OK\r\nDate: x\r\nContent-Length: 5\r\n\r\nHTTP/1.1 200 OK\r\n"
	a, resp, br, taken, err := readAnswer(t, strings.NewReader(in), 4096, 0, true)
	if !taken || err != nil || len(resp.Body()) != 0 {
		t.Fatalf("HEAD: taken %v, err %v, body %q", taken, err, resp.Body())
	}
	if got, want := written(a, resp, false, false, true), "HTTP/1.1 200 OK\r\nDate: x\r\nContent-Length: 5\r\n\r\n"; got != want {
		t.Errorf("HEAD: %q", got)
	}
	if rest, _ := io.ReadAll(br); string(rest) != "HTTP/1.1 200 OK\r\n" {
		t.Errorf("HEAD: left %q", rest)
	}
}

// TestAnswerLeftForFasthttp: every other answer is left whole in the
// reader, so that fasthttp reads it, and refuses it, exactly as it did
// before answers were kept as read.
func TestAnswerLeftForFasthttp(t *testing.T) {
	const ok = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
	for name, in := range map[string]string{
		"HTTP/1.0":                "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"interim 100":             "HTTP/1.1 100 Continue\r\n\r\n" + ok,
		"101":                     "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n",
		"204":                     "HTTP/1.1 204 No Content\r\n\r\n",
		"304":                     "HTTP/1.1 304 Not Modified\r\nContent-Length: 2\r\n\r\n",
		"status 600":              "HTTP/1.1 600 Odd\r\nContent-Length: 2\r\n\r\nok",
		"status 2000":             "HTTP/1.1 2000 OK\r\nContent-Length: 2\r\n\r\nok",
		"no reason":               "HTTP/1.1 200\r\nContent-Length: 2\r\n\r\nok",
		"empty reason":            "HTTP/1.1 200 \r\nContent-Length: 2\r\n\r\nok",
		"control in reason":       "HTTP/1.1 200 O\x01K\r\nContent-Length: 2\r\n\r\nok",
		"chunked":                 "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
		"chunked and a length":    "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
		"two lengths, mixed case": "HTTP/1.1 200 OK\r\nContent-Length: 2\r\ncontent-LENGTH: 2\r\n\r\nok",
		"chunked in capitals":     "HTTP/1.1 200 OK\r\nTRANSFER-ENCODING: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
		"two lengths":             "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok",
		"a list of lengths":       "HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\nok",
		"signed length":           "HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nok",
		"no length (to close)":    "HTTP/1.1 200 OK\r\nX-A: b\r\n\r\nok",
		"obs-fold":                "HTTP/1.1 200 OK\r\nX-A: b\r\n c\r\nContent-Length: 2\r\n\r\nok",
		"space before colon":      "HTTP/1.1 200 OK\r\nX-A : b\r\nContent-Length: 2\r\n\r\nok",
		"bare LF":                 "HTTP/1.1 200 OK\nContent-Length: 2\n\nok",
		"bare LF in a field":      "HTTP/1.1 200 OK\r\nX-A: b\nX-B: c\r\nContent-Length: 2\r\n\r\nok",
		"bare CR in a value":      "HTTP/1.1 200 OK\r\nX-A: b\rc\r\nContent-Length: 2\r\n\r\nok",
		"NUL in a value":          "HTTP/1.1 200 OK\r\nX-A: b\x00\r\nContent-Length: 2\r\n\r\nok",
		"Trailer":                 "HTTP/1.1 200 OK\r\nTrailer: X-Sum\r\nContent-Length: 2\r\n\r\nok",
		"two Content-Types":       "HTTP/1.1 200 OK\r\nContent-Type: a/b\r\nContent-Type: c/d\r\nContent-Length: 2\r\n\r\nok",
		"two Dates":               "HTTP/1.1 200 OK\r\nDate: x\r\ndate: y\r\nContent-Length: 2\r\n\r\nok",
		"Connection names more":   "HTTP/1.1 200 OK\r\nConnection: close, X-Secret\r\nX-Secret: 1\r\nContent-Length: 2\r\n\r\nok",
		"body over the limit":     "HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nhello world",
		"header over the buffer":  "HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("b", 5000) + "\r\nContent-Length: 2\r\n\r\nok",
		"closed before a section": "HTTP/1.1 200 OK\r\nContent-Le",
		"nothing":                 "",
	} {
		t.Run(name, func(t *testing.T) {
			// Whole, and a byte at a time: a section judged before its
			// end has come is left whole to fasthttp all the same.
			for _, r := range []io.Reader{strings.NewReader(in), iotest.OneByteReader(strings.NewReader(in))} {
				_, _, br, taken, err := readAnswer(t, r, 4096, 10, false)
				if taken || err != nil {
					t.Fatalf("taken %v, err %v: want it left to fasthttp", taken, err)
				}
				if rest, _ := io.ReadAll(br); string(rest) != in {
					t.Fatalf("reader holds %q, want the whole answer", rest)
				}
			}
		})
	}
}

// TestAnswerAcrossReads: a section and a body that come a byte at a time
// read as when they come at once.
func TestAnswerAcrossReads(t *testing.T) {
	in := "HTTP/1.1 200 OK\r\nDate: x\r\nX-A: b\r\nContent-Length: 10\r\n\r\n0123456789"
	a, resp, _, taken, err := readAnswer(t, iotest.OneByteReader(strings.NewReader(in)), 64, 0, false)
	if !taken || err != nil {
		t.Fatalf("taken %v, err %v", taken, err)
	}
	if got, want := written(a, resp, false, false, false), "HTTP/1.1 200 OK\r\nDate: x\r\nX-A: b\r\nContent-Length: 10\r\n\r\n0123456789"; got != want {
		t.Fatalf("wrote %q", got)
	}
	// A body larger than the reader's buffer.
	body := strings.Repeat("z", 1000)
	in = "HTTP/1.1 200 OK\r\nDate: x\r\nContent-Length: 1000\r\n\r\n" + body
	_, resp, _, taken, err = readAnswer(t, iotest.HalfReader(strings.NewReader(in)), 64, 0, false)
	if !taken || err != nil || string(resp.Body()) != body || resp.Header.ContentLength() != 1000 || resp.StatusCode() != 200 {
		t.Fatalf("taken %v, err %v, status %d, length %d, body of %d", taken, err, resp.StatusCode(), resp.Header.ContentLength(), len(resp.Body()))
	}
}

// TestAnswerKeepsItsBodyBuffer: one Answer reads answer after answer into
// the buffer it keeps; each Response holds exactly its own body, a shorter
// one after a longer included. A body over keptBody goes into the
// Response's own buffer, and the Answer keeps no buffer that large.
func TestAnswerKeepsItsBodyBuffer(t *testing.T) {
	var a Answer
	for _, body := range []string{strings.Repeat("a", 300), "b", strings.Repeat("c", keptBody), strings.Repeat("d", keptBody+1), "e"} {
		in := "HTTP/1.1 200 OK\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
		resp := &fasthttp.Response{}
		taken, err := a.Read(bufio.NewReaderSize(strings.NewReader(in), 512), resp, 0, math.MaxInt, false, answerNow)
		if !taken || err != nil || string(resp.Body()) != body {
			t.Fatalf("body of %d: taken %v, err %v, got %d bytes", len(body), taken, err, len(resp.Body()))
		}
		if cap(a.body) > keptBody {
			t.Fatalf("after a body of %d the answer keeps a buffer of %d", len(body), cap(a.body))
		}
		a.Reset()
	}
}

// TestAnswerCutShort: a body that ends before its length is an error the
// exchange reports (502), never a retry of a request the backend may have
// acted on, and never an answer.
func TestAnswerCutShort(t *testing.T) {
	a, _, _, taken, err := readAnswer(t, strings.NewReader("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort"), 4096, 0, false)
	if !taken || !errors.Is(err, io.ErrUnexpectedEOF) || a.Active() {
		t.Fatalf("taken %v, err %v, active %v", taken, err, a.Active())
	}
}

// TestAnswerMatchesFasthttpPath holds the answer as read to what the
// fasthttp path makes of the same answer (read, hop-by-hop fields
// stripped, the trace stamped, written): the same status, body and
// fields, over random answers. Names compare case-folded (fasthttp
// normalizes them; the answer as read keeps the backend's), values in
// any order per name (fasthttp's field deletion may move the last field
// into a deleted one's place, which the answer as read never does:
// TestAnswerTaken holds its order); Date is the gateway's own on the
// fasthttp path.
func TestAnswerMatchesFasthttpPath(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	names := []string{"Content-Type", "server", "Set-Cookie", "Cache-Control", "x-custom", "X-Forwarded-For", "ETag",
		"Keep-Alive", "Proxy-Authenticate", "Upgrade", "TE", "Trailer", "Proxy-Connection", "Vary", "traceparent",
		"X-Request-Id", "Content-Encoding", "Location", "Host", "Expect", "Connection", "Date", "X_Under", "Age"}
	values := []string{"a", "text/html; charset=utf-8", "close", "keep-alive", "k=v; Path=/", "1.2.3.4", "gzip", "\"etag\"", "x  y"}
	compared := 0
	for i := range 3000 {
		var in strings.Builder
		status := []int{200, 201, 202, 301, 302, 400, 404, 500, 502, 503}[r.IntN(10)]
		in.WriteString("HTTP/1.1 " + strconv.Itoa(status) + " " + fasthttp.StatusMessage(status) + "\r\n")
		for range r.IntN(8) {
			in.WriteString(names[r.IntN(len(names))] + ": " + values[r.IntN(len(values))] + "\r\n")
		}
		body := strings.Repeat("b", r.IntN(40))
		in.WriteString("Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
		raw := in.String()

		a, held, _, taken, err := readAnswer(t, strings.NewReader(raw), 4096, 0, false)
		if err != nil {
			t.Fatalf("%d: %v in %q", i, err, raw)
		}
		if !taken {
			continue // Connection with close and keep-alive only is taken; the rest is fasthttp's anyway
		}
		a.Add("Traceparent", []byte("00-t-s-00"))
		a.Add("X-Request-Id", []byte("rid"))
		compared++
		got := parseWritten(t, written(a, held, false, false, false))

		var ref fasthttp.Response
		ref.Header.SetNoDefaultContentType(true)
		if err := ref.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
			t.Fatalf("%d: fasthttp: %v", i, err)
		}
		StripResponseHopByHop(&ref.Header)
		ref.Header.SetCanonical([]byte("Traceparent"), []byte("00-t-s-00"))
		ref.Header.SetCanonical([]byte("X-Request-Id"), []byte("rid"))
		var b bytes.Buffer
		w := bufio.NewWriter(&b)
		_ = ref.Write(w)
		_ = w.Flush()
		want := parseWritten(t, b.String())
		// The trace is the gateway's alone.
		if tp, rid := got.fields["traceparent"], got.fields["x-request-id"]; len(tp) != 1 || tp[0] != "00-t-s-00" || len(rid) != 1 || rid[0] != "rid" {
			t.Fatalf("%d: trace %q %q in the answer as read of %q", i, tp, rid, raw)
		}
		for _, k := range []string{"date"} {
			delete(got.fields, k)
			delete(want.fields, k)
		}
		if got.String() != want.String() {
			t.Fatalf("%d: answer\n%q\nas read gives\n%s\nfasthttp gives\n%s", i, raw, got, want)
		}
	}
	if compared < 1000 {
		t.Fatalf("only %d of 3000 answers taken as read", compared)
	}
	t.Logf("%d of 3000 answers taken as read and compared", compared)
}

type wireAnswer struct {
	status string
	fields map[string][]string
	body   string
}

func (w wireAnswer) String() string {
	keys := make([]string, 0, len(w.fields))
	for k := range w.fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	s := w.status + "\n"
	for _, k := range keys {
		vs := append([]string(nil), w.fields[k]...)
		sort.Strings(vs)
		s += k + ": " + strings.Join(vs, " | ") + "\n"
	}
	return s + "body " + w.body
}

func parseWritten(t *testing.T, s string) wireAnswer {
	t.Helper()
	head, body, ok := strings.Cut(s, "\r\n\r\n")
	if !ok {
		t.Fatalf("no end of section in %q", s)
	}
	lines := strings.Split(head, "\r\n")
	w := wireAnswer{status: lines[0], fields: map[string][]string{}, body: body}
	for _, l := range lines[1:] {
		k, v, _ := strings.Cut(l, ":")
		k = strings.ToLower(k)
		w.fields[k] = append(w.fields[k], strings.TrimSpace(v))
	}
	return w
}

// TestAnswerFieldKinds holds the answer's name table to the lists it
// stands for, in any letter case: hop-by-hop fields are dropped (Connection
// read, Trailer judged by fasthttp), framing other than Content-Length is
// fasthttp's, Host and Expect are kept, and so is what the gateway owns in
// a request (an answer's X-Forwarded-For is the backend's business).
func TestAnswerFieldKinds(t *testing.T) {
	want := map[string]answerKind{
		"Content-Length": answerLength, "Transfer-Encoding": answerOther, "Host": answerKept, "Expect": answerKept,
		"traceparent": answerDropped, "X-Request-Id": answerDropped, "X-Forwarded-For": answerKept, "X_Request_Id": answerKept,
		"Date": answerKept, "X-Custom": answerKept, strings.Repeat("x", 40): answerKept,
	}
	for _, n := range hopByHop {
		switch n {
		case "Connection":
			want[n] = answerConnection
		case "Trailer":
			want[n] = answerOther
		case "Keep-Alive":
			want[n] = answerKeepAlive
		default:
			want[n] = answerDropped
		}
	}
	for name, kind := range want {
		for _, n := range []string{name, strings.ToUpper(name), strings.ToLower(name)} {
			if got, _ := answerField([]byte(n)); got != kind {
				t.Errorf("%s: kind %d, want %d", n, got, kind)
			}
		}
	}
}

// BenchmarkAnswerRead is the reading of a backend's common answer (four
// fields and a 64-byte body) as the loop's upstream exchange does it.
func BenchmarkAnswerRead(b *testing.B) {
	const in = "HTTP/1.1 200 OK\r\nServer: bench-upstream\r\nDate: Wed, 02 Dec 2026 16:00:00 GMT\r\n" +
		"Content-Type: text/plain\r\nContent-Length: 64\r\n\r\n" +
		"abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz01"
	src := strings.NewReader(in)
	br := bufio.NewReaderSize(src, 4096)
	var a Answer
	resp := &fasthttp.Response{}
	b.ReportAllocs()
	for b.Loop() {
		src.Reset(in)
		br.Reset(src)
		if taken, err := a.Read(br, resp, 0, math.MaxInt, false, answerNow); !taken || err != nil {
			b.Fatalf("taken %v, err %v", taken, err)
		}
	}
}

// TestAnswerWalkGoesOn: a section that comes in pieces is walked from
// where the last piece ended, never again from its start, so that a
// backend dripping its header a byte at a time costs the loop one walk of
// it, not one per byte. The lines walked are spoiled before the rest comes:
// a walk from the start would refuse the answer.
func TestAnswerWalkGoesOn(t *testing.T) {
	const in = "HTTP/1.1 200 OK\r\nX-A: 1\r\nDate: x\r\nContent-Length: 2\r\n\r\n"
	buf := []byte(in)
	var a Answer
	a.Reset()
	cut := strings.Index(in, "Date") + 2
	if _, v := a.readSection(buf[:cut], 0, answerNow); v != sectionShort {
		t.Fatalf("the first %d bytes: verdict %d, want short", cut, v)
	}
	copy(buf, "XTTP/1.1 200 OK\r\nX A: 1\r\n") // walked already
	end, v := a.readSection(buf, 0, answerNow)
	if v != sectionTaken || end != len(in) || a.walk.code != 200 || a.walk.length != 2 {
		t.Fatalf("the rest: verdict %d, end %d of %d, status %d, length %d", v, end, len(in), a.walk.code, a.walk.length)
	}
	if got, want := string(a.head), "HTTP/1.1 200 OK\r\nX-A: 1\r\nDate: x\r\n"; got != want {
		t.Fatalf("head %q, want %q", got, want)
	}
}
