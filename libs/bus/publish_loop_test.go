package bus

import (
	"errors"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func TestParseAck(t *testing.T) {
	for _, tc := range []struct {
		name    string
		msg     *nats.Msg
		dup     bool
		wantErr error // nil: none; apiError: a *jetstream.APIError
	}{
		{name: "stored", msg: &nats.Msg{Data: []byte(`{"stream":"HERMOD_DECISIONS","seq":12}`)}},
		{name: "duplicate", msg: &nats.Msg{Data: []byte(`{"stream":"HERMOD_DECISIONS","seq":12,"duplicate":true}`)}, dup: true},
		{name: "no responders", msg: &nats.Msg{Header: nats.Header{"Status": []string{"503"}}}, wantErr: nats.ErrNoResponders},
		{name: "stream error", msg: &nats.Msg{Data: []byte(`{"error":{"code":503,"err_code":10077,"description":"maximum messages exceeded"}}`)},
			wantErr: errAPI},
		{name: "garbage", msg: &nats.Msg{Data: []byte(`nope`)}, wantErr: errBadAck},
		{name: "no stream", msg: &nats.Msg{Data: []byte(`{}`)}, wantErr: errBadAck},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dup, err := parseAck(tc.msg)
			var apiErr *jetstream.APIError
			switch {
			case tc.wantErr == nil:
				if err != nil || dup != tc.dup {
					t.Fatalf("got %v, %v, want %v", dup, err, tc.dup)
				}
			case errors.Is(tc.wantErr, errAPI):
				if !errors.As(err, &apiErr) || apiErr.ErrorCode != 10077 {
					t.Fatalf("err = %v, want the stream's API error", err)
				}
			case !errors.Is(err, tc.wantErr):
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
		})
	}
}

// errAPI marks the cases that expect a *jetstream.APIError.
var errAPI = errors.New("api error")

func TestRing(t *testing.T) {
	r := newRing(4)
	if r.byID(1) != nil {
		t.Fatal("byID on an empty ring")
	}
	next := uint64(10)
	push := func() {
		r.push(inflight{id: next})
		next++
	}
	// Fill, drain and refill so that the entries wrap around the buffer.
	for range 3 {
		push()
	}
	r.pop()
	r.pop()
	for range 3 {
		push()
	}
	if r.len() != 4 || r.head().id != 12 {
		t.Fatalf("len %d, head %d", r.len(), r.head().id)
	}
	for id := uint64(12); id < 16; id++ {
		if e := r.byID(id); e == nil || e.id != id {
			t.Fatalf("byID(%d) = %v", id, e)
		}
	}
	for _, id := range []uint64{0, 11, 16, 1 << 63} {
		if e := r.byID(id); e != nil {
			t.Fatalf("byID(%d) = %v, want nil", id, e)
		}
	}
	var ids []uint64
	r.each(func(e *inflight) { ids = append(ids, e.id) })
	if len(ids) != 4 || ids[0] != 12 || ids[3] != 15 {
		t.Fatalf("each: %v", ids)
	}
}

func TestErrorClasses(t *testing.T) {
	for _, err := range []error{nats.ErrDisconnected, nats.ErrReconnectBufExceeded, nats.ErrConnectionClosed} {
		if !connectionError(err) || permanentPublishError(err) {
			t.Errorf("%v: not a connection error", err)
		}
	}
	for _, err := range []error{nats.ErrMaxPayload, nats.ErrBadSubject} {
		if !permanentPublishError(err) || connectionError(err) {
			t.Errorf("%v: not permanent", err)
		}
	}
	for _, err := range []error{errAckTimeout, nats.ErrNoResponders, &jetstream.APIError{Code: 503}} {
		if permanentPublishError(err) || connectionError(err) {
			t.Errorf("%v: should count as a retried attempt", err)
		}
	}
}
