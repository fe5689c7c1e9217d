package etcd

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/tollgate/tollgate/discovery"
)

// Bounds on what one key's value may hold: the value is written by
// whoever may write under the prefix and is read as hostile input.
const (
	maxValueBytes = 64 << 10
	maxMetaKeys   = 64
	maxWeight     = 10000 // the same bound as a configured instance's weight
)

// Operations of etcd's naming layout (naming/endpoints' Add and Delete).
const (
	opAdd    = 0
	opDelete = 1
)

// endpointValue is a value in etcd's naming layout, as
// go.etcd.io/etcd/client/v3/naming/endpoints writes it:
// {"Op":0,"Addr":"host:port","Metadata":…}.
type endpointValue struct {
	Op       *int            `json:"Op"`
	Addr     string          `json:"Addr"`
	Metadata json.RawMessage `json:"Metadata"`
}

// errRemoved marks a value whose Op says the endpoint is gone.
var errRemoved = errors.New("removed (Op 1)")

// parseValue reads one key's value. It returns errRemoved for an Op=1
// (Delete) value, which the naming layout reads as "no such endpoint",
// and another error for a value that is not a usable endpoint.
func parseValue(v []byte) (discovery.Instance, error) {
	var none discovery.Instance
	if len(v) > maxValueBytes {
		return none, fmt.Errorf("value of %d bytes, over the %d accepted", len(v), maxValueBytes)
	}
	var ev endpointValue
	if err := json.Unmarshal(v, &ev); err != nil {
		return none, fmt.Errorf("not an endpoint (JSON {\"Op\":0,\"Addr\":\"host:port\"}): %w", err)
	}
	op := opAdd
	if ev.Op != nil {
		op = *ev.Op
	}
	switch op {
	case opAdd:
	case opDelete:
		return none, errRemoved
	default:
		return none, fmt.Errorf("unknown Op %d", op)
	}
	if err := checkAddr(ev.Addr); err != nil {
		return none, err
	}
	in := discovery.Instance{Addr: ev.Addr}
	meta, err := parseMetadata(ev.Metadata)
	if err != nil {
		return none, err
	}
	if w, ok := meta["weight"]; ok {
		n, err := strconv.Atoi(strings.TrimSpace(w))
		if err != nil || n < 0 || n > maxWeight {
			return none, fmt.Errorf("metadata weight %q: want a whole number 0..%d", w, maxWeight)
		}
		in.Weight = n
	}
	if len(meta) > 0 {
		in.Meta = meta
	}
	return in, nil
}

// checkAddr accepts host:port with a port 1..65535.
func checkAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("Addr %q: %w", truncate(addr, 256), err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || host == "" {
		return fmt.Errorf("Addr %q: want host:port with a port 1..65535", truncate(addr, 256))
	}
	if strings.ContainsFunc(host, func(r rune) bool { return r <= ' ' || r == 0x7f || r == '/' }) {
		return fmt.Errorf("Addr %q: the host has a space, a control character or a /", truncate(addr, 256))
	}
	return nil
}

// parseMetadata turns the Metadata object into strings: a string value
// as it is, any other value as its compact JSON text. Null or absent
// Metadata is none; Metadata that is not an object (naming/endpoints
// allows any JSON) says nothing the gateway can select on and is ignored.
func parseMetadata(raw json.RawMessage) (map[string]string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, fmt.Errorf("Metadata: %w", err)
	}
	if len(fields) > maxMetaKeys {
		return nil, fmt.Errorf("Metadata with %d keys, over the %d accepted", len(fields), maxMetaKeys)
	}
	meta := make(map[string]string, len(fields))
	for k, v := range fields {
		var s string
		if len(v) > 0 && v[0] == '"' {
			if err := json.Unmarshal(v, &s); err != nil {
				return nil, fmt.Errorf("Metadata %q: %w", k, err)
			}
		} else {
			var b bytes.Buffer
			if err := json.Compact(&b, v); err != nil {
				return nil, fmt.Errorf("Metadata %q: %w", k, err)
			}
			s = b.String()
		}
		meta[k] = s
	}
	return meta, nil
}
