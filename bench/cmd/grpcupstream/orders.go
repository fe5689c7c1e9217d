package main

import (
	"errors"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// The order service of internal/testutil/grpcorders, answered from the
// wire format without building messages: the lean engine's calls.

// gRPC status codes the service answers with.
const (
	codeOK               = 0
	codeDeadlineExceeded = 4
	codeInvalidArgument  = 3
	codeNotFound         = 5
	codeResourceExhaust  = 8
	codeUnimplemented    = 12
	codeInternal         = 13
	codeUnavailable      = 14
)

// orderCall is what a call comes to: a reply message (code OK), or a
// status; hang holds the answer until the call is cancelled, delay sends
// it later.
type orderCall struct {
	code    int
	message string
	reply   []byte
	trace   string // the x-order-trace trailer, "" for none
	hang    bool
	delay   time.Duration
}

var errMalformed = errors.New("malformed message")

// serveOrders answers the call to path with request msg, appending the
// reply to buf (returned in call.reply); r is reused from call to call.
func serveOrders(path string, msg, buf []byte, r *createRequest) orderCall {
	switch path {
	case "/shop.v1.Orders/Create":
		return createOrder(msg, buf, r)
	case "/shop.v1.Orders/Get":
		return getOrder(msg, buf)
	}
	if len(path) > len("/shop.v1.Orders/") && path[:len("/shop.v1.Orders/")] == "/shop.v1.Orders/" {
		return orderCall{code: codeUnimplemented, message: "unknown method " + path[len("/shop.v1.Orders/"):] + " for service shop.v1.Orders"}
	}
	service := path
	if i := lastSlash(path); i > 0 {
		service = path[1:i]
	}
	return orderCall{code: codeUnimplemented, message: "unknown service " + service}
}

func lastSlash(s string) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '/' {
			return i
		}
	}
	return -1
}

// createRequest is a CreateOrderRequest as views into its message.
type createRequest struct {
	sku, customerID []byte
	quantity        int32
	notes, tags     [][]byte // notes: a map entry's bytes each
}

// createOrder answers Create as grpcorders does.
func createOrder(msg, buf []byte, r *createRequest) orderCall {
	*r = createRequest{notes: r.notes[:0], tags: r.tags[:0]}
	if err := r.read(msg); err != nil {
		return orderCall{code: codeInternal, message: "grpc: error unmarshalling request: " + err.Error()}
	}
	call := orderCall{trace: "t-Create"}
	switch string(r.sku) {
	case "missing":
		call.code, call.message = codeNotFound, "no such sku"
		return call
	case "boom":
		call.code, call.message = codeInternal, "inventory exploded"
		return call
	case "busy":
		call.code, call.message = codeUnavailable, "try later"
		return call
	case "hang":
		call.hang = true
		return call
	case "slow":
		call.delay = 300 * time.Millisecond
	}
	if r.quantity < 1 {
		call.code, call.message = codeInvalidArgument, "quantity must be at least 1"
		return call
	}
	b := protowire.AppendTag(buf[:0], 1, protowire.BytesType) // id: "o-" and the sku
	b = protowire.AppendVarint(b, uint64(len(r.sku)+2))
	b = append(b, "o-"...)
	b = append(b, r.sku...)
	b = appendBytes(b, 2, r.sku)
	b = appendVarint(b, 3, uint64(int64(r.quantity)))
	b = appendBytes(b, 4, r.customerID)
	b = appendString(b, 5, "created")
	b = appendVarint(b, 6, uint64(int64(r.quantity)*1250))
	for _, entry := range r.notes {
		key, value, err := mapEntry(entry)
		if err != nil {
			return orderCall{code: codeInternal, message: "grpc: error unmarshalling request: " + err.Error()}
		}
		b = protowire.AppendTag(b, 7, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(protowire.SizeTag(1)*2+protowire.SizeBytes(len(key))+protowire.SizeBytes(len(value))))
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendBytes(b, key)
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(len(value)))
		for _, c := range value {
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			b = append(b, c)
		}
	}
	for _, tag := range r.tags {
		b = protowire.AppendTag(b, 8, protowire.BytesType)
		b = protowire.AppendBytes(b, tag)
	}
	call.reply = b
	return call
}

// read takes the request's fields; an unknown field is skipped, as
// protobuf does.
func (r *createRequest) read(b []byte) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return errMalformed
		}
		b = b[n:]
		switch {
		case typ == protowire.BytesType && (num == 1 || num == 3 || num == 4 || num == 5):
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return errMalformed
			}
			b = b[n:]
			switch num {
			case 1:
				r.sku = v
			case 3:
				r.customerID = v
			case 4:
				r.notes = append(r.notes, v)
			case 5:
				r.tags = append(r.tags, v)
			}
		case typ == protowire.VarintType && num == 2:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return errMalformed
			}
			b = b[n:]
			r.quantity = int32(v)
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return errMalformed
			}
			b = b[n:]
		}
	}
	return nil
}

// mapEntry reads a map<string, string> entry.
func mapEntry(b []byte) (key, value []byte, err error) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, nil, errMalformed
		}
		b = b[n:]
		if typ != protowire.BytesType || (num != 1 && num != 2) {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return nil, nil, errMalformed
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return nil, nil, errMalformed
		}
		b = b[n:]
		if num == 1 {
			key = v
		} else {
			value = v
		}
	}
	return key, value, nil
}

// getOrder answers Get as grpcorders does.
func getOrder(msg, buf []byte) orderCall {
	var id []byte
	var withItems bool
	var limit int32
	for b := msg; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return orderCall{code: codeInternal, message: "grpc: error unmarshalling request: " + errMalformed.Error()}
		}
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.BytesType:
			id, n = protowire.ConsumeBytes(b)
		case (num == 2 || num == 3) && typ == protowire.VarintType:
			var v uint64
			v, n = protowire.ConsumeVarint(b)
			if num == 2 {
				withItems = v != 0
			} else {
				limit = int32(v)
			}
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return orderCall{code: codeInternal, message: "grpc: error unmarshalling request: " + errMalformed.Error()}
		}
		b = b[n:]
	}
	call := orderCall{trace: "t-Get"}
	if string(id) == "missing" {
		call.code, call.message = codeNotFound, "no order missing"
		return call
	}
	b := appendBytes(buf[:0], 1, id)
	if withItems {
		b = appendVarint(b, 3, uint64(int64(limit)))
	}
	b = appendString(b, 5, "shipped")
	call.reply = b
	return call
}

// appendBytes, appendString and appendVarint append a field unless it
// holds its zero value (proto3 leaves those out).
func appendBytes(b []byte, num protowire.Number, v []byte) []byte {
	if len(v) == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

func appendString(b []byte, num protowire.Number, v string) []byte {
	if v == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, v)
}

func appendVarint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}
