package transport

// Paced is an answer's body that streams from the backend as the client
// takes it (the upstream's answer_window): the gateway holds a window of
// it, never the whole. A transport writes it like any body stream and
// gives the client write_timeout per window rather than per answer, so a
// client reading steadily is never cut however long the answer, and one
// that stops is cut once a window goes untaken for write_timeout (its
// backend connection closed with it).
type Paced interface {
	// Window is how many bytes of the body make one window (0: the
	// transport's default).
	Window() int
	// Pace makes the body call renew each time another window of it was
	// read for the client: a transport that cannot renew the timeout
	// between its own writes renews it there, as the bytes read are the
	// ones it writes next.
	Pace(renew func())
}
