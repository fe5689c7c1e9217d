// Package reactor is the gateway's default transport (transport: reactor;
// "netpoll", its earlier name, is a synonym): epoll event loops (Linux
// only) that run requests on fibers, hold no goroutine and no buffer for
// an idle connection, and never read a socket ahead of the parser, so a
// client's extra bytes stay in the kernel (see docs/memory.md).
//
// Where things live: the transport and its connections' admission
// (transport.go, accept_linux.go, shutdown.go); the epoll loop
// (loop_linux.go), the fibers requests run on (fiber_linux.go), how a
// loop schedules them (scheduler_linux.go) and batches their socket calls
// in an io_uring (ring_linux.go); a client connection (clientconn*.go,
// tls.go, h2.go, upgrade.go); HTTP/2 on the loops: a connection
// (h2conn_linux.go), its frames and stream states (h2read_linux.go), its
// header blocks (h2headers_linux.go), a stream's request (h2stream_linux.go), the writer and flow control
// (h2write_linux.go) and a stream's answer (h2answer_linux.go); reading a
// request (request.go) and writing its answer (answer.go,
// answerstream.go); upstream connections dialed
// from the loops (upstreamconn_linux.go) and their host names
// (dnscache.go).
package reactor
