package bootstrap

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	eventsv1 "github.com/hermod/hermod/libs/api/hermod/events/v1"
	"github.com/hermod/hermod/libs/bus"
	"github.com/hermod/hermod/testkit/bustest"
	"github.com/hermod/hermod/testkit/coordtest"
)

// Connect reaches etcd and NATS with Hermod's streams in place; a
// publisher's events are flushed at Close, before the connection closes,
// and Close closes every connection.
func TestConnect(t *testing.T) {
	natsSrv := bustest.Start(t)
	etcdSrv, err := coordtest.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	defer etcdSrv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	s, err := Start(ctx, Options{Name: "hermod-test", Config: Config{Pool: "p", EtcdEndpoints: etcdSrv.Endpoints(), NATSURL: natsSrv.ClientURL()}, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Etcd.Put(ctx, "/hermod/test", "x"); err != nil {
		t.Fatalf("etcd: %v", err)
	}
	if _, err := b.JetStream.Stream(ctx, bus.CompletionsStream); err != nil {
		t.Fatalf("the streams are not in place: %v", err)
	}
	pub, err := s.Publisher(b.NATS, "test events")
	if err != nil {
		t.Fatal(err)
	}
	subject, err := bus.CompletionsSubject("p")
	if err != nil {
		t.Fatal(err)
	}
	if !pub.Publish(subject, "c1", &eventsv1.RequestCompleted{DecisionId: "c1", Pool: "p", Time: timestamppb.Now()}) {
		t.Fatal("not queued")
	}
	s.Close()
	if !b.NATS.IsClosed() {
		t.Error("the NATS connection is open after Close")
	}
	nc, js := bustest.Connect(t, natsSrv)
	defer nc.Close()
	st, err := js.Stream(ctx, bus.CompletionsStream)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := st.Info(ctx); err != nil || info.State.Msgs != 1 {
		t.Errorf("the event queued before Close was not flushed: %+v %v", info, err)
	}
	if _, err := b.Etcd.Get(context.Background(), "/hermod/test"); err == nil {
		t.Error("the etcd client answers after Close")
	}
}
