// Package anomaly watches every route's request rate, error share and
// latency for departures from what the route usually does, raises an
// alert when one holds (a log line, /metrics, the dashboard, a webhook)
// and says when it is over; where the configuration says so, a route's
// degraded answer is switched on while its alert holds.
//
// The figures are the metrics' counters, read every interval off the
// request path (nothing is added per request). A route's usual figure is
// an exponentially weighted mean with a weighted mean absolute deviation
// beside it (half-life half_life): it follows slow changes — the day's
// rise and fall moves a few percent per half-life — and a departure must
// be both several deviations away (sensitivity) and a large step (twice
// the usual rate; twice the usual p99 and 20 ms more; five points more
// errors), for confirm
// intervals in a row, so neither noise nor a slow trend raises one. While
// an alert holds the usual figure hardly moves (an eighth of its pace), so
// a surge does not become the norm before it ends, yet a lasting new
// level is taken in within hours. A route is watched once it has been
// seen for warmup, and only while it carries min_rate requests a second.
package anomaly
