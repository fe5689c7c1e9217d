-- POSTs one small JSON order (bench/grpc.sh): the same body to the plain
-- route and to the transcoded one.
wrk.method = "POST"
wrk.body = '{"sku":"abc","quantity":2,"customerId":"c-1"}'
wrk.headers["Content-Type"] = "application/json"
