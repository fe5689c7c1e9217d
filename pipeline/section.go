package pipeline

import (
	"fmt"
	"slices"
	"sync"
)

// Section is a top-level section of the configuration (`status:`,
// later `consumers:`, `discovery:`, …) owned by the package that builds
// what it describes. The package registers it once, from init, as it
// registers a feature; the config package finds the section's node,
// decodes it into the section's own type (an unknown field is an error
// with its line), and calls Provision, which validates it and shares what
// it builds through typed keys (Key) for the features to use. config
// knows no section.
type Section struct {
	// Key is the section's top-level name.
	Key string
	// After names the sections whose shared objects Provision reads:
	// they are provisioned first. A name no package of the binary
	// registered is passed over: its owner is not linked in, so it
	// shares nothing to wait for.
	After []string
	// RestartOnly says the running gateway takes the section once, at
	// start (a listener it sets up): a reload that changes it is applied
	// except for the section, and says so. Changes are told by
	// the Digest of the provisioned config.
	RestartOnly bool
	// Config returns a pointer to a new, empty value of the section's own
	// type. A file without the section is provisioned with it as it is,
	// so Provision writes the defaults in.
	Config func() any
	// Entries, for a section whose keys are plug-ins of the owner's
	// (discovery's providers, collected by an inline map of its type),
	// returns, by key, a new, empty value of each entry's type: the
	// configuration checks an entry's keys against it and finds its
	// secret fields in it. nil for a section without such keys.
	Entries func() map[string]any
	// Provision validates cfg, writes its defaults in (what the admin
	// API shows as the effective configuration) and sets what it builds
	// in env. An error names the problem; config adds the file and line.
	Provision func(env *Env, cfg any) error
}

var sections = struct {
	sync.RWMutex
	byKey map[string]Section
}{byKey: map[string]Section{}}

// RegisterSection adds a section. It is meant for init functions, and
// panics on a duplicate or malformed registration, a programming error.
func RegisterSection(s Section) {
	if s.Key == "" || s.Config == nil || s.Provision == nil {
		panic("pipeline: RegisterSection needs a key, a Config and a Provision")
	}
	if _, ok := Lookup(s.Key); ok {
		panic(fmt.Sprintf("pipeline: section %q is also a feature", s.Key))
	}
	sections.Lock()
	defer sections.Unlock()
	if _, dup := sections.byKey[s.Key]; dup {
		panic(fmt.Sprintf("pipeline: section %q registered twice", s.Key))
	}
	sections.byKey[s.Key] = s
}

// LookupSection returns the section registered under key.
func LookupSection(key string) (Section, bool) {
	sections.RLock()
	defer sections.RUnlock()
	s, ok := sections.byKey[key]
	return s, ok
}

// Sections returns every registered section in the order they are
// provisioned: each after those it names in After, otherwise by key. A
// cycle is a programming error, and it panics.
func Sections() []Section {
	sections.RLock()
	byKey := make(map[string]Section, len(sections.byKey))
	for k, s := range sections.byKey {
		byKey[k] = s
	}
	sections.RUnlock()
	return provisionOrder(byKey)
}

// provisionOrder orders sections: each after those it names in After,
// otherwise by key.
func provisionOrder(byKey map[string]Section) []Section {
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]Section, 0, len(keys))
	state := map[string]int{} // 1: on the way, 2: placed
	var place func(key, from string)
	place = func(key, from string) {
		s, ok := byKey[key]
		switch {
		case !ok:
			return // not linked into this binary (see Section.After)
		case state[key] == 1:
			panic(fmt.Sprintf("pipeline: sections %q and %q each come after the other", from, key))
		case state[key] == 2:
			return
		}
		state[key] = 1
		after := slices.Clone(s.After)
		slices.Sort(after)
		for _, a := range after {
			place(a, key)
		}
		state[key] = 2
		out = append(out, s)
	}
	for _, k := range keys {
		place(k, "")
	}
	return out
}
