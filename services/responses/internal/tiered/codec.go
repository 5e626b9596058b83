package tiered

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/hermod/hermod/services/responses/internal/store"
)

// The value format of a record in Redis/Valkey and in the sync stream:
//
//	version byte (2)
//	the revision, 8 bytes big-endian (at a fixed place, where the swap
//	script compares it)
//	uvarint len + id, uvarint len + previous id
//	varint created-at (Unix ms), varint tier-2 expiry (Unix ms; 0: none)
//	the data (the rest)
//
// A tombstone (a deleted record whose deletion tier 2 has not applied
// yet) is the single byte 0. Version 1 is version 2 without the revision
// (read as revision 0).
const (
	valueVersion   = 2
	valueVersionV1 = 1
	tombstone      = "\x00"
)

// value is a record with the time tier 2 lets it go.
type value struct {
	store.Record
	MongoExpires time.Time
}

func encodeValue(v *value) []byte {
	b := make([]byte, 0, 1+2*binary.MaxVarintLen64+len(v.ID)+len(v.PreviousID)+2*binary.MaxVarintLen64+len(v.Data))
	b = append(b, valueVersion)
	b = binary.BigEndian.AppendUint64(b, v.Revision)
	b = binary.AppendUvarint(b, uint64(len(v.ID)))
	b = append(b, v.ID...)
	b = binary.AppendUvarint(b, uint64(len(v.PreviousID)))
	b = append(b, v.PreviousID...)
	b = binary.AppendVarint(b, v.CreatedAt.UnixMilli())
	var exp int64
	if !v.MongoExpires.IsZero() {
		exp = v.MongoExpires.UnixMilli()
	}
	b = binary.AppendVarint(b, exp)
	return append(b, v.Data...)
}

var errTombstone = errors.New("tombstone")

func decodeValue(b []byte) (*value, error) {
	if string(b) == tombstone {
		return nil, errTombstone
	}
	var rev uint64
	switch {
	case len(b) > 0 && b[0] == valueVersionV1:
		b = b[1:]
	case len(b) >= 9 && b[0] == valueVersion:
		rev, b = binary.BigEndian.Uint64(b[1:9]), b[9:]
	default:
		return nil, fmt.Errorf("stored value: unknown version (%d bytes)", len(b))
	}
	id, b, err := readString(b, "id")
	if err != nil {
		return nil, err
	}
	prev, b, err := readString(b, "previous id")
	if err != nil {
		return nil, err
	}
	created, n := binary.Varint(b)
	if n <= 0 {
		return nil, errors.New("stored value: bad created-at")
	}
	b = b[n:]
	exp, n := binary.Varint(b)
	if n <= 0 {
		return nil, errors.New("stored value: bad expiry")
	}
	b = b[n:]
	v := &value{Record: store.Record{ID: id, PreviousID: prev, CreatedAt: time.UnixMilli(created), Data: append([]byte(nil), b...), Revision: rev}}
	if exp != 0 {
		v.MongoExpires = time.UnixMilli(exp)
	}
	return v, nil
}

func readString(b []byte, what string) (string, []byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return "", nil, fmt.Errorf("stored value: bad %s length", what)
	}
	return string(b[k : k+int(n)]), b[k+int(n):], nil
}
