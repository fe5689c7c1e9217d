//go:build linux

package reactor

var (
	strConnection = []byte("Connection")
	strKeepAlive  = []byte("keep-alive")
)

// writeAnswer writes the handler's answer to one request into c's
// writer: streamed as its body arrives (answerstream.go), from the
// upstream's header section as read (codec.Answer, when the handler kept
// it), or as fasthttp builds it. It reports whether the connection closes
// after it, which a streamed answer cut short decides too.
func (t *reactorTransport) writeAnswer(c *clientConn, w *serveState, closeConn, isHTTP11, isHead bool) (closes bool, err error) {
	resp := &w.resp
	if closeConn {
		resp.Header.SetConnectionClose()
	} else if !isHTTP11 {
		resp.Header.SetCanonical(strConnection, strKeepAlive)
	}
	if isHead {
		resp.SkipBody = true
	}
	c.armWrite()
	switch {
	case resp.IsBodyStream() && !isHead:
		var keep bool
		keep, err = t.writeStreamed(c, w, resp, closeConn, isHTTP11)
		t.noteStream(err)
		closeConn = !keep
		w.answer.Reset()
	case w.answer.Active():
		err = w.answer.Write(w.bw, resp.Body(), closeConn, !isHTTP11, isHead)
		w.answer.Reset()
	default:
		err = resp.Write(w.bw)
	}
	return closeConn, err
}
