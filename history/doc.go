// Package history keeps each route's traffic over the last days, minute
// by minute summed into hours, so that limits can be set from what routes
// really carried (`tollgate limits suggest`) instead of guessed.
//
// Once a minute the Recorder reads every route's request count from the
// metrics the gateway keeps anyway (no cost on the request path) and
// hands the minute's counts to the node's Local store (hours in memory,
// DefaultKeep of them) and, on a cluster, to Redis: each node adds its
// counts to the minute's hash, and the first node to write minute M sums
// minute M-2 — by then every node has written it — into the hour's
// hash: per route the requests of the hour and its busiest minute (the
// cluster's, not a node's). A minute's hash lives two hours, an hour's
// eight days; per route an hour costs three hash fields.
//
// What a minute hides: a route's busiest minute gives its average rate in
// that minute; bursts inside the minute are faster, which is why a
// suggested limit adds headroom and a burst above the rate.
package history
