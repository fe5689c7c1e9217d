package hpackenc

// Table encodes a connection's recurring fields with HPACK's dynamic
// table: a field is entered once (a literal with incremental indexing)
// and named by its index after, a byte or two. Nothing is ever evicted:
// a field that would overflow the table is written as a literal not
// entered instead, so the encoder never has to follow the decoder's
// evictions. Blocks must reach the decoder in the order they were
// encoded (they change its table); a caller that cannot promise that
// uses AppendField.
//
// Only fields whose name and value last as long as the connection go in
// (a method's path, the authority): the table keeps the strings.
type Table struct {
	limit   int // the size the decoder allows, 4096 until it says otherwise
	size    int
	fields  []tableKey // in the order they were entered
	pos     map[tableKey]int
	names   map[string]int // a name's latest entry
	gen     int            // changes whenever the indices of entries change
	resized bool           // a size update is owed at the next block's start
}

type tableKey struct{ name, value string }

// defaultTableSize is HPACK's dynamic table size until the decoder's
// SETTINGS_HEADER_TABLE_SIZE says otherwise (RFC 9113 §6.5.2).
const defaultTableSize = 4096

// SetLimit applies the decoder's SETTINGS_HEADER_TABLE_SIZE (the table
// is kept to 4096 bytes even where more is allowed). The next block says
// the new size; a size below what the table holds empties it first.
func (t *Table) SetLimit(n uint32) {
	t.init()
	limit := int(min(n, defaultTableSize))
	if limit == t.limit {
		return
	}
	if limit < t.size {
		t.fields, t.size = t.fields[:0], 0
		clear(t.pos)
		clear(t.names)
		t.gen++
	}
	t.limit, t.resized = limit, true
}

func (t *Table) init() {
	if t.pos == nil {
		t.pos = map[tableKey]int{}
		t.names = map[string]int{}
		t.limit = defaultTableSize
	}
}

// Gen changes whenever an entry's index does: blocks encoded under
// another gen name other entries.
func (t *Table) Gen() int { return t.gen }

// BeginBlock appends what a header block must start with: the table's
// new size, after the decoder lowered it.
func (t *Table) BeginBlock(dst []byte) []byte {
	if !t.resized {
		return dst
	}
	t.resized = false
	if t.size == 0 {
		// Emptied (or never filled): the decoder evicts what it held.
		dst = appendInt(dst, 5, 0x20, 0)
	}
	return appendInt(dst, 5, 0x20, uint64(t.limit))
}

// AppendField appends name (lower case) and value: by index once entered,
// entered when there is room, else as a literal not entered.
func (t *Table) AppendField(dst []byte, name, value string) []byte {
	t.init()
	if p, ok := t.pos[tableKey{name, value}]; ok {
		return appendInt(dst, 7, 0x80, uint64(t.index(p)))
	}
	return t.appendLiteral(dst, name, value, t.enter(name, value))
}

// AppendVaryingField appends a field whose value may change from block
// to block (a request's X-Request-Id): by index when the value is the one
// entered, else its name by index (entered with the first value seen)
// and its value as a literal. name is lower case; neither slice is kept.
func (t *Table) AppendVaryingField(dst, name, value []byte) []byte {
	t.init()
	n, v := bytesString(name), bytesString(value)
	if p, ok := t.pos[tableKey{n, v}]; ok {
		return appendInt(dst, 7, 0x80, uint64(t.index(p)))
	}
	if p, ok := t.names[n]; ok {
		dst = appendInt(dst, 4, 0x00, uint64(t.index(p)))
		return append(appendInt(dst, 7, 0x00, uint64(len(value))), value...)
	}
	if _, static := staticNames[n]; static || !t.fits(n, v) {
		// A static name is named by its index anyway.
		return t.appendLiteral(dst, n, v, false)
	}
	n, v = string(name), string(value) // kept by the table
	return t.appendLiteral(dst, n, v, t.enter(n, v))
}

// index is the HPACK index of the entry entered p-th.
func (t *Table) index(p int) int { return 62 + len(t.fields) - 1 - p }

func (t *Table) fits(name, value string) bool {
	return t.size+len(name)+len(value)+32 <= t.limit
}

// enter enters the field when it fits, and reports whether it did.
func (t *Table) enter(name, value string) bool {
	if !t.fits(name, value) {
		return false
	}
	k := tableKey{name, value}
	t.pos[k] = len(t.fields)
	t.names[name] = len(t.fields)
	t.fields = append(t.fields, k)
	t.size += len(name) + len(value) + 32
	t.gen++
	return true
}

// appendLiteral appends a literal field, entered in the decoder's table
// or not.
func (t *Table) appendLiteral(dst []byte, name, value string, entered bool) []byte {
	first, prefix := byte(0x00), uint(4) // without indexing
	if entered {
		first, prefix = 0x40, 6 // with incremental indexing
	}
	if i, ok := staticNames[name]; ok {
		dst = appendInt(dst, prefix, first, uint64(i))
	} else {
		dst = append(dst, first)
		dst = append(appendInt(dst, 7, 0x00, uint64(len(name))), name...)
	}
	return append(appendInt(dst, 7, 0x00, uint64(len(value))), value...)
}
