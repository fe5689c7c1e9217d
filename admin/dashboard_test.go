package admin

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cluster"
	"github.com/tollgate/tollgate/internal/testutil"
	"github.com/tollgate/tollgate/observe"
	"github.com/tollgate/tollgate/pipeline"
	"github.com/valyala/fasthttp"
)

// liveView is the part of GET /admin/live these tests read.
type liveView struct {
	Totals struct {
		QPS float64 `json:"qps"`
	} `json:"totals"`
	ClusterLoad struct {
		QPS    float64 `json:"qps"`
		R5xx   float64 `json:"r5xx"`
		Source string  `json:"source"`
		Error  string  `json:"error"`
		Nodes  []struct {
			Node  string  `json:"node"`
			QPS   float64 `json:"qps"`
			R5xx  float64 `json:"r5xx"`
			AgeMS int64   `json:"age_ms"`
			Self  bool    `json:"self"`
		} `json:"nodes"`
	} `json:"cluster_load"`
}

func readLive(t *testing.T, base string) liveView {
	t.Helper()
	st, body := do(t, "GET", base+"/admin/live", "")
	if st != 200 {
		t.Fatalf("live: %d %s", st, body)
	}
	var v liveView
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// observeRequests counts n answers with status on route r.
func observeRequests(m *observe.Metrics, n, status int) {
	var req fasthttp.Request
	var resp fasthttp.Response
	for range n {
		resp.SetStatusCode(status)
		c := pipeline.Acquire(&req, &resp)
		c.RouteName = "r"
		c.Start = time.Now()
		m.Observe(c, c.Start.Add(time.Millisecond))
		pipeline.Release(c)
	}
}

// TestLiveClusterFigures: two other nodes report their rates through a
// real Redis with their heartbeats; this node's dashboard shows each of
// them, itself with its live figures, and the sum. A node that stops is
// no longer counted; with Redis away the figures are this node's alone.
func TestLiveClusterFigures(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server and waits for figures")
	}
	r := testutil.StartRedis(t)
	const every = 100 * time.Millisecond
	start := time.Now()
	member := func(id string, qps, r5xx float64) *cluster.Client {
		c, err := cluster.New(cluster.Options{Addrs: []string{r.Addr}, NodeID: id})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		c.ReportCounts(func() cluster.Counts {
			secs := time.Since(start).Seconds()
			return cluster.Counts{Requests: uint64(qps * secs), C5xx: uint64(r5xx * secs)}
		})
		c.Heartbeat("", every)
		return c
	}
	// This node reports 7777/s with its heartbeats, but its dashboard
	// uses the figures it computes itself.
	self := member("n1", 7777, 0)
	member("node-b", 10000, 1000)
	nodeC := member("node-c", 5000, 0)

	m := observe.NewMetrics()
	m.SetRoutes([]string{"r"}, nil)
	d := opsDeps("", m, nil) // node id n1
	d.Ops.NodeLoads = self.NodeLoads
	base := serveAdmin(t, d)
	near := func(got, want float64) bool { return math.Abs(got-want) <= 0.01*want+25 }
	var v liveView
	deadline := time.Now().Add(5 * time.Second)
	for {
		observeRequests(m, 300, 200)
		time.Sleep(600 * time.Millisecond) // past the shared computation
		v = readLive(t, base)
		c := v.ClusterLoad
		if len(c.Nodes) == 3 && v.Totals.QPS > 0 && near(c.Nodes[1].QPS, 10000) && near(c.Nodes[2].QPS, 5000) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster figures not shown: %+v", v)
		}
	}
	c := v.ClusterLoad
	if c.Source != "redis" || !c.Nodes[0].Self || c.Nodes[0].Node != "n1" || c.Nodes[0].QPS != v.Totals.QPS {
		t.Fatalf("this node's entry %+v, totals %+v", c, v.Totals)
	}
	if c.Nodes[1].Node != "node-b" || c.Nodes[2].Node != "node-c" || !near(c.Nodes[1].R5xx, 1000) || c.Nodes[1].AgeMS > 3*every.Milliseconds() {
		t.Fatalf("other nodes %+v", c.Nodes)
	}
	if sum := v.Totals.QPS + c.Nodes[1].QPS + c.Nodes[2].QPS; math.Abs(c.QPS-sum) > 0.01 || !near(c.R5xx, 1000) {
		t.Fatalf("cluster qps %v, want the sum %v (5xx %v)", c.QPS, sum, c.R5xx)
	}
	t.Logf("cluster %.0f req/s: this node %.0f, node-b %.0f, node-c %.0f", c.QPS, c.Nodes[0].QPS, c.Nodes[1].QPS, c.Nodes[2].QPS)

	nodeC.Close()
	time.Sleep(600 * time.Millisecond)
	if v = readLive(t, base); len(v.ClusterLoad.Nodes) != 2 || v.ClusterLoad.Nodes[1].Node != "node-b" {
		t.Fatalf("after node-c left: %+v", v.ClusterLoad.Nodes)
	}

	r.Freeze()
	deadline = time.Now().Add(3 * time.Second)
	for self.Healthy() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(600 * time.Millisecond)
	v = readLive(t, base)
	if c := v.ClusterLoad; c.Source != "node" || c.Error == "" || len(c.Nodes) != 1 || c.QPS != v.Totals.QPS {
		t.Fatalf("with Redis away: %+v", c)
	}
	r.Thaw()
}

// TestLiveClusterFiguresStandalone: without Redis the cluster's figures
// are this node's.
func TestLiveClusterFiguresStandalone(t *testing.T) {
	m := observe.NewMetrics()
	m.SetRoutes([]string{"r"}, nil)
	base := serveAdmin(t, opsDeps("", m, nil))
	readLive(t, base)
	observeRequests(m, 500, 200)
	time.Sleep(600 * time.Millisecond)
	v := readLive(t, base)
	c := v.ClusterLoad
	if v.Totals.QPS < 100 || c.QPS != v.Totals.QPS || c.Source != "node" || c.Error != "" || len(c.Nodes) != 1 || c.Nodes[0].Node != "n1" || !c.Nodes[0].Self {
		t.Fatalf("standalone: totals %+v, cluster %+v", v.Totals, c)
	}
}
