package tiered

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

func TestValueRoundTrip(t *testing.T) {
	v := &value{Record: *rec("resp_1", "resp_0", "data\x00bytes"), MongoExpires: time.UnixMilli(1_800_000_000_000)}
	got, err := decodeValue(encodeValue(v))
	if err != nil || got.ID != v.ID || got.PreviousID != v.PreviousID || !got.CreatedAt.Equal(v.CreatedAt) || !got.MongoExpires.Equal(v.MongoExpires) || !bytes.Equal(got.Data, v.Data) {
		t.Fatalf("%+v %v", got, err)
	}
	if _, err := decodeValue([]byte(tombstone)); !errors.Is(err, errTombstone) {
		t.Fatalf("tombstone: %v", err)
	}
}

func FuzzDecodeValue(f *testing.F) {
	f.Add(encodeValue(&value{Record: *rec("resp_1", "resp_0", "hello")}))
	f.Add(encodeValue(&value{Record: *rec("r", "", ""), MongoExpires: time.UnixMilli(5)}))
	f.Add([]byte{1, 200, 1})
	f.Add([]byte{0})
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := decodeValue(b)
		if err != nil {
			return
		}
		again, err := decodeValue(encodeValue(v))
		if err != nil || again.ID != v.ID || again.PreviousID != v.PreviousID || !bytes.Equal(again.Data, v.Data) {
			t.Fatalf("re-encoded value differs: %+v %+v %v", v, again, err)
		}
	})
}

func FuzzDecodeEntry(f *testing.F) {
	f.Add("put", "resp_1", string(encodeValue(&value{Record: *rec("resp_1", "", "x")})))
	f.Add("delete", "resp_2", "")
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
