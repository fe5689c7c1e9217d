package config

import (
	"errors"
	"strings"
	"testing"
)

// The reactor's name before it was "reactor" keeps working, from the
// file and from the environment, and comes out as the one name: a reload
// from one spelling to the other is no change of transport.
func TestTransportNetpollIsTheReactor(t *testing.T) {
	for _, c := range []struct {
		name, src string
		env       map[string]string
	}{
		{"default", good, nil},
		{"file reactor", "transport: reactor\n" + good, nil},
		{"file netpoll", "transport: netpoll\n" + good, nil},
		{"env netpoll", good, map[string]string{"TOLLGATE_TRANSPORT": "netpoll"}},
		{"env reactor", "transport: fasthttp\n" + good, map[string]string{"TOLLGATE_TRANSPORT": "reactor"}},
	} {
		s, err := compile(t, c.src, env(c.env))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if s.File.Transport != TransportReactor {
			t.Errorf("%s: transport %q, want %q", c.name, s.File.Transport, TransportReactor)
		}
	}
}

// An unknown transport is refused naming its line, or the variable that
// set it.
func TestTransportUnknownNamesWhere(t *testing.T) {
	_, err := compile(t, "log_level: info\ntransport: epoll\n"+good, noEnv)
	var ce *Error
	if !errors.As(err, &ce) || ce.Line != 2 || !strings.Contains(ce.Msg, `transport "epoll"`) || !strings.Contains(ce.Msg, "reactor") {
		t.Fatalf("file: %v", err)
	}
	_, err = compile(t, "transport: fasthttp\n"+good, env(map[string]string{"TOLLGATE_TRANSPORT": "epoll"}))
	if !errors.As(err, &ce) || ce.Line != 0 || !strings.Contains(ce.Msg, `TOLLGATE_TRANSPORT "epoll"`) {
		t.Fatalf("environment: %v", err)
	}
}

// netpoll-dispatch, retired, is refused with what to use instead, naming
// its line.
func TestTransportNetpollDispatchRetired(t *testing.T) {
	_, err := compile(t, "log_level: info\n\ntransport: netpoll-dispatch\n"+good, noEnv)
	var ce *Error
	if !errors.As(err, &ce) || ce.Line != 3 || !strings.Contains(ce.Msg, "retired") || !strings.Contains(ce.Msg, `use "reactor"`) {
		t.Fatalf("file: %v", err)
	}
	_, err = compile(t, good, env(map[string]string{"TOLLGATE_TRANSPORT": "netpoll-dispatch"}))
	if !errors.As(err, &ce) || ce.Line != 0 || !strings.Contains(ce.Msg, "TOLLGATE_TRANSPORT") || !strings.Contains(ce.Msg, "retired") {
		t.Fatalf("environment: %v", err)
	}
}
