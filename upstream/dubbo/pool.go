package dubbo

import (
	"net"
	"sync"
	"time"
)

// Settings bound the calls to one instance.
type Settings struct {
	Connect     time.Duration // dial timeout
	MaxInFlight int           // calls at once on the connection
	MaxBody     int           // an answer's body, at most
	Heartbeat   time.Duration // quiet time before a heartbeat
}

// Instance holds the connection to one provider address, dialled on
// first use and again after it breaks.
type Instance struct {
	addr string
	set  Settings

	mu     sync.Mutex
	conn   *Conn
	closed bool
}

// NewInstance returns the connection holder of a provider at addr.
func NewInstance(addr string, s Settings) *Instance {
	if s.Connect <= 0 {
		s.Connect = time.Second
	}
	if s.MaxInFlight <= 0 {
		s.MaxInFlight = 1024
	}
	if s.MaxBody <= 0 {
		s.MaxBody = 8 << 20
	}
	if s.Heartbeat <= 0 {
		s.Heartbeat = 30 * time.Second
	}
	return &Instance{addr: addr, set: s}
}

// Invoke makes call, its frame built up to the attachments, within
// deadline; the call's timeout attachment tells the provider the budget.
func (in *Instance) Invoke(call *Call, deadline time.Time) error {
	left := time.Until(deadline)
	if left <= 0 {
		return TimeoutError{}
	}
	conn, err := in.connection(deadline)
	if err != nil {
		return err
	}
	call.seal(max(left.Milliseconds(), 1))
	return conn.RoundTrip(call, deadline)
}

// Ping checks the provider answers a heartbeat within timeout, dialling
// if need be.
func (in *Instance) Ping(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	conn, err := in.connection(deadline)
	if err != nil {
		return err
	}
	return conn.Ping(deadline)
}

// connection returns the open connection, dialling one when there is
// none; callers arriving during the dial wait for it.
func (in *Instance) connection(deadline time.Time) (*Conn, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.closed {
		return nil, ErrClosed
	}
	if in.conn != nil && in.conn.Err() == nil {
		return in.conn, nil
	}
	d := net.Dialer{Timeout: in.set.Connect, Deadline: deadline}
	nc, err := d.Dial("tcp", in.addr)
	if err != nil {
		return nil, err
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	in.conn = newConn(nc, in.set.MaxInFlight, in.set.MaxBody, in.set.Heartbeat)
	return in.conn, nil
}

// Close closes the connection, after grace for the calls on it.
func (in *Instance) Close(grace time.Duration) {
	in.mu.Lock()
	conn := in.conn
	in.closed, in.conn = true, nil
	in.mu.Unlock()
	if conn != nil {
		time.AfterFunc(grace, conn.Close)
	}
}
