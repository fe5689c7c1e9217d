// Package record keeps what passes through the gateway for later use: a
// route's record rule writes sampled request/answer pairs, secrets masked,
// to rotating JSONL files (Writer, Entry). It sits at pipeline.StageRecord
// (beside package mirror, which sends live copies to a second service) and
// never holds up a request: it copies into pooled buffers and hands off to
// a bounded queue that drops and counts what does not fit. Package
// record/replay sends recorded requests to another environment and
// compares the answers.
package record
