// Package dubbo calls Dubbo providers over the Dubbo 2 protocol (the
// dubbo:// protocol of Dubbo 2.7 and 3.x) with hessian2 serialization, as
// generic invocations: $invoke(method, parameter types, arguments), the
// way Dubbo's own GenericService calls, so that no Java classes or
// generated code are needed. Arguments are written to Hessian straight
// from the request's JSON and text values (jsonin.go), and the answer is
// read from Hessian straight into JSON (hessiandec.go), with no value tree
// in between.
//
// A provider is reached over one multiplexed TCP connection (Instance):
// requests carry ids, answers are matched to them, a bounded number of
// calls is in flight at once (a call beyond it fails fast, as a full
// HTTP pool does), heartbeats go both ways, and a call waits no longer
// than the request's budget, which also travels to the provider as the
// timeout attachment.
//
// Each connection has one reader goroutine (and a heartbeat ticker). The
// HTTP pools use the event loop's connections instead, but those serve
// one exchange at a time each; a Dubbo connection carries every call to
// its provider at once and answers arrive in any order, so a reader per
// connection costs one goroutine per provider, not per request.
//
// The provider is not trusted: a frame's length is checked against a
// limit before anything is read, and the decoder bounds nesting, class
// definitions, references (and refuses cycles) and the JSON it writes.
package dubbo
