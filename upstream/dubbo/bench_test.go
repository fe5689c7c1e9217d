package dubbo

import "testing"

// orderAnswer is an answer body as dubbo-go's generic service writes one:
// a value with attachments, the POJO generalized to a map.
func orderAnswer() []byte {
	b := appendInt(nil, respValueAttachments)
	b = append(b, mapStart)
	for _, kv := range [][2]string{{"class", "com.shop.Order"}, {"id", "ann-4"}, {"customer", "ann"}} {
		b = appendStr(b, kv[0])
		b = appendStr(b, kv[1])
	}
	b = appendStr(b, "total")
	b = appendDouble(b, 6.75)
	b = appendStr(b, "items")
	b = append(b, listStart)
	for _, it := range []string{"book", "pen", "lamp"} {
		b = appendStr(b, it)
	}
	b = append(b, endMark)
	b = appendStr(b, "paid")
	b = appendBool(b, false)
	b = append(b, endMark)
	b = append(b, mapStart)
	b = appendStr(b, "dubbo")
	b = appendStr(b, "2.0.2")
	return append(b, endMark)
}

// BenchmarkConvert is the gateway's conversion work per call: the JSON
// body to a generic invocation frame (POJO argument, attachments) and the
// provider's Hessian answer back to JSON.
func BenchmarkConvert(b *testing.B) {
	p, _ := NewParam("com.shop.OrderQuery")
	tg, err := NewTarget("com.shop.OrderService", "1.0.0", "g1", "findOrders", []Param{p})
	if err != nil {
		b.Fatal(err)
	}
	body := []byte(`{"customer":"ann","items":["book","pen","lamp"],"limit":4}`)
	answer := orderAnswer()
	var c Call
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		c.Begin(tg)
		if c.Frame, err = p.AppendJSON(c.Frame, body); err != nil {
			b.Fatal(err)
		}
		c.Attachments(tg)
		c.Attach("consumer", "demo-app")
		c.AttachBytes("traceparent", []byte("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"))
		c.seal(500)
		if err := c.decodeAnswer(StatusOK, answer); err != nil {
			b.Fatal(err)
		}
	}
	if string(c.Result) != `{"class":"com.shop.Order","id":"ann-4","customer":"ann","total":6.75,"items":["book","pen","lamp"],"paid":false}` {
		b.Fatalf("answer %s", c.Result)
	}
}
