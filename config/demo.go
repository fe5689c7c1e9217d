package config

// Demo is the configuration `tollgate run` uses when it is given no file:
// one route to a demo upstream the command serves in-process, so a new user
// can curl the gateway at once. ${TOLLGATE_DEMO_UPSTREAM} is that upstream's
// address.
const Demo = `# Tollgate's built-in demo configuration.
listen: ":8080"
access_log: {path: stdout}
services:
  demo:
    instances:
      - {addr: "${TOLLGATE_DEMO_UPSTREAM}"}
    timeouts: {connect: 1s, read: 3s, total: 5s}
routes:
  - name: demo
    match: {prefix: /demo/}
    service: demo
not_found: {status: 404, body: '{"code":404,"message":"no route; try /demo/echo"}'}
`
