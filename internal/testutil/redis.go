package testutil

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Redis is a real redis-server process on 127.0.0.1, private to one test:
// its own port, its own directory, no persistence. It is stopped when the
// test ends, thawed first if the test left it frozen.
//
// The methods are safe for concurrent use.
type Redis struct {
	// Addr is host:port of the server; it stays the same across Restart.
	Addr string

	serverProcess

	bin   string
	port  int
	dir   string
	extra []string
}

// redisStartWait bounds how long a started server may take to answer PING.
const redisStartWait = 10 * time.Second

// StartRedis starts a redis-server on a free loopback port and waits until
// it answers PING. A missing redis-server fails the test (`make test`
// installs it) unless TOLLGATE_SKIP_REDIS=1, which skips the test instead.
// extra are more server options (a TLS port, say); Addr stays the plain one.
func StartRedis(t testing.TB, extra ...string) *Redis {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("TOLLGATE_SKIP_REDIS") == "1" {
			t.Skip("redis-server not installed and TOLLGATE_SKIP_REDIS=1")
		}
		t.Fatal("redis-server not found in PATH: `make test` installs it " +
			"(or set TOLLGATE_SKIP_REDIS=1 to skip the tests that need it)")
	}
	r := &Redis{serverProcess: serverProcess{t: t, name: "redis-server"}, bin: bin, dir: t.TempDir(), extra: extra}
	r.serverProcess.start, r.where = r.start, func() string { return r.Addr }
	t.Cleanup(r.stop)

	// A port taken from the kernel may be grabbed by someone else before
	// redis binds it; try a few.
	var lastErr error
	for range 5 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		r.port = ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		r.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(r.port))
		if lastErr = r.start(); lastErr == nil {
			return r
		}
	}
	t.Fatalf("starting redis-server: %v", lastErr)
	return nil
}

// start runs the server on r.port and waits for PING. The caller must not
// hold r.mu.
func (r *Redis) start() error {
	logFile := filepath.Join(r.dir, "redis.log")
	cmd := exec.Command(r.bin,
		"--port", strconv.Itoa(r.port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--protected-mode", "no",
		"--daemonize", "no",
		"--dir", r.dir,
		"--logfile", logFile,
	)
	cmd.Args = append(cmd.Args, r.extra...)
	cmd.Dir = r.dir
	done, err := r.run(cmd)
	if err != nil {
		return err
	}
	return r.awaitReady(done, logFile, redisStartWait, func() bool { out, err := r.Command("PING"); return err == nil && out == "PONG" })
}

func (r *Redis) stop() { r.Kill() }

// Command sends one command over a fresh TCP connection (RESP2) and returns
// the reply as text: a status or bulk string as is, an integer in decimal,
// a nil reply as "", an array as its elements one per line. A Redis error
// reply is returned as an error. Meant for test assertions, e.g.
// Command("INFO", "commandstats").
func (r *Redis) Command(args ...string) (string, error) {
	if len(args) == 0 {
		return "", errors.New("redis: empty command")
	}
	conn, err := net.DialTimeout("tcp", r.Addr, time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	var b []byte
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, "\r\n"...)
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, "\r\n"...)
		b = append(b, a...)
		b = append(b, "\r\n"...)
	}
	if _, err := conn.Write(b); err != nil {
		return "", err
	}
	return readRESP(bufio.NewReader(conn))
}

// readRESP reads one RESP2 reply.
func readRESP(br *bufio.Reader) (string, error) {
	line, err := br.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", errors.New("redis: empty reply line")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", errors.New(line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return "", fmt.Errorf("redis: bad bulk length %q", line)
		}
		if n < 0 {
			return "", nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(br, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return "", fmt.Errorf("redis: bad array length %q", line)
		}
		parts := make([]string, 0, max(n, 0))
		for range n {
			s, err := readRESP(br)
			if err != nil {
				return "", err
			}
			parts = append(parts, s)
		}
		return strings.Join(parts, "\n"), nil
	}
	return "", fmt.Errorf("redis: unexpected reply %q", line)
}

// CommandStat returns the number of calls of one command (lower case, e.g.
// "zrange") from INFO commandstats; 0 when it was never called.
func (r *Redis) CommandStat(name string) (int64, error) {
	info, err := r.Command("INFO", "commandstats")
	if err != nil {
		return 0, err
	}
	prefix := "cmdstat_" + strings.ToLower(name) + ":"
	for line := range strings.Lines(info) {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), prefix)
		if !ok {
			continue
		}
		for field := range strings.SplitSeq(rest, ",") {
			if v, ok := strings.CutPrefix(field, "calls="); ok {
				return strconv.ParseInt(v, 10, 64)
			}
		}
	}
	return 0, nil
}

// tail returns the end of a log file for error messages.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log)"
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}
