package dns

import (
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// hostilePeer is a name server that misbehaves on purpose, on a loopback
// UDP port (and TCP on the same port when tcp is given): it stands for a
// broken or malicious peer, which no real server can be made to be.
type hostilePeer struct {
	addr string
	wg   sync.WaitGroup
}

func startHostilePeer(t *testing.T, udp func(q dnsmessage.Message, send func([]byte)), tcp func(net.Conn)) *hostilePeer {
	t.Helper()
	var pc *net.UDPConn
	var ln net.Listener
	for range 5 {
		c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		if tcp == nil {
			pc = c
			break
		}
		if ln, err = net.Listen("tcp", c.LocalAddr().String()); err == nil {
			pc = c
			break
		}
		c.Close()
	}
	if pc == nil {
		t.Fatal("no loopback port free for both UDP and TCP")
	}
	h := &hostilePeer{addr: pc.LocalAddr().String()}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFromUDP(buf)
			if err != nil {
				return
			}
			var q dnsmessage.Message
			if q.Unpack(buf[:n]) != nil || len(q.Questions) != 1 {
				continue
			}
			udp(q, func(b []byte) { _, _ = pc.WriteToUDP(b, from) })
		}
	}()
	if ln != nil {
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				h.wg.Add(1)
				go func() {
					defer h.wg.Done()
					defer c.Close()
					tcp(c)
				}()
			}
		}()
	}
	t.Cleanup(func() {
		pc.Close()
		if ln != nil {
			ln.Close()
		}
		h.wg.Wait()
	})
	return h
}

// answer packs a response to q with the given ID, question name and A
// records for it.
func answer(t *testing.T, q dnsmessage.Message, id uint16, name string, truncated bool, ips ...string) []byte {
	t.Helper()
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: id, Response: true, Truncated: truncated, RecursionAvailable: true})
	qn := dnsmessage.MustNewName(name)
	must(t, b.StartQuestions())
	must(t, b.Question(dnsmessage.Question{Name: qn, Type: q.Questions[0].Type, Class: dnsmessage.ClassINET}))
	must(t, b.StartAnswers())
	if q.Questions[0].Type == dnsmessage.TypeA {
		for _, ip := range ips {
			hdr := dnsmessage.ResourceHeader{Name: qn, Class: dnsmessage.ClassINET, TTL: 1}
			must(t, b.AResource(hdr, dnsmessage.AResource{A: netip.MustParseAddr(ip).As4()}))
		}
	}
	out, err := b.Finish()
	must(t, err)
	return out
}

// must reports a message that cannot be built; it is called from the
// peer's goroutines too, where t.Fatal is not allowed.
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Error(err)
	}
}

func TestSpoofedAndMalformedPacketsAreIgnored(t *testing.T) {
	t.Parallel()
	peer := startHostilePeer(t, func(q dnsmessage.Message, send func([]byte)) {
		name := q.Questions[0].Name.String()
		good := answer(t, q, q.ID, name, false, "10.5.0.1")
		send(answer(t, q, q.ID+1, name, false, "10.66.6.6"))       // another ID
		send(answer(t, q, q.ID, "evil.test.", false, "10.66.6.7")) // another question
		send([]byte("\x00\x01 not a DNS message at all"))          // garbage
		send(good[:len(good)-3])                                   // cut short
		notResponse := append([]byte(nil), good...)
		notResponse[2] &^= 0x80 // the QR bit
		send(notResponse)
		oversized := answer(t, q, q.ID, name, false, "10.66.6.8")
		send(append(oversized, make([]byte, udpSize)...)) // larger than asked for
		send(good)
	}, nil)
	w := startWatch(t, mustTarget(t, servers(peer.addr), "{from: dns, name: stock.test, port: 80, family: ipv4}"))
	if got := addrs(w.nextUpdate(t, 3*time.Second, false)); got != "10.5.0.1:80/1" {
		t.Fatalf("set %q, want only the true answer's", got)
	}
}

func TestAnEndlessTCPAnswerIsBoundedAndFails(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	written := 0
	peer := startHostilePeer(t, func(q dnsmessage.Message, send func([]byte)) {
		send(answer(t, q, q.ID, q.Questions[0].Name.String(), true)) // "ask over TCP"
	}, func(c net.Conn) {
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		junk := make([]byte, 16<<10)
		for i := range junk {
			junk[i] = 0xff
		}
		for {
			n, err := c.Write(junk)
			mu.Lock()
			written += n
			mu.Unlock()
			if err != nil {
				return
			}
		}
	})
	w := startWatch(t, mustTarget(t, servers(peer.addr), "{from: dns, name: stock.test, port: 80, family: ipv4}"))
	err := w.nextFail(t, 3*time.Second)
	if !strings.Contains(err.Error(), "over TCP after a truncated answer: malformed answer") {
		t.Errorf("failure %q", err)
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("peer wrote %d bytes, socket buffers included, before the client hung up", written)
}

func TestACNAMELoopEnds(t *testing.T) {
	t.Parallel()
	peer := startHostilePeer(t, func(q dnsmessage.Message, send func([]byte)) {
		// Every name is a CNAME to the next one, never an address.
		qn := q.Questions[0].Name
		next := "n" + strconv.Itoa(len(qn.String())) + "." + qn.String()
		b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: q.ID, Response: true})
		must(t, b.StartQuestions())
		must(t, b.Question(q.Questions[0]))
		must(t, b.StartAnswers())
		must(t, b.CNAMEResource(dnsmessage.ResourceHeader{Name: qn, Class: dnsmessage.ClassINET, TTL: 1},
			dnsmessage.CNAMEResource{CNAME: dnsmessage.MustNewName(next)}))
		out, err := b.Finish()
		must(t, err)
		send(out)
	}, nil)
	w := startWatch(t, mustTarget(t, servers(peer.addr), "{from: dns, name: loop.test, port: 80, family: ipv4}"))
	if err := w.nextFail(t, 3*time.Second); !strings.Contains(err.Error(), "more than 8 CNAMEs") {
		t.Errorf("failure %q", err)
	}
}

func TestAServerThatDoesNotAnswerIsPassedOverOnlyOnce(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	asked := 0
	silent := startHostilePeer(t, func(dnsmessage.Message, func([]byte)) {
		mu.Lock()
		asked++
		mu.Unlock()
	}, nil)
	live := startHostilePeer(t, func(q dnsmessage.Message, send func([]byte)) {
		send(answer(t, q, q.ID, q.Questions[0].Name.String(), false, "10.5.0.2"))
	}, nil)
	w := startWatch(t, mustTarget(t, servers(silent.addr, live.addr), "{from: dns, name: stock.test, port: 80, family: ipv4}"))
	if got := addrs(w.nextUpdate(t, 3*time.Second, false)); got != "10.5.0.2:80/1" {
		t.Fatalf("set %q", got)
	}
	// Several refreshes (TTL 1s, max_ttl 1s) go to the server that answered.
	time.Sleep(2500 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if asked != 1 {
		t.Errorf("the silent server was asked %d times, want once", asked)
	}
}

func TestAServerWithoutEDNSIsAskedAgainPlainly(t *testing.T) {
	t.Parallel()
	peer := startHostilePeer(t, func(q dnsmessage.Message, send func([]byte)) {
		if len(q.Additionals) > 0 {
			// As a server that predates EDNS0: FORMERR, no question.
			b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: q.ID, Response: true, RCode: dnsmessage.RCodeFormatError})
			out, err := b.Finish()
			must(t, err)
			send(out)
			return
		}
		send(answer(t, q, q.ID, q.Questions[0].Name.String(), false, "10.5.0.3"))
	}, nil)
	w := startWatch(t, mustTarget(t, servers(peer.addr), "{from: dns, name: stock.test, port: 80, family: ipv4}"))
	if got := addrs(w.nextUpdate(t, 3*time.Second, false)); got != "10.5.0.3:80/1" {
		t.Fatalf("set %q", got)
	}
}
