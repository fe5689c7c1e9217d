package etcd

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/discovery"
)

func TestParseValue(t *testing.T) {
	t.Parallel()
	for value, want := range map[string]discovery.Instance{
		`{"Op":0,"Addr":"10.1.2.3:80"}`:                             {Addr: "10.1.2.3:80"},
		`{"Addr":"[::1]:80","Metadata":null}`:                       {Addr: "[::1]:80"},
		`{"Op":0,"Addr":"a.example:80","Metadata":{"weight":" 7"}}`: {Addr: "a.example:80", Weight: 7, Meta: map[string]string{"weight": " 7"}},
		`{"Op":0,"Addr":"a:80","Metadata":{"n":1.5,"o":{"x":[1, 2]},"z":null}}`: {
			Addr: "a:80", Meta: map[string]string{"n": "1.5", "o": `{"x":[1,2]}`, "z": "null"},
		},
		`{"Op":0,"Addr":"a:80","Metadata":42}`: {Addr: "a:80"},
	} {
		got, err := parseValue([]byte(value))
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %+v, %v; want %+v", value, got, err, want)
		}
	}
	if _, err := parseValue([]byte(`{"Op":1,"Addr":"a:80"}`)); !errors.Is(err, errRemoved) {
		t.Errorf("Op 1: %v, want errRemoved", err)
	}
	manyKeys := `{"Addr":"a:80","Metadata":{`
	for i := range maxMetaKeys + 1 {
		manyKeys += `"k` + strings.Repeat("x", i) + `":1,`
	}
	manyKeys = strings.TrimSuffix(manyKeys, ",") + `}}`
	for _, value := range []string{
		``, `null`, `{}`, `{"Addr":""}`, `{"Addr":"a"}`, `{"Addr":"a:99999"}`, `{"Addr":":80"}`,
		`{"Addr":"a b:80"}`, `{"Addr":"a:80","Op":2}`, `{"Addr":"a:80","Metadata":{"weight":1.5}}`,
		`{"Addr":"a:80","Metadata":{"weight":10001}}`, `{"Addr":"a:80","Metadata":{"weight":true}}`,
		`{"Addr":"a:80","Metadata":{"weight":"x"}}`, manyKeys,
		`{"Addr":"a:80","Metadata":{"pad":"` + strings.Repeat("p", maxValueBytes) + `"}}`,
	} {
		if got, err := parseValue([]byte(value)); err == nil || errors.Is(err, errRemoved) {
			t.Errorf("%.80s: accepted as %+v", value, got)
		}
	}
}

// A value is whatever a writer under the prefix put there: parseValue
// must never panic, and what it accepts is a dialable instance.
func FuzzParseValue(f *testing.F) {
	f.Add([]byte(`{"Op":0,"Addr":"10.1.2.3:80","Metadata":{"weight":3,"zone":"a"}}`))
	f.Add([]byte(`{"Op":1,"Addr":"a:80"}`))
	f.Add([]byte(`{"Addr":"[::1]:80","Metadata":{"weight":"7","x":[1,{"y":null}]}}`))
	f.Add([]byte(`{"Op":0,"Addr":`))
	f.Fuzz(func(t *testing.T, value []byte) {
		in, err := parseValue(value)
		if err != nil {
			return
		}
		if checkAddr(in.Addr) != nil || in.Weight < 0 || in.Weight > maxWeight || len(in.Meta) > maxMetaKeys {
			t.Fatalf("accepted %+v from %q", in, value)
		}
	})
}
