package tiered

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/hermod/hermod/services/responses/internal/store"
)

func TestValueRoundTrip(t *testing.T) {
	v := &value{Record: *rec("resp_1", "resp_0", "data\x00bytes"), MongoExpires: time.UnixMilli(1_800_000_000_000)}
	v.Revision = 0xfeedface00c0ffee
	got, err := decodeValue(encodeValue(v))
	if err != nil || got.ID != v.ID || got.Revision != v.Revision || got.PreviousID != v.PreviousID || !got.CreatedAt.Equal(v.CreatedAt) || !got.MongoExpires.Equal(v.MongoExpires) || !bytes.Equal(got.Data, v.Data) {
		t.Fatalf("%+v %v", got, err)
	}
	// a version 1 value (written before revisions): revision 0
	v1 := append([]byte{valueVersionV1}, encodeValue(v)[9:]...)
	if got, err := decodeValue(v1); err != nil || got.Revision != 0 || got.ID != v.ID || !bytes.Equal(got.Data, v.Data) {
		t.Fatalf("version 1: %+v %v", got, err)
	}
	if _, err := decodeValue([]byte(tombstone)); !errors.Is(err, errTombstone) {
		t.Fatalf("tombstone: %v", err)
	}
}

func FuzzDecodeValue(f *testing.F) {
	f.Add(encodeValue(&value{Record: *rec("resp_1", "resp_0", "hello")}))
	f.Add(encodeValue(&value{Record: *rec("r", "", ""), MongoExpires: time.UnixMilli(5)}))
	f.Add([]byte{1, 200, 1})
	f.Add([]byte{2, 0, 0, 0, 0, 0, 0, 0, 7, 1, 'r', 0, 2, 2})
	f.Add([]byte{0})
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := decodeValue(b)
		if err != nil {
			return
		}
		again, err := decodeValue(encodeValue(v))
		if err != nil || again.ID != v.ID || again.PreviousID != v.PreviousID || again.Revision != v.Revision || !bytes.Equal(again.Data, v.Data) {
			t.Fatalf("re-encoded value differs: %+v %+v %v", v, again, err)
		}
	})
}

func FuzzDecodeEntry(f *testing.F) {
	f.Add("put", "resp_1", string(encodeValue(&value{Record: *rec("resp_1", "", "x")})))
	f.Add("delete", "resp_2", "")
	f.Add("swap", "conv_1", string(encodeValue(&value{Record: store.Record{ID: "conv_1", Data: []byte("items"), Revision: 9}})))
	f.Add("put", "resp_3", string(encodeValue(&value{Record: *rec("resp_4", "", "x")})))
	f.Fuzz(func(t *testing.T, opName, id, v string) {
		o, err := decodeEntry(map[string]string{"op": opName, "id": id, "v": v})
		if err != nil {
			return
		}
		if o.id != id || (!o.delete && o.v.ID != id) {
			t.Fatalf("entry for %q decoded as %+v", id, o)
		}
	})
}
