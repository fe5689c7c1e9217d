package trace

// headerRequestID is the request id's field, on the way in, upstream and
// back to the client.
const headerRequestID = "X-Request-Id"

// maxRequestID is the longest request id kept from a client.
const maxRequestID = 64

// validRequestID accepts ids a log line and a header can carry verbatim.
func validRequestID(id []byte) bool {
	if len(id) == 0 || len(id) > maxRequestID {
		return false
	}
	for _, b := range id {
		switch {
		case b >= '0' && b <= '9', b >= 'a' && b <= 'z', b >= 'A' && b <= 'Z', b == '-', b == '_', b == '.', b == ':':
		default:
			return false
		}
	}
	return true
}
