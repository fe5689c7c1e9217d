package upstream

import (
	"sync"
	"time"

	"github.com/tollgate/tollgate/codec"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/valyala/fasthttp"
)

// clientExchange is one exchange over fasthttp's client pool (requests
// served off the event loops, and stream_response services on them),
// read as the loops' pools read theirs: the request written from the
// forwarding step's fields, the answer's header section parsed, and a
// body up to the window held whole while a longer one streams
// (answerBody). fasthttp's own Do would hold the whole body, or, asked to
// stream, allocate a stream of its own for every answer.
//
// The connection, and the reader it was read through, go back to the
// client's pool at the end of the exchange, or, for a streamed answer,
// when its body is closed.
func clientExchange(hc *fasthttp.HostClient, c *pipeline.Ctx, deadline time.Time, p *Pool, window int) error {
	now := time.Now()
	cc, err := hc.AcquireConn(deadline.Sub(now), false)
	if err != nil {
		return err
	}
	conn := cc.Conn()
	_ = conn.SetWriteDeadline(sooner(deadline, now, p.Write))
	bw := hc.AcquireWriter(conn)
	err = codec.WriteRequest(bw, c.Req, &c.Fields)
	if err == nil {
		err = bw.Flush()
	}
	hc.ReleaseWriter(bw)
	if err != nil {
		hc.CloseConn(cc)
		return err
	}
	_ = conn.SetReadDeadline(sooner(deadline, now, p.Read))
	br := hc.AcquireReader(conn)
	resp := c.Resp
	resp.Reset()
	resp.Header.SetNoDefaultContentType(true) // as every transport serves
	resp.SkipBody = c.Req.Header.IsHead()
	s := clientStreams.Get().(*clientStream)
	s.body.on(br, conn, time.Now, p, window)
	streamed, unframed, err := readAnswer(&s.body, resp, p.MaxResponseBytes)
	if streamed {
		// The body holds the connection until the transport closes it.
		s.release = func(reuse bool) {
			hc.ReleaseReader(br)
			if reuse {
				hc.ReleaseConn(cc)
			} else {
				hc.CloseConn(cc)
			}
		}
		s.body.start(s)
		return nil
	}
	keep := err == nil && !unframed && !resp.ConnectionClose() && br.Buffered() == 0
	s.put()
	hc.ReleaseReader(br)
	if keep {
		hc.ReleaseConn(cc)
	} else {
		hc.CloseConn(cc)
	}
	return err
}

// clientStream is the answerBody of an answer streamed over fasthttp's
// pool, and how its connection goes back.
type clientStream struct {
	body    answerBody
	release func(reuse bool)
}

var clientStreams = sync.Pool{New: func() any { return new(clientStream) }}

// streamEnded implements streamOwner.
func (s *clientStream) streamEnded(reuse bool) {
	release := s.release
	s.put()
	release(reuse)
}

func (s *clientStream) put() {
	s.release = nil
	s.body.br, s.body.conn, s.body.clock = nil, nil, nil
	clientStreams.Put(s)
}
