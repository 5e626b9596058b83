package service

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	responsesv1 "github.com/hermod/hermod/libs/api/hermod/responses/v1"
	"github.com/hermod/hermod/services/responses/internal/memory"
	"github.com/hermod/hermod/services/responses/internal/store"
)

func TestMethodsAndCodes(t *testing.T) {
	s := New(memory.New(memory.Options{TTL: time.Hour, MaxEntryBytes: 100}), 3)
	ctx := context.Background()
	put := func(id, prev string, n int) error {
		_, err := s.Put(ctx, &responsesv1.PutRequest{Response: &responsesv1.StoredResponse{Id: id, PreviousResponseId: prev, CreatedAtUnixMs: 42, Data: []byte(strings.Repeat("d", n))}})
		return err
	}
	for i, id := range []string{"a", "b", "c", "d"} {
		prev := ""
		if i > 0 {
			prev = string(rune('a' + i - 1))
		}
		if err := put(id, prev, 1); err != nil {
			t.Fatal(err)
		}
	}
	if code := status.Code(put("big", "", 200)); code != codes.InvalidArgument {
		t.Fatalf("too large: %s", code)
	}
	if code := status.Code(put("", "", 1)); code != codes.InvalidArgument {
		t.Fatalf("no id: %s", code)
	}
	got, err := s.Get(ctx, &responsesv1.GetRequest{Id: "b"})
	if err != nil || got.GetResponse().GetPreviousResponseId() != "a" || got.GetTier() != "memory" || got.GetResponse().GetCreatedAtUnixMs() != 42 {
		t.Fatalf("get: %v %v", got, err)
	}
	chain, err := s.GetChain(ctx, &responsesv1.GetChainRequest{Id: "c"})
	if err != nil || len(chain.GetResponses()) != 3 || chain.GetResponses()[0].GetId() != "a" {
		t.Fatalf("chain: %v %v", chain, err)
	}
	// the service's limit (3) and a request's lower one
	if _, err := s.GetChain(ctx, &responsesv1.GetChainRequest{Id: "d"}); status.Code(err) != codes.OutOfRange {
		t.Fatalf("chain of 4 with limit 3: %v", err)
	}
	if _, err := s.GetChain(ctx, &responsesv1.GetChainRequest{Id: "b", Limit: 1}); status.Code(err) != codes.OutOfRange {
		t.Fatalf("chain of 2 with limit 1: %v", err)
	}
	if _, err := s.Get(ctx, &responsesv1.GetRequest{Id: "zz"}); status.Code(err) != codes.NotFound {
		t.Fatalf("unknown: %v", err)
	}
	if _, err := s.Delete(ctx, &responsesv1.DeleteRequest{Id: "a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Delete(ctx, &responsesv1.DeleteRequest{Id: "a"}); status.Code(err) != codes.NotFound {
		t.Fatalf("second delete: %v", err)
	}
	if _, err := s.GetChain(ctx, &responsesv1.GetChainRequest{Id: "c"}); status.Code(err) != codes.NotFound {
		t.Fatalf("broken chain: %v", err)
	}
}

func TestBackgroundMethods(t *testing.T) {
	st := memory.New(memory.Options{TTL: time.Hour})
	s := New(st, 3)
	ctx := context.Background()
	sub := &responsesv1.SubmitRequest{Response: &responsesv1.StoredResponse{Id: "resp_b", Data: []byte("queued")}, Request: []byte("{}"), Headers: map[string]string{"Authorization": "Bearer k"}}
	if _, err := s.Submit(ctx, sub); status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "--gateway-url") {
		t.Fatalf("submit without runners: %v", err)
	}
	woken := 0
	s.RunBackground(func() { woken++ })
	if _, err := s.Submit(ctx, &responsesv1.SubmitRequest{Response: sub.Response}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("submit without a request: %v", err)
	}
	res, err := s.Submit(ctx, sub)
	if err != nil || res.GetJob().GetStatus() != "queued" || woken != 1 {
		t.Fatalf("submit: %v %v (woken %d)", res, err, woken)
	}
	job, err := st.Claim(ctx, "tok", time.Minute)
	if err != nil || job == nil {
		t.Fatalf("claim: %v %v", job, err)
	}
	put := func(token string) error {
		_, err := s.Put(ctx, &responsesv1.PutRequest{Response: &responsesv1.StoredResponse{Id: "resp_b", Data: []byte("done")}, RunToken: token})
		return err
	}
	if code := status.Code(put("other")); code != codes.FailedPrecondition {
		t.Fatalf("put by a run that does not hold the job: %s", code)
	}
	if got, _ := s.GetBackground(ctx, &responsesv1.GetBackgroundRequest{Id: "resp_b"}); got.GetJob().GetStatus() != "in_progress" || got.GetJob().GetAttempts() != 1 {
		t.Fatalf("get background: %v", got)
	}
	if _, err := s.GetBackground(ctx, &responsesv1.GetBackgroundRequest{Id: "resp_b", RunToken: "other"}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("a run token that does not hold the job: %v", err)
	}
	if _, err := s.GetBackground(ctx, &responsesv1.GetBackgroundRequest{Id: "resp_b", RunToken: "tok"}); err != nil {
		t.Fatalf("the holding run's token: %v", err)
	}
	if err := put("tok"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Cancel(ctx, &responsesv1.CancelRequest{Id: "resp_b"}); got.GetJob().GetStatus() != "completed" {
		t.Fatalf("cancel a completed job: %v", got)
	}
	for _, err := range []error{
		func() error { _, err := s.Cancel(ctx, &responsesv1.CancelRequest{Id: "resp_x"}); return err }(),
		func() error {
			_, err := s.GetBackground(ctx, &responsesv1.GetBackgroundRequest{Id: "resp_x"})
			return err
		}(),
	} {
		if status.Code(err) != codes.NotFound {
			t.Fatalf("unknown job: %v", err)
		}
	}
}

func TestSwapCodes(t *testing.T) {
	s := New(memory.New(memory.Options{TTL: time.Hour, MaxEntryBytes: 100}), 3)
	ctx := context.Background()
	rec := func(data string) *responsesv1.StoredResponse {
		return &responsesv1.StoredResponse{Id: "conv_1", CreatedAtUnixMs: 42, Data: []byte(data)}
	}
	put, err := s.Put(ctx, &responsesv1.PutRequest{Response: rec("v1")})
	if err != nil || put.GetRevision() == 0 {
		t.Fatalf("put: %v %v", put, err)
	}
	got, err := s.Get(ctx, &responsesv1.GetRequest{Id: "conv_1"})
	if err != nil || got.GetResponse().GetRevision() != put.GetRevision() {
		t.Fatalf("get: revision %x, put gave %x (%v)", got.GetResponse().GetRevision(), put.GetRevision(), err)
	}
	if _, err := s.Swap(ctx, &responsesv1.SwapRequest{Response: rec("v2"), Revision: put.GetRevision() + 1}); status.Code(err) != codes.Aborted {
		t.Fatalf("swap against another revision: %v", err)
	}
	sw, err := s.Swap(ctx, &responsesv1.SwapRequest{Response: rec("v2"), Revision: put.GetRevision()})
	if err != nil || sw.GetRevision() == put.GetRevision() || sw.GetRevision() == 0 {
		t.Fatalf("swap: %v %v", sw, err)
	}
	if got, _ := s.Get(ctx, &responsesv1.GetRequest{Id: "conv_1"}); string(got.GetResponse().GetData()) != "v2" || got.GetResponse().GetRevision() != sw.GetRevision() {
		t.Fatalf("after the swap: %v", got)
	}
	unknown := rec("x")
	unknown.Id = "conv_none"
	if _, err := s.Swap(ctx, &responsesv1.SwapRequest{Response: unknown, Revision: 1}); status.Code(err) != codes.NotFound {
		t.Fatalf("swap of an unknown record: %v", err)
	}
	if _, err := s.Swap(ctx, &responsesv1.SwapRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("swap without a record: %v", err)
	}
	if _, err := s.Swap(ctx, &responsesv1.SwapRequest{Response: rec(strings.Repeat("d", 200)), Revision: sw.GetRevision()}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("swap over the limit: %v", err)
	}
}

func TestEventCodes(t *testing.T) {
	mem := memory.New(memory.Options{TTL: time.Hour})
	s := New(mem, 3)
	ctx := context.Background()
	if err := mem.Submit(ctx, &store.Record{ID: "resp_e", Data: []byte("q")}, &store.Job{Request: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	j, err := mem.Claim(ctx, "tok", time.Minute)
	if err != nil || j == nil {
		t.Fatal(j, err)
	}
	app := func(token string, from int64, evs ...string) (*responsesv1.AppendEventsResponse, error) {
		req := &responsesv1.AppendEventsRequest{Id: "resp_e", RunToken: token, From: from}
		for _, e := range evs {
			req.Events = append(req.Events, []byte(e))
		}
		return s.AppendEvents(ctx, req)
	}
	if res, err := app("tok", 0, "a", "b"); err != nil || res.GetLength() != 2 {
		t.Fatalf("append: %v %v", res, err)
	}
	for _, c := range []struct {
		token string
		from  int64
		code  codes.Code
	}{{"", 0, codes.InvalidArgument}, {"other", 2, codes.FailedPrecondition}, {"tok", 9, codes.Aborted}} {
		if _, err := app(c.token, c.from, "x"); status.Code(err) != c.code {
			t.Errorf("append by %q at %d: %v, want %s", c.token, c.from, err, c.code)
		}
	}
	res, err := s.ReadEvents(ctx, &responsesv1.ReadEventsRequest{Id: "resp_e", From: 1})
	if err != nil || len(res.GetEvents()) != 1 || string(res.GetEvents()[0]) != "b" {
		t.Fatalf("read: %v %v", res, err)
	}
	if _, err := s.ReadEvents(ctx, &responsesv1.ReadEventsRequest{Id: "resp_e", From: -1}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("read from -1: %v", err)
	}
	// the final events land with the completion
	put := &responsesv1.PutRequest{Response: &responsesv1.StoredResponse{Id: "resp_e", Data: []byte("done")}, RunToken: "tok",
		Events: [][]byte{[]byte("c")}, EventsFrom: 2}
	if _, err := s.Put(ctx, put); err != nil {
		t.Fatal(err)
	}
	if res, _ := s.ReadEvents(ctx, &responsesv1.ReadEventsRequest{Id: "resp_e"}); len(res.GetEvents()) != 3 {
		t.Fatalf("after the completion: %d events", len(res.GetEvents()))
	}
}
