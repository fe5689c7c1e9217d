// Package record keeps what passes through the gateway for later use: a
// route's record rule writes sampled request/answer pairs, secrets masked,
// to rotating JSONL files (Writer, Entry), and its mirror rule sends a copy
// of live requests to a second service. Both sit at pipeline.StageRecord
// and never hold up a request: they copy into pooled buffers and hand off
// to bounded queues that drop and count what does not fit. Package
// record/replay sends recorded requests to another environment and
// compares the answers.
package record
