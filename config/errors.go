package config

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/tollgate/tollgate/pipeline"
	"gopkg.in/yaml.v3"
)

// maxShown bounds the errors one message lists: a file that is not a
// configuration at all must not print thousands of lines.
const maxShown = 20

// Errors are the problems found in one configuration file, in the order
// of the text: List holds the first ones, Total counts them all. Its
// message lists the first maxShown, one a line.
type Errors struct {
	List  []*Error
	Total int
}

func (es *Errors) Error() string {
	var b strings.Builder
	for i, e := range es.List {
		if i == maxShown {
			break
		}
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Error())
	}
	if shown := min(len(es.List), maxShown); es.Total > shown {
		fmt.Fprintf(&b, "\nand %d more", es.Total-shown)
	}
	return b.String()
}

// Unwrap lets errors.As find the first Error.
func (es *Errors) Unwrap() []error {
	out := make([]error, len(es.List))
	for i, e := range es.List {
		out[i] = e
	}
	return out
}

// problems gathers the errors of one file so that one pass reports them
// all. It keeps at most maxKept: past that it only counts, so a hostile
// file cannot make it hold a copy of itself.
type problems struct {
	name string
	list []*Error
	more int
}

const maxKept = 1000

func (p *problems) add(e *Error) {
	if e.File == "" {
		e.File = p.name
	}
	for _, seen := range p.list {
		if seen.Line == e.Line && seen.Col == e.Col && seen.Msg == e.Msg {
			return
		}
	}
	if len(p.list) >= maxKept {
		p.more++
		return
	}
	p.list = append(p.list, e)
}

// addDecode adds what decoding n reported, each problem at its place.
func (p *problems) addDecode(n *yaml.Node, err error) {
	for _, e := range decodeProblems(n, err) {
		p.add(e)
	}
}

// err is nil, the one Error, or all of them sorted by place.
func (p *problems) err() error {
	switch len(p.list) {
	case 0:
		return nil
	case 1:
		return p.list[0]
	}
	list := append([]*Error(nil), p.list...)
	sort.SliceStable(list, func(i, j int) bool {
		return list[i].Line < list[j].Line || list[i].Line == list[j].Line && list[i].Col < list[j].Col
	})
	return &Errors{List: list, Total: len(list) + p.more}
}

// decodeProblems turns the error of decoding n into Errors at their
// places, in the configuration's words (words.go): yaml's type errors,
// each at the value it names; an owner's placed error where it says;
// anything else at n.
func decodeProblems(n *yaml.Node, err error) []*Error {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		out := make([]*Error, 0, len(te.Errors))
		for _, msg := range te.Errors {
			out = append(out, typeProblem(n, msg))
		}
		return out
	}
	var placed *pipeline.PlacedError
	if errors.As(err, &placed) {
		return []*Error{{Line: placed.Line, Col: placed.Col, Msg: placed.Msg}}
	}
	var le *lineError
	if errors.As(err, &le) {
		return []*Error{{Line: le.line, Col: le.col, Msg: le.msg}}
	}
	var ce *Error
	if errors.As(err, &ce) {
		return []*Error{ce}
	}
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	return []*Error{{Line: n.Line, Col: n.Column, Msg: msg}}
}
