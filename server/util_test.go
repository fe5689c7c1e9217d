package server_test

import (
	"bufio"
	"net"
	"strings"
	"time"
)

var benchReader = bufio.NewReaderSize(strings.NewReader(""), 4096)
var benchSrc = strings.NewReader("")

func bufioReader(s string) *bufio.Reader {
	benchSrc.Reset(s)
	benchReader.Reset(benchSrc)
	return benchReader
}

func netDial(addr string) (net.Conn, error) { return net.DialTimeout("tcp", addr, time.Second) }
