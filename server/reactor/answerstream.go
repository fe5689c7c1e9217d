//go:build linux

package reactor

import (
	"errors"
	"io"
	"net"
	"strconv"
	"sync"

	"github.com/tollgate/tollgate/server/transport"
	"github.com/valyala/fasthttp"
)

// A streamed answer is read from the backend and written to the client a
// piece at a time, the piece the size of the window (the largest of
// pieceSizes within it): each piece makes the backend, the gateway and the
// client wait for one another once, so smaller pieces cost all three more
// wake-ups per answer. On 1 MiB answers, 256 KiB pieces gave 0.85 of the
// rate of reading the answer whole first, 512 KiB pieces the same rate at
// 0.8 of its CPU (bench/RESULTS.md, "Answers streamed: the piece size").
var pieceSizes = [...]int{64 << 10, 128 << 10, 256 << 10, 512 << 10}

var pieces [len(pieceSizes)]sync.Pool

func init() {
	for i, n := range pieceSizes {
		pieces[i].New = func() any { b := make([]byte, n); return &b }
	}
}

// pieceFor is the pool of the largest piece within window (the smallest
// piece for a smaller window, used up to the window).
func pieceFor(window int) int {
	i := 0
	for i+1 < len(pieceSizes) && pieceSizes[i+1] <= window {
		i++
	}
	return i
}

// defaultStreamWindow paces a streamed body that does not say its own
// window (a stream_response service's, read by fasthttp's client).
const defaultStreamWindow = 512 << 10

// errStreamCut is a streamed answer the backend ended early or broke: the
// client has a part of it, and its connection closes.
var errStreamCut = errors.New("reactor: streamed answer cut short")

// writeStreamed writes an answer whose body streams from the backend: its
// header section (as read when the handler kept it, w.answer), then the
// body as the backend sends it, a piece at a time through one pooled
// buffer, so the response holds that piece and never the answer. A body
// of unknown length goes chunked to an HTTP/1.1 client and ends with the
// connection for an HTTP/1.0 one (closeConn is then forced).
//
// Each window of the body the client takes renews the write timeout: a
// client that reads steadily is not cut however long the answer, and one
// that stops (or takes less than a window per write_timeout) is cut when
// the timeout passes, the backend's connection closed with it.
func (t *reactorTransport) writeStreamed(c *clientConn, w *serveState, resp *fasthttp.Response, closeConn, http11 bool) (keep bool, err error) {
	body := resp.BodyStream()
	length := int64(resp.Header.ContentLength())
	chunked := length < 0 && http11
	if length < 0 && !http11 {
		closeConn = true
	}
	if w.answer.Active() {
		err = w.answer.WriteHead(w.bw, closeConn, !http11 && !closeConn)
	} else {
		switch {
		case length >= 0:
		case chunked:
			resp.Header.SetContentLength(-1) // the backend's framing field went with its hop-by-hop fields
		default:
			resp.Header.Del(fasthttp.HeaderTransferEncoding)
			resp.Header.SetContentLength(-2)
		}
		if closeConn {
			resp.Header.SetConnectionClose()
		}
		err = resp.Header.Write(w.bw)
	}
	if err != nil {
		return false, err
	}
	window := defaultStreamWindow
	if wb, ok := body.(transport.Paced); ok && wb.Window() > 0 {
		window = wb.Window()
	}
	pool := &pieces[pieceFor(window)]
	bp := pool.Get().(*[]byte)
	defer pool.Put(bp)
	buf := (*bp)[:min(max(window, 4<<10), len(*bp))]
	var sent, sinceArm int64
	for {
		// A piece is filled before it is written: the backend's bytes
		// come in whatever pieces its socket had, and writing each as it
		// came would make a socket call per few kilobytes on both sides.
		n, rerr := fillPiece(body, buf)
		if n > 0 {
			if chunked {
				_, _ = w.bw.Write(strconv.AppendInt(w.bw.AvailableBuffer(), int64(n), 16))
				_, _ = w.bw.Write(strCRLF)
			}
			if _, err = w.bw.Write(buf[:n]); err == nil && chunked {
				_, err = w.bw.Write(strCRLF)
			}
			if err != nil {
				return false, err
			}
			sent += int64(n)
			if sinceArm += int64(n); sinceArm >= int64(window) {
				// The client took a window: it has write_timeout for the next.
				if err = w.bw.Flush(); err != nil {
					return false, err
				}
				c.armWrite()
				sinceArm = 0
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			t.streamsCut.Add(1)
			_ = w.bw.Flush() // what was read goes out; the connection then closes
			return false, errStreamCut
		}
	}
	if length >= 0 && sent != length {
		t.streamsCut.Add(1)
		_ = w.bw.Flush()
		return false, errStreamCut
	}
	if chunked {
		if _, err = w.bw.Write(strLastChunk); err != nil {
			return false, err
		}
	}
	return !closeConn, nil
}

var (
	strCRLF      = []byte("\r\n")
	strLastChunk = []byte("0\r\n\r\n")
)

// noteStream counts how a streamed answer ended: written whole, cut by
// the backend (or its limit), or cut because the client stopped taking
// it within write_timeout.
func (t *reactorTransport) noteStream(err error) {
	var ne net.Error
	switch {
	case err == nil:
		t.streamsDone.Add(1)
	case errors.Is(err, errStreamCut):
		// counted where it was found
	case errors.As(err, &ne) && ne.Timeout():
		t.streamsStalled.Add(1)
	default:
		t.streamsCut.Add(1)
	}
}

// StreamedAnswers reports the answers streamed so far (answer_window): written
// whole, cut short by the backend or a broken client connection, and cut
// because the client stopped reading.
func (t *reactorTransport) StreamedAnswers() (done, cut, stalled uint64) {
	return t.streamsDone.Load(), t.streamsCut.Load(), t.streamsStalled.Load()
}

// fillPiece reads from r into p until p is full, r ends or fails.
func fillPiece(r io.Reader, p []byte) (int, error) {
	n := 0
	for n < len(p) {
		k, err := r.Read(p[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
