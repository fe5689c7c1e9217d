-- POSTs one small JSON query (bench/dubbo.sh): the same body to the plain
-- route and to the Dubbo one (com.shop.OrderQuery, generic invocation).
wrk.method = "POST"
wrk.body = '{"customer":"ann","items":["book","pen","lamp"],"limit":4}'
wrk.headers["Content-Type"] = "application/json"
