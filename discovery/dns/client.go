package dns

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

const (
	// udpSize is the answer size advertised with EDNS0 and the most read
	// from one datagram; a larger answer comes truncated and is asked
	// again over TCP.
	udpSize = 4096
	// tcpMax is the most a TCP answer may be: its length prefix is 16 bits.
	tcpMax = 64 << 10
)

// errNoServers is returned when a provider checked for another host is
// used without servers; it does not happen on the host that runs it.
var errNoServers = errors.New("no name servers configured")

// client asks the configured servers, one after the other, until one
// answers. It is shared by all the targets of a provider.
type client struct {
	servers []netip.AddrPort
	timeout time.Duration
	// preferred is the index of the server that answered last: a server
	// that is down costs one timeout, not one per query.
	preferred atomic.Int32
}

// query asks name's records of type typ. An answer with NOERROR or
// NXDOMAIN is returned, whichever server gave it; any other answer, a
// timeout or a refused connection moves on to the next server, and the
// error lists what each server did.
func (c *client) query(ctx context.Context, name string, typ dnsmessage.Type) (*dnsmessage.Message, error) {
	if len(c.servers) == 0 {
		return nil, errNoServers
	}
	// The name may come from an answer (a CNAME, an SRV target): a bad
	// one is an error, never a panic.
	qname, err := dnsmessage.NewName(name)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", typeName(typ), name, err)
	}
	q := dnsmessage.Question{Name: qname, Type: typ, Class: dnsmessage.ClassINET}
	first := int(c.preferred.Load())
	var errs []string
	for i := range c.servers {
		idx := (first + i) % len(c.servers)
		server := c.servers[idx]
		msg, err := c.exchange(ctx, server, q)
		if err == nil && msg.RCode != dnsmessage.RCodeSuccess && msg.RCode != dnsmessage.RCodeNameError {
			err = fmt.Errorf("answered %s", strings.TrimPrefix(msg.RCode.String(), "RCode"))
		}
		if err == nil {
			c.preferred.Store(int32(idx))
			return msg, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		errs = append(errs, fmt.Sprintf("%s: %v", server, err))
	}
	return nil, fmt.Errorf("%s %s: %s", typeName(typ), strings.TrimSuffix(name, "."), strings.Join(errs, "; "))
}

// exchange asks one server within the client's timeout, with EDNS0 and,
// should the server predate it (RFC 6891 section 7: it answers FORMERR
// to the OPT record), once more without.
func (c *client) exchange(ctx context.Context, server netip.AddrPort, q dnsmessage.Question) (*dnsmessage.Message, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	msg, err := c.exchangeOnce(ctx, server, q, true)
	if err == nil && msg.RCode == dnsmessage.RCodeFormatError {
		msg, err = c.exchangeOnce(ctx, server, q, false)
	}
	return msg, err
}

// exchangeOnce asks over UDP, then over TCP if the answer is truncated.
func (c *client) exchangeOnce(ctx context.Context, server netip.AddrPort, q dnsmessage.Question, edns bool) (*dnsmessage.Message, error) {
	id := uint16(rand.Uint32())
	packet, err := buildQuery(id, q, edns)
	if err != nil {
		return nil, err
	}
	msg, err := exchangeUDP(ctx, server, id, q, packet)
	if err != nil {
		return nil, c.describe(ctx, err)
	}
	if !msg.Truncated {
		return msg, nil
	}
	msg, err = exchangeTCP(ctx, server, id, q, packet)
	if err != nil {
		return nil, fmt.Errorf("over TCP after a truncated answer: %w", c.describe(ctx, err))
	}
	return msg, nil
}

// describe turns a deadline into words an operator reads in a log.
func (c *client) describe(ctx context.Context, err error) error {
	var ne net.Error
	if errors.Is(ctx.Err(), context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return fmt.Errorf("no answer within %v", c.timeout)
	}
	return err
}

// buildQuery packs a recursive query for q, with an EDNS0 record that
// advertises udpSize when edns is set.
func buildQuery(id uint16, q dnsmessage.Question, edns bool) ([]byte, error) {
	b := dnsmessage.NewBuilder(make([]byte, 2, 512), dnsmessage.Header{ID: id, RecursionDesired: true})
	b.EnableCompression()
	if err := b.StartQuestions(); err != nil {
		return nil, err
	}
	if err := b.Question(q); err != nil {
		return nil, err
	}
	if err := b.StartAdditionals(); err != nil {
		return nil, err
	}
	if !edns {
		return finish(&b)
	}
	var opt dnsmessage.ResourceHeader
	if err := opt.SetEDNS0(udpSize, dnsmessage.RCodeSuccess, false); err != nil {
		return nil, err
	}
	if err := b.OPTResource(opt, dnsmessage.OPTResource{}); err != nil {
		return nil, err
	}
	return finish(&b)
}

// finish packs the message after two bytes of room for TCP's length
// prefix, and fills them in.
func finish(b *dnsmessage.Builder) ([]byte, error) {
	packet, err := b.Finish()
	if err != nil {
		return nil, err
	}
	binary.BigEndian.PutUint16(packet, uint16(len(packet)-2))
	return packet, nil
}

// exchangeUDP sends the query from a fresh socket (a kernel-chosen
// source port) and waits for the answer to it: a datagram that does not
// parse, or answers another ID or question, is dropped and the wait goes
// on, so a spoofed or stray packet cannot cut the exchange short.
func exchangeUDP(ctx context.Context, server netip.AddrPort, id uint16, q dnsmessage.Question, packet []byte) (*dnsmessage.Message, error) {
	conn, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(server))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	stop := bindDeadline(ctx, conn)
	defer stop()
	if _, err := conn.Write(packet[2:]); err != nil {
		return nil, err
	}
	buf := make([]byte, udpSize+1)
	for {
		n, err := conn.Read(buf)
		if err != nil {
			return nil, err
		}
		if n > udpSize {
			continue // larger than advertised: not an answer to this query
		}
		if msg, ok := parseAnswer(buf[:n], id, q); ok {
			return msg, nil
		}
	}
}

// exchangeTCP asks over one TCP connection and reads one answer.
func exchangeTCP(ctx context.Context, server netip.AddrPort, id uint16, q dnsmessage.Question, packet []byte) (*dnsmessage.Message, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", server.String())
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	stop := bindDeadline(ctx, conn)
	defer stop()
	if _, err := conn.Write(packet); err != nil {
		return nil, err
	}
	var prefix [2]byte
	if _, err := io.ReadFull(conn, prefix[:]); err != nil {
		return nil, err
	}
	size := int(binary.BigEndian.Uint16(prefix[:]))
	buf := make([]byte, min(size, tcpMax))
	if _, err := io.ReadFull(conn, buf); err != nil {
		return nil, err
	}
	msg, ok := parseAnswer(buf, id, q)
	if !ok {
		return nil, errors.New("malformed answer, or one to another query")
	}
	return msg, nil
}

// bindDeadline gives conn ctx's deadline and ends a pending read when ctx
// is cancelled; stop releases the watch.
func bindDeadline(ctx context.Context, conn net.Conn) (stop func() bool) {
	if d, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(d)
	}
	return context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
}

// parseAnswer unpacks b and accepts it only as the answer to the query
// with id and q.
func parseAnswer(b []byte, id uint16, q dnsmessage.Question) (*dnsmessage.Message, bool) {
	var msg dnsmessage.Message
	if err := msg.Unpack(b); err != nil {
		return nil, false
	}
	if msg.ID != id || !msg.Response || msg.OpCode != 0 {
		return nil, false
	}
	if len(msg.Questions) == 0 && msg.RCode == dnsmessage.RCodeFormatError {
		// A server that cannot parse the query may not echo it; taking
		// such an answer only leads to asking again without EDNS0.
		return &msg, true
	}
	if len(msg.Questions) != 1 {
		return nil, false
	}
	got := msg.Questions[0]
	if got.Type != q.Type || got.Class != q.Class || !sameName(got.Name, q.Name) {
		return nil, false
	}
	return &msg, true
}

// sameName compares names as DNS does, ignoring ASCII case.
func sameName(a, b dnsmessage.Name) bool {
	return strings.EqualFold(a.String(), b.String())
}

func typeName(t dnsmessage.Type) string {
	return strings.TrimPrefix(t.String(), "Type")
}
