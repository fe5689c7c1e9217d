package config

import (
	"fmt"
	"os"
)

// ReadFile reads a node's own configuration file the one way every
// command does (run, validate, a follower of Redis): parsed with its
// references expanded, TOLLGATE_* variables applied, defaults written in.
// Errors name path, line and column.
func ReadFile(path string, lookup func(string) (string, bool)) (*File, []byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("reading config: %w", err)
	}
	f, err := ReadBytes(path, data, lookup)
	return f, data, err
}

// ReadBytes is ReadFile for a configuration already in memory; name
// stands for its file in messages.
func ReadBytes(name string, data []byte, lookup func(string) (string, bool)) (*File, error) {
	f, err := Parse(name, data, lookup)
	if err != nil {
		return nil, err
	}
	if err := ApplyEnv(f, lookup); err != nil {
		return nil, &Error{File: name, Msg: "environment: " + err.Error()}
	}
	f.Defaults()
	return f, nil
}

// CheckNodeFile validates a node file that follows the configuration in
// Redis (config.source redis) as a starting node reads it, without
// connecting anywhere.
func CheckNodeFile(f *File, name string) error {
	if err := f.Config.validate(f); err != nil {
		return &Error{File: name, Line: f.configLine, Msg: err.Error()}
	}
	return nil
}
