package cluster

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

// Script is a Lua script that features run on Redis: the protocol of a
// feature lives in its own package, and the Client only carries it. It is
// sent by its SHA-1 (EVALSHA) and, to a server that does not have it yet
// (a fresh, restarted or failed-over Redis), as text.
type Script struct {
	name   string // says what failed in logs and errors
	source string
	sha    string
}

// NewScript prepares source for RunScripts; name says what it does.
func NewScript(name, source string) *Script {
	s := sha1.Sum([]byte(source))
	return &Script{name: name, source: source, sha: hex.EncodeToString(s[:])}
}

// ScriptCall is one run of a Script. Every key of a call must hash to
// one slot on a Redis Cluster (share a hash tag: "{...}").
type ScriptCall struct {
	Keys []string
	Args []string
}

// ScriptReply is Redis's answer to one ScriptCall: the reply's elements
// as text (an integer in decimal, nil as ""), or one element for a reply
// that is not an array.
type ScriptReply struct {
	Values []string
	// Err is a Redis error reply for this call (the script failed), nil
	// when it was answered.
	Err error
}

// RunScripts runs calls of s in one pipelined round trip and fills out
// (len(calls)). It is for background work, never the request path: it
// returns ErrDegraded at once while degraded, and otherwise may take until
// ctx is done (or, against a silent server, about a second more: rueidis's
// own limit). A connection failure puts the Client in degraded mode and is
// returned; a script's error reply is kept in its ScriptReply and does not.
func (c *Client) RunScripts(ctx context.Context, s *Script, calls []ScriptCall, out []ScriptReply) error {
	if len(out) < len(calls) {
		return errors.New("cluster: RunScripts: out shorter than calls")
	}
	if len(calls) == 0 {
		return nil
	}
	rc, err := c.ready()
	if err != nil {
		return err
	}
	cmds := make(rueidis.Commands, len(calls))
	for i := range calls {
		cmds[i] = rc.B().Evalsha().Sha1(s.sha).Numkeys(int64(len(calls[i].Keys))).Key(calls[i].Keys...).Arg(calls[i].Args...).Build()
	}
	began := time.Now()
	res := rc.DoMulti(ctx, cmds...)
	c.scriptLat.observe(time.Since(began))
	c.nScripts.Add(uint64(len(cmds)))
	var again []int
	for i := range res {
		if re, ok := rueidis.IsRedisErr(res[i].Error()); ok && re.IsNoScript() {
			again = append(again, i)
			continue
		}
		if err := c.scriptReply(s, res[i], &out[i]); err != nil {
			return err
		}
	}
	if len(again) > 0 {
		cmds = cmds[:0]
		for _, i := range again {
			cmds = append(cmds, rc.B().Eval().Script(s.source).Numkeys(int64(len(calls[i].Keys))).Key(calls[i].Keys...).Arg(calls[i].Args...).Build())
		}
		res = rc.DoMulti(ctx, cmds...)
		c.nScripts.Add(uint64(len(cmds)))
		for j, i := range again {
			if err := c.scriptReply(s, res[j], &out[i]); err != nil {
				return err
			}
		}
	}
	c.answered.Store(time.Now().UnixNano())
	return nil
}

// scriptReply parses one reply into out; a connection failure is returned
// (and degrades the Client), a Redis error reply is kept in out.Err.
func (c *Client) scriptReply(s *Script, r rueidis.RedisResult, out *ScriptReply) error {
	*out = ScriptReply{}
	if err := r.Error(); err != nil {
		if _, ok := rueidis.IsRedisErr(err); ok {
			out.Err = fmt.Errorf("cluster: %s: %w", s.name, err)
			return nil
		}
		return c.writeErr(s.name, err)
	}
	msg, _ := r.ToMessage()
	if vs, err := msg.ToArray(); err == nil {
		out.Values = make([]string, len(vs))
		for i := range vs {
			out.Values[i] = messageText(&vs[i])
		}
		return nil
	}
	out.Values = []string{messageText(&msg)}
	return nil
}

// messageText is a scalar reply as text.
func messageText(m *rueidis.RedisMessage) string {
	if n, err := m.ToInt64(); err == nil {
		return strconv.FormatInt(n, 10)
	}
	s, _ := m.ToString()
	return s
}
