package codec

import (
	"bufio"
	"bytes"
	"io"
	"testing"

	"github.com/valyala/fasthttp"
)

var fuzzSeeds = []string{
	"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
	"POST /p HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc",
	"POST /p HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nX-A: b\r\n c\r\n\r\n",
	"GET / HTTP/1.0\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
}

// FuzzCheck: no input may crash the parser or the checks.
func FuzzCheck(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var req fasthttp.Request
		req.Header.DisableNormalizing()
		if err := req.Header.Read(bufio.NewReaderSize(bytes.NewReader(raw), 16<<10)); err != nil {
			return
		}
		_ = Check(&req.Header, &testLimits)
	})
}

// FuzzParseRequest checks the property the edge exists for: a request the
// gateway accepts is re-sent upstream as exactly one request that an
// independent parse reads back with the same method, target and body, and
// nothing left over (no smuggled second request).
func FuzzParseRequest(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var in fasthttp.Request
		in.Header.DisableNormalizing()
		br := bufio.NewReaderSize(bytes.NewReader(raw), 16<<10)
		if err := in.Header.Read(br); err != nil {
			return
		}
		if Check(&in.Header, &testLimits) != nil {
			return
		}
		// The body as the netpoll transport reads it: with Body, the
		// decoder production uses.
		var body Body
		switch cl := in.Header.ContentLength(); {
		case cl >= 0:
			body.StartFixed(br, int64(cl))
		case cl == -1:
			body.StartChunked(br, 1<<20, 4096)
		}
		data, err := io.ReadAll(&body)
		if err != nil {
			return
		}
		in.SetBody(data)
		var tg Target
		if ParseTarget(&tg, &in.Header) != nil {
			return
		}
		var l FieldList
		CollectFields(&l, &in.Header, &Outgoing{Host: tg.Host, ClientHost: tg.Host})
		method := string(in.Header.Method())
		l.SetTarget(tg.Path, tg.Query, tg.HasQuery)
		// Written straight from the list, as the event loops send it...
		var direct bytes.Buffer
		dw := bufio.NewWriter(&direct)
		derr := WriteRequest(dw, &in, &l)
		_ = dw.Flush()
		// ... and through the request's header, as fasthttp frames a
		// streamed body.
		Apply(&in, &l)
		var wire bytes.Buffer
		bw := bufio.NewWriter(&wire)
		if err := in.Write(bw); err != nil {
			return
		}
		_ = bw.Flush()
		if derr != nil || !bytes.Equal(direct.Bytes(), wire.Bytes()) {
			t.Fatalf("written from the list (%v):\n%q\nthrough the header:\n%q", derr, direct.Bytes(), wire.Bytes())
		}
		var out fasthttp.Request
		out.Header.DisableNormalizing()
		br2 := bufio.NewReaderSize(bytes.NewReader(wire.Bytes()), 64<<10)
		if err := out.Header.Read(br2); err != nil {
			t.Fatalf("re-sent request does not parse: %v\n%q", err, wire.Bytes())
		}
		if err := out.ContinueReadBody(br2, 2<<20, false); err != nil {
			t.Fatalf("re-sent body does not parse: %v\n%q", err, wire.Bytes())
		}
		wantURI := string(tg.Path)
		if tg.HasQuery && len(tg.Query) > 0 {
			wantURI += "?" + string(tg.Query)
		}
		if method != string(out.Header.Method()) || !bytes.Equal(in.Body(), out.Body()) ||
			string(out.Header.RequestURI()) != wantURI || string(out.Header.Host()) != string(tg.Host) {
			t.Fatalf("re-sent request differs:\nin  %q\nout %q", raw, wire.Bytes())
		}
		if br2.Buffered() != 0 {
			t.Fatalf("re-sent request leaves %d bytes: a second request", br2.Buffered())
		}
	})
}
